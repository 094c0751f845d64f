# terminal-registry shell integration for zsh (>= 5.1), sourced from our .zshrc stub
# after the user's .zshrc.
#
# Makes the shell report, as OSC 633 sequences ending with the terminal's nonce:
#   A prompt start, B prompt end, E;<command line> and C before a command runs,
#   D;<exit code> when it has ended, P;Cwd=<dir> before every prompt, F/G around the
#   continuation prompt (PS2).
# Hooks go through precmd_functions / preexec_functions, so the user's own hooks and
# themes keep working; ours come first (to see $?) and last (to wrap the prompt the
# theme has just built).

# Agent commands stay out of the user's history file; history in memory still works.
unset HISTFILE

# zsh pads a partial last line of output (PROMPT_SP: a mark, a line of spaces, CRs)
# before running precmd, so that padding would land inside every command's output.
# Like bash, an unterminated last line is then simply followed by the prompt.
builtin unsetopt PROMPT_SP

__tr_osc() {
  builtin printf '\e]633;%s;%s\a' "$1" "$__tr_nonce"
}

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

__tr_running=""

# E carries at most 8 KB of the command line: escaped, it stays far inside the
# server's 64 KB bound on one marker (a longer one would be given up on as output).
__tr_preexec() {
  __tr_running=1
  local line="${1:-${3-}}"
  (( ${#line} <= 8192 )) || line="${line[1,8192]}"
  __tr_escape "$line"
  __tr_osc "E;$__tr_escaped"
  __tr_osc C
}

__tr_precmd() {
  local __tr_status="$?"
  if [[ -n "$__tr_running" ]]; then
    __tr_running=""
    __tr_osc "D;$__tr_status"
  fi
  __tr_escape "$PWD"
  __tr_osc "P;Cwd=$__tr_escaped"
  return "$__tr_status"
}

__tr_ps1_ours=""
__tr_ps2_ours=""
__tr_wrap_prompts() {
  local __tr_status="$?"
  # Our prompts carry the nonce: an rc that exports them would hand it to every
  # program started from here.
  typeset -g +x PS1 PS2
  if [[ -z "$__tr_ps1_ours" || "${PS1-}" != "$__tr_ps1_ours" ]]; then
    __tr_ps1_ours="%{"$'\e'"]633;A;$__tr_nonce"$'\a'"%}${PS1-}%{"$'\e'"]633;B;$__tr_nonce"$'\a'"%}"
    PS1="$__tr_ps1_ours"
  fi
  if [[ -z "$__tr_ps2_ours" || "${PS2-}" != "$__tr_ps2_ours" ]]; then
    __tr_ps2_ours="%{"$'\e'"]633;F;$__tr_nonce"$'\a'"%}${PS2-}%{"$'\e'"]633;G;$__tr_nonce"$'\a'"%}"
    PS2="$__tr_ps2_ours"
  fi
  return "$__tr_status"
}

typeset -ga precmd_functions preexec_functions
precmd_functions=(__tr_precmd ${precmd_functions[@]:#__tr_*} __tr_wrap_prompts)
preexec_functions=(${preexec_functions[@]:#__tr_*} __tr_preexec)
__tr_wrap_prompts

# Whether multi-line commands can be pasted whole (zle's bracketed paste).
__tr_osc "P;BracketedPaste=${${zle_bracketed_paste:+on}:-off}"
