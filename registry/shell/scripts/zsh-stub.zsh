# terminal-registry: startup-file stub in a private ZDOTDIR (a copy of this file is
# saved as .zshenv, .zprofile, .zshrc and .zlogin there). It runs the user's file of
# the same name with ZDOTDIR pointing at the user's directory, as zsh would have, then
# points ZDOTDIR back here so zsh finds the next stub. The .zshrc stub then loads our
# integration; the last stub of the startup hands ZDOTDIR back to the user for good,
# so child shells never see ours.
__tr_stub="${${(%):-%N}:t}"
if [[ "$__tr_stub" == .zshenv ]]; then
  __tr_our_zdotdir="$ZDOTDIR"
  __tr_user_zdotdir="${TERMINAL_REGISTRY_USER_ZDOTDIR:-$HOME}"
  __tr_user_zdotdir_set="${TERMINAL_REGISTRY_USER_ZDOTDIR+1}"
  # The nonce comes in a file of our private directory, read once and deleted; it
  # lives in an unexported shell variable only, never in any environment or argv.
  __tr_dir="${TERMINAL_REGISTRY_DIR-}"
  __tr_nonce=""
  if [[ -n "$__tr_dir" && -r "$__tr_dir/nonce" ]]; then
    IFS= builtin read -r __tr_nonce <"$__tr_dir/nonce"
    command rm -f -- "$__tr_dir/nonce"
  fi
  unset TERMINAL_REGISTRY_DIR TERMINAL_REGISTRY_USER_ZDOTDIR
  if [[ -o interactive && -n "$__tr_nonce" ]]; then
    builtin printf '\e]633;P;IntegrationStarting=zsh;%s\a' "$__tr_nonce"
  fi
fi
ZDOTDIR="$__tr_user_zdotdir"
if [[ -r "$ZDOTDIR/$__tr_stub" ]]; then
  builtin source "$ZDOTDIR/$__tr_stub"
fi
__tr_user_zdotdir="$ZDOTDIR"
ZDOTDIR="$__tr_our_zdotdir"
if [[ "$__tr_stub" == .zshrc ]]; then
  [[ -n "$__tr_nonce" && -r "$__tr_our_zdotdir/integration.zsh" ]] \
    && builtin source "$__tr_our_zdotdir/integration.zsh"
fi
if [[ "$__tr_stub" == .zlogin || ( "$__tr_stub" == .zshrc && ! -o login ) ]]; then
  if [[ -n "$__tr_user_zdotdir_set" ]]; then
    ZDOTDIR="$__tr_user_zdotdir"
  else
    unset ZDOTDIR
  fi
  unset __tr_our_zdotdir __tr_user_zdotdir __tr_user_zdotdir_set
fi
unset __tr_stub
