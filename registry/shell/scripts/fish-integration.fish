# terminal-registry shell integration for fish (>= 3.2), run by `fish --init-command`
# after the user's configuration.
#
# Makes the shell report, as OSC 633 sequences ending with the terminal's nonce:
#   A prompt start, B prompt end, E;<command line> and C before a command runs,
#   D;<exit code> when it has ended, P;Cwd=<dir> before every prompt.
# fish has no continuation prompt, so there is no F/G.

# The nonce comes in a file of our private directory, read once and deleted; it lives
# in an unexported variable only, never in any environment or argv.
set -g __tr_nonce ""
if test -n "$TERMINAL_REGISTRY_DIR"; and test -r "$TERMINAL_REGISTRY_DIR/nonce"
    read -g __tr_nonce <"$TERMINAL_REGISTRY_DIR/nonce"
    command rm -f -- "$TERMINAL_REGISTRY_DIR/nonce"
end
set -e TERMINAL_REGISTRY_DIR
test -n "$__tr_nonce"; or exit 0

# Agent commands stay out of the user's history file.
set -g fish_private_mode 1

function __tr_osc
    printf '\e]633;%s;%s\a' $argv[1] $__tr_nonce
end

function __tr_escape
    string join \n -- $argv \
        | string replace -a -- '\\' '\\\\' \
        | string replace -a -- ';' '\\x3b' \
        | string replace -a -- \e '\\x1b' \
        | string replace -a -- \a '\\x07' \
        | string replace -a -- \r '\\x0d' \
        | string replace -a -- \t '\\x09' \
        | string join '\\x0a'
end

set -g __tr_running 0

# E carries at most 8 KB of the command line: escaped, it stays far inside the
# server's 64 KB bound on one marker (a longer one would be given up on as output).
function __tr_preexec --on-event fish_preexec
    set -g __tr_running 1
    __tr_osc "E;"(__tr_escape (string sub -l 8192 -- $argv[1]))
    __tr_osc C
end

function __tr_postexec --on-event fish_postexec
    set -l last_status $status
    if test $__tr_running = 1
        set -g __tr_running 0
        __tr_osc "D;$last_status"
    end
end

# The prompt gets our markers around the user's prompt function.
if functions -q fish_prompt
    functions -c fish_prompt __tr_user_fish_prompt
else
    function __tr_user_fish_prompt
        printf '%s> ' (prompt_pwd)
    end
end

# P;Cwd once per new prompt: fish calls fish_prompt again to repaint (after a
# resize, say), and a repaint must not look like the end of a command.
function __tr_new_prompt --on-event fish_prompt
    __tr_osc "P;Cwd="(__tr_escape $PWD)
end

# A line with a syntax error runs nothing and fires no fish_prompt event: its
# prompt comes back all the same.
function __tr_syntax_error --on-event fish_posterror
    __tr_osc "P;Cwd="(__tr_escape $PWD)
end

function fish_prompt
    set -l last_status $status
    __tr_osc A
    __tr_restore_status $last_status
    __tr_user_fish_prompt
    __tr_osc B
end

function __tr_restore_status
    return $argv[1]
end

__tr_osc "P;BracketedPaste=on"
