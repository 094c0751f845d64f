# terminal-registry shell integration for bash (>= 4.4), loaded with `bash --init-file`.
#
# Makes the shell report, as OSC 633 sequences ending with the terminal's nonce:
#   A prompt start, B prompt end, C and E;<command line> before a command runs,
#   D;<exit code> when it has ended, P;Cwd=<dir> before every prompt, F/G around the
#   continuation prompt (PS2), and once, before the user's startup files run,
#   P;IntegrationStarting=bash (so a slow rc is waited for, not given up on), and
#   P;JobNotices=<text> for background jobs that ended while the prompt was up.
# It sources what an interactive bash would have sourced, then hooks in while keeping
# the user's $?, PROMPT_COMMAND (string or array), DEBUG trap and bash-preexec arrays.
# Every variable reference survives `set -u`.

# The nonce comes in a file of our private directory, read once and deleted; from then
# on it lives in an unexported shell variable only, so no program started from here
# finds it in any environment, argv or file (/proc/<pid>/environ keeps the initial
# environment for good: the nonce was never in it).
__tr_dir="${TERMINAL_REGISTRY_DIR-}"
__tr_login="${TERMINAL_REGISTRY_LOGIN-}"
__tr_nonce=""
if [[ -n "$__tr_dir" && -r "$__tr_dir/nonce" ]]; then
  IFS= builtin read -r __tr_nonce <"$__tr_dir/nonce"
  command rm -f -- "$__tr_dir/nonce"
fi
unset TERMINAL_REGISTRY_DIR TERMINAL_REGISTRY_LOGIN

__tr_osc() {
  builtin printf '\e]633;%s;%s\a' "$1" "$__tr_nonce"
}

[[ -n "$__tr_nonce" ]] && __tr_osc "P;IntegrationStarting=bash"

# bash itself has sourced /etc/bash.bashrc (Debian's SYS_BASHRC) even with --init-file.
if [[ "$__tr_login" == 1 ]]; then
  [[ -r /etc/profile ]] && builtin source /etc/profile
  for __tr_file in "$HOME/.bash_profile" "$HOME/.bash_login" "$HOME/.profile"; do
    if [[ -r "$__tr_file" ]]; then builtin source "$__tr_file"; break; fi
  done
  unset __tr_file
elif [[ -r "$HOME/.bashrc" ]]; then
  builtin source "$HOME/.bashrc"
fi

if [[ -n "$__tr_nonce" ]]; then

# Agent commands stay out of the user's history file; history in memory still works.
unset HISTFILE

# Escape a value for a 633 field into __tr_escaped: \ ; and control characters.
__tr_escape() {
  local s="$1"
  s="${s//\\/\\\\}"
  s="${s//;/\\x3b}"
  if [[ "$s" == *[[:cntrl:]]* ]]; then
    s="${s//$'\n'/\\x0a}"
    s="${s//$'\r'/\\x0d}"
    s="${s//$'\t'/\\x09}"
    s="${s//$'\e'/\\x1b}"
    s="${s//$'\a'/\\x07}"
    s="${s//$'\x18'/\\x18}"
    s="${s//$'\x1a'/\\x1a}"
  fi
  __tr_escaped="$s"
}

# The command line about to run, into __tr_line. `history 1` is read through a file
# of ours rather than $(...), which would fork on every command, and split by `read`
# rather than a regex (bash compiles a =~ pattern on every use: 0.1 ms). When history
# did not take the line (HISTCONTROL=ignorespace, history off), $BASH_COMMAND is
# what we have.
__tr_history_number=""
__tr_command_line() {
  __tr_line="$BASH_COMMAND"
  [[ -n "$__tr_dir" ]] || return 0
  local number="" entry=""
  HISTTIMEFORMAT='' builtin history 1 >|"$__tr_dir/history" 2>/dev/null || return 0
  IFS=$' \t' builtin read -r -d '' number entry <"$__tr_dir/history"
  number="${number%\*}"  # `12*`: an entry edited in place
  if [[ -n "$number" && "$number" != "$__tr_history_number" ]]; then
    __tr_history_number="$number"
    __tr_line="${entry%$'\n'}"
  fi
}

__tr_armed=""    # set when a prompt is up: the next simple command starts a command line
__tr_running=""  # a command line started since the last prompt, so a D is due

# C comes from PS0, which bash prints after reading a command line and before running
# it -- for every kind of command, subshells and compound commands included, where
# the DEBUG trap would not fire. Its expansion also sets __tr_running (an array
# subscript is arithmetic, and the element it names is empty). E comes from the
# DEBUG trap, which sees the command line, just after. (No \[ \] here: PS0 does not
# go through readline, which is what strips them.)
__tr_ps0_c="\${__tr_nil[__tr_running=1]-}\e]633;C;$__tr_nonce\a"

