# terminal-registry: start a shell with our integration on another machine (ssh) or in
# a container, without touching any file of the target's except a private scratch
# directory of our own.  POSIX sh; run as `/bin/sh -c` with, before this text:
#   __tr_tag    the terminal's tag (exported as TERMINAL_REGISTRY_TERMINAL)
#   __tr_cwd    the directory to start in ("~" and "~/..." are the target's home)
#   __tr_shell  the shell to run, empty for the user's ($SHELL, else bash, zsh, sh)
#   __tr_login  1 for a login shell
#   __tr_files  a function that writes our integration scripts into the directory $1
#   __tr_env    a function that exports the variables the caller asked for
#
# The nonce never travels in argv or the environment, where the target's other users
# (/proc/<pid>/cmdline) or its logs could see it: this script asks for it with an
# unsigned 633 P;NonceWanted and reads it from the terminal with echo off.  From then
# on everything it reports is signed: P;Remote=<pid>;... once the shell is about to
# start, P;RemoteFailed=<reason> when it cannot start (and it exits 3).

umask 077

__tr_nonce=
if command -v stty >/dev/null 2>&1; then
  stty -echo 2>/dev/null
fi
printf '\033]633;P;NonceWanted\007'
IFS= read -r __tr_nonce
if command -v stty >/dev/null 2>&1; then
  stty echo 2>/dev/null
fi

# A value for a 633 field: backslash and ";" escaped (our paths hold no control bytes).
__tr_escape() {
  case $1 in
    *[\\\;]*) printf %s "$1" | sed -e 's/\\/\\\\/g' -e 's/;/\\x3b/g' ;;
    *) printf %s "$1" ;;
  esac
}

__tr_fail() {
  printf '\033]633;P;RemoteFailed=%s;%s\007' "$(__tr_escape "$1")" "$__tr_nonce"
  [ -n "${__tr_dir-}" ] && rm -rf -- "$__tr_dir"
  exit 3
}

# The scratch directory: memory-backed when there is one; 0700 (umask); named so that
# stale ones of ours (their shell gone) are swept by the next terminal.
__tr_base=
for __tr_candidate in "${XDG_RUNTIME_DIR-}" /dev/shm "${TMPDIR:-/tmp}" /tmp; do
  if [ -n "$__tr_candidate" ] && [ -d "$__tr_candidate" ] && [ -w "$__tr_candidate" ]; then
    __tr_base=$__tr_candidate
    break
  fi
done
[ -n "$__tr_base" ] || __tr_fail "no-writable-directory"
for __tr_old in "$__tr_base"/terminal-registry-remote-*; do
  [ -d "$__tr_old" ] && [ -O "$__tr_old" ] || continue
  __tr_pid=
  [ -r "$__tr_old/pid" ] && IFS= read -r __tr_pid <"$__tr_old/pid"
  if [ -z "$__tr_pid" ] || ! kill -0 "$__tr_pid" 2>/dev/null; then
    rm -rf -- "$__tr_old"
  fi
done
__tr_dir=$(mktemp -d "$__tr_base/terminal-registry-remote-XXXXXXXX" 2>/dev/null) || {
  __tr_dir=$__tr_base/terminal-registry-remote-$$
  mkdir -m 700 -- "$__tr_dir" 2>/dev/null || __tr_fail "cannot-create-directory"
}
chmod 700 "$__tr_dir"
printf '%s\n' "$$" >"$__tr_dir/pid"
__tr_files "$__tr_dir" || __tr_fail "cannot-write-scripts"

# The directory, on the target: "~" is its home; a relative path is relative to home.
case $__tr_cwd in
  "~") __tr_cwd=$HOME ;;
  "~/"*) __tr_cwd=$HOME/${__tr_cwd#"~/"} ;;
  /*) ;;
  *) __tr_cwd=$HOME/$__tr_cwd ;;
esac
if [ ! -e "$__tr_cwd" ]; then
  __tr_fail "cwd-missing"
elif [ ! -d "$__tr_cwd" ]; then
  __tr_fail "cwd-not-directory"
fi
cd -- "$__tr_cwd" 2>/dev/null || __tr_fail "cwd-denied"
export PWD

# The shell: the one asked for, else the user's, else bash, zsh, sh.
__tr_sh=
if [ -n "$__tr_shell" ]; then
  set -- "$__tr_shell"
else
  set -- "${SHELL-}" bash zsh sh
fi
for __tr_candidate in "$@"; do
  [ -n "$__tr_candidate" ] || continue
  __tr_sh=$(command -v -- "$__tr_candidate" 2>/dev/null) && [ -n "$__tr_sh" ] && break
  __tr_sh=
done
[ -n "$__tr_sh" ] || __tr_fail "shell-not-found"
case ${__tr_sh##*/} in
  bash | bash-* | bash5*) __tr_kind=bash ;;
  zsh | zsh-* | zsh5*) __tr_kind=zsh ;;
  fish | fish-*) __tr_kind=fish ;;
  *) __tr_kind=none ;;
esac
case $__tr_kind in
  bash) __tr_script=bash-integration.bash ;;
  zsh) __tr_script=.zshrc ;;
  fish) __tr_script=fish-integration.fish ;;
  *) __tr_script= ;;
esac
if [ -n "$__tr_script" ] && [ ! -r "$__tr_dir/$__tr_script" ]; then
  __tr_kind=none
fi

# What every terminal's commands start with (registry/terminals/children.py).
export TERMINAL_REGISTRY_TERMINAL="$__tr_tag"
export TERM=xterm-256color PAGER=cat GIT_PAGER=cat
export LESS="${LESS--FRX}"
if [ -z "${LC_ALL-}" ] && [ -z "${LC_CTYPE-}" ] && [ -z "${LANG-}" ]; then
  export LANG=C.UTF-8
fi
unset COLUMNS LINES
__tr_env

if [ "$__tr_kind" = none ]; then
  rm -f -- "$__tr_dir/nonce"
else
  printf '%s\n' "$__tr_nonce" >"$__tr_dir/nonce" || __tr_fail "cannot-write-scripts"
fi

printf '\033]633;P;Remote=%s;Host=%s;Dir=%s;Home=%s;Shell=%s;Kind=%s;Cwd=%s;%s\007' \
  "$$" "$(__tr_escape "$(uname -n 2>/dev/null)")" "$(__tr_escape "$__tr_dir")" \
  "$(__tr_escape "${HOME-}")" "$(__tr_escape "$__tr_sh")" "$__tr_kind" \
  "$(__tr_escape "$PWD")" "$__tr_nonce"
__tr_nonce=

export TERMINAL_REGISTRY_DIR="$__tr_dir"
case $__tr_kind in
  bash)
    [ "$__tr_login" = 1 ] && export TERMINAL_REGISTRY_LOGIN=1
    exec "$__tr_sh" --init-file "$__tr_dir/bash-integration.bash" -i
    ;;
  zsh)
    [ -n "${ZDOTDIR+set}" ] && export TERMINAL_REGISTRY_USER_ZDOTDIR="$ZDOTDIR"
    export ZDOTDIR="$__tr_dir"
    if [ "$__tr_login" = 1 ]; then exec "$__tr_sh" -i -l; fi
    exec "$__tr_sh" -i
    ;;
  fish)
    if [ "$__tr_login" = 1 ]; then
      exec "$__tr_sh" --init-command "source '$__tr_dir/fish-integration.fish'" -i -l
    fi
    exec "$__tr_sh" --init-command "source '$__tr_dir/fish-integration.fish'" -i
    ;;
  *)
    unset TERMINAL_REGISTRY_DIR
    exec "$__tr_sh" -i
    ;;
esac