# A background job that ended while the prompt was up is reported by bash just before
# the next command runs -- inside that command's output. `jobs -n` here, before bash
# gets to it, takes the notices (and marks them reported, so bash prints nothing);
# they go in a marker of their own: output of no command.  It runs only while some
# job started since the last time every job had ended and been told of ($! moved):
# a shell that starts no background job pays one comparison.
__tr_jobs_told=""
__tr_jobs_escape='\j'
__tr_job_notices() {
  [[ -n "$__tr_dir" && "${!-}" != "$__tr_jobs_told" ]] || return 0
  builtin jobs -n >|"$__tr_dir/jobs" 2>/dev/null || return 0
  if [[ -s "$__tr_dir/jobs" ]]; then
    local notices=""
    IFS= builtin read -r -d '' notices <"$__tr_dir/jobs"
    __tr_escape "$notices"
    __tr_osc "P;JobNotices=$__tr_escaped"
  fi
  # \j (the prompt escape) counts the jobs still running: none, all told.
  [[ "${__tr_jobs_escape@P}" != 0 ]] || __tr_jobs_told="${!-}"
}

# E carries at most 8 KB of the command line: escaped, it stays far inside the
# server's 64 KB bound on one marker (a longer one would be given up on as output).
# A command line the server typed needs no E (it knows what it typed): it says so by
# writing to the file "ours" just before, and we empty it -- a stat and a truncate
# instead of the history round trip (0.25 ms of a 0.5 ms command).
__tr_preexec() {
  __tr_armed=""
  __tr_running=1
  __tr_job_notices
  if [[ -s "$__tr_dir/ours" ]]; then
    : >|"$__tr_dir/ours"
    return 0
  fi
  __tr_command_line
  (( ${#__tr_line} <= 8192 )) || __tr_line="${__tr_line:0:8192}"
  __tr_escape "$__tr_line"
  __tr_osc "E;$__tr_escaped"
}

__tr_histcmd="${HISTCMD-}"
__tr_pwd=""
__tr_pwd_escaped=""
__tr_precmd() {
  local status="$?"
  __tr_armed=""
  # Our line ran no simple command (a subshell, a syntax error): "ours" is for it only.
  [[ ! -s "$__tr_dir/ours" ]] || : >|"$__tr_dir/ours"
  if [[ "$PWD" != "$__tr_pwd" ]]; then  # escaped once per directory, not per prompt
    __tr_pwd="$PWD"
    __tr_escape "$PWD"
    __tr_pwd_escaped="$__tr_escaped"
  fi
  if [[ -z "$__tr_running" && "${HISTCMD-}" != "$__tr_histcmd" ]]; then
    # A line went into history and nothing ran: bash refused it (a syntax error,
    # status 2) or it was only a comment. Its status is bash's own, as `echo $?`
    # would show it.
    __tr_running=1
  fi
  __tr_histcmd="${HISTCMD-}"
  if [[ -n "$__tr_running" ]]; then
    __tr_running=""
    # D and P in one write: one wake-up of the terminal instead of two.
    builtin printf '\e]633;D;%s;%s\a\e]633;P;Cwd=%s;%s\a' \
      "$status" "$__tr_nonce" "$__tr_pwd_escaped" "$__tr_nonce"
  else
    __tr_osc "P;Cwd=$__tr_pwd_escaped"
  fi
  return "$status"
}

# PS1 and PS2 get our markers around whatever the user's prompt code left in them;
# PS0 gets our C in front of the user's own PS0.
__tr_ps0_ours=""
__tr_ps1_ours=""
__tr_ps2_ours=""
__tr_wrap_prompts() {
  local status="$?"
  # The common case first, in one test: every prompt is ours already, none exported.
  if [[ -n "$__tr_ps0_ours" && "${PS1-}" == "$__tr_ps1_ours" && "${PS2-}" == "$__tr_ps2_ours" &&
    "${PS0-}" == "$__tr_ps0_ours" && "${PS1@a}${PS2@a}${PS0@a}" != *x* ]]; then
    return "$status"
  fi
  # Our prompts carry the nonce: an rc that exports them would hand it to every
  # program started from here.
  # (Looked at first: most rcs export none, and export -n costs more than a look.)
  if [[ -v PS1 && "${PS1@a}" == *x* || -v PS2 && "${PS2@a}" == *x* || -v PS0 && "${PS0@a}" == *x* ]]; then
    builtin export -n PS0 PS1 PS2 2>/dev/null
  fi
  if [[ -z "$__tr_ps1_ours" || "${PS1-}" != "$__tr_ps1_ours" ]]; then
    __tr_ps1_ours="\[\e]633;A;$__tr_nonce\a\]${PS1-}\[\e]633;B;$__tr_nonce\a\]"
    PS1="$__tr_ps1_ours"
  fi
  if [[ -z "$__tr_ps2_ours" || "${PS2-}" != "$__tr_ps2_ours" ]]; then
    __tr_ps2_ours="\[\e]633;F;$__tr_nonce\a\]${PS2-}\[\e]633;G;$__tr_nonce\a\]"
    PS2="$__tr_ps2_ours"
  fi
  # A read-only PS0 (an rc that locks it) cannot carry our C: then runs fall back to
  # what the screen shows, with D's exit code still exact.
  if ! [[ -v PS0 && "${PS0@a}" == *r* ]] && [[ -z "$__tr_ps0_ours" || "${PS0-}" != "$__tr_ps0_ours" ]]; then
    __tr_ps0_ours="$__tr_ps0_c${PS0-}"
    PS0="$__tr_ps0_ours"
  fi
  return "$status"
}

__tr_return() { return "$1"; }

if [[ -n "${bash_preexec_imported-}${__bp_imported-}" ]]; then
  # bash-preexec owns the DEBUG trap and PROMPT_COMMAND: join its arrays. It gives
  # every precmd function the command's $?.
  precmd_functions=(__tr_precmd "${precmd_functions[@]}" __tr_wrap_prompts)
  preexec_functions+=(__tr_preexec)
else
  # The DEBUG trap runs before every simple command; only the first one after a
  # prompt starts the user's command line. The user's own DEBUG trap runs after ours
  # with $? as it was; $_ survives because the trap's own last argument is "$_".
  __tr_user_debug_trap=""
  __tr_read_trap() { __tr_user_debug_trap="${3-}"; }
  builtin eval "__tr_read_trap $(builtin trap -p DEBUG)"
  unset -f __tr_read_trap

  __tr_debug_trap() {
    local status="$?"
    if [[ -n "$__tr_armed" && "$BASH_COMMAND" != __tr_prompt_command* ]]; then
      __tr_preexec
    fi
    if [[ -n "$__tr_user_debug_trap" ]]; then
      __tr_return "$status"
      builtin eval "$__tr_user_debug_trap"
    fi
  }
  if [[ -n "$__tr_user_debug_trap" ]]; then
    builtin trap '__tr_debug_trap "$_"' DEBUG
  else
    # The trap runs before every simple command, our prompt code's included: the
    # cheapest test first (a function call costs 20 us more per command).
    builtin trap '[[ -z "$__tr_armed" ]] || __tr_debug_trap "$_"' DEBUG
  fi

  __tr_postcmd() {
    local status="$?"
    __tr_wrap_prompts
    __tr_armed=1
    return "$status"
  }

  # One call when the user has no prompt commands: every simple command there
  # costs a run of the DEBUG trap.
  __tr_prompt_command() {
    __tr_precmd
    __tr_postcmd
  }

  # PROMPT_COMMAND becomes: our precmd, the user's prompt commands, our postcmd.
  # $? flows through: __tr_precmd returns it for the user's commands to see.
  if [[ "$(builtin declare -p PROMPT_COMMAND 2>/dev/null)" == "declare -a"* ]]; then
    __tr_user_prompt_command=("${PROMPT_COMMAND[@]}")
    unset PROMPT_COMMAND
    PROMPT_COMMAND=(__tr_prompt_command_pre "${__tr_user_prompt_command[@]}" __tr_postcmd)
  elif [[ -n "${PROMPT_COMMAND-}" ]]; then
    PROMPT_COMMAND=$'__tr_prompt_command_pre\n'"$PROMPT_COMMAND"$'\n__tr_postcmd'
  else
    PROMPT_COMMAND=__tr_prompt_command
  fi
  __tr_prompt_command_pre() { __tr_precmd; }
fi

__tr_wrap_prompts

# Whether multi-line commands can be pasted whole (readline's bracketed paste).
__tr_bracketed_paste=off
if [[ -n "$__tr_dir" ]] && builtin bind -v >|"$__tr_dir/bind" 2>/dev/null; then
  IFS= builtin read -r -d '' __tr_bind <"$__tr_dir/bind"
  [[ "${__tr_bind-}" == *"enable-bracketed-paste on"* ]] && __tr_bracketed_paste=on
  unset __tr_bind
fi
__tr_osc "P;BracketedPaste=$__tr_bracketed_paste"

fi
