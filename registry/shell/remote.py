"""Delivering our integration to a shell on another machine or in a container.

Nothing is installed on the target: the whole start-up travels in the one command
line that ssh (or ``docker exec``/``podman exec``) runs there,

    exec /bin/sh -c 'eval "$(printf %s <base64> | base64 -d)"'

where the base64 text is ``scripts/remote-bootstrap.sh`` preceded by its parameters
and by a function that writes our unmodified integration scripts (as here-documents)
into a private directory on the target.  That line has no backslash and no quote
inside the single quotes, so every login shell sshd may hand it to -- sh, bash, zsh,
fish, tcsh -- passes it on unchanged (measured; the facts note).  Delivering every
shell's scripts costs about 23 KB of command line, one shell's 10-14 KB.

The nonce is not in it: the bootstrap asks for it through the terminal
(:data:`NONCE_WANTED`) and the terminal answers with :func:`nonce_reply`.

Control commands (signals, sweeps, clean-up) travel the same way
(:func:`posix_command`); their scripts are in :data:`SIGNAL_FOREGROUND` and
:data:`SWEEP`.  Everything here is pure: it builds text, it runs nothing.
"""

from __future__ import annotations

import base64
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources

from .launch import SHELL_KINDS, shell_kind

__all__ = [
    "NONCE_WANTED",
    "SIGNAL_FOREGROUND",
    "SWEEP",
    "RemoteReport",
    "bootstrap_script",
    "control_command",
    "nonce_reply",
    "parse_report",
    "posix_command",
    "sh_quote",
]

#: The one unsigned property the bootstrap prints: it wants the nonce, now.
NONCE_WANTED = "NonceWanted"

#: What each shell needs in the directory: (file name on the target, our script).
_FILES: dict[str, tuple[tuple[str, str], ...]] = {
    "bash": (("bash-integration.bash", "bash-integration.bash"),),
    "zsh": (
        (".zshenv", "zsh-stub.zsh"),
        (".zprofile", "zsh-stub.zsh"),
        (".zshrc", "zsh-stub.zsh"),
        (".zlogin", "zsh-stub.zsh"),
        ("integration.zsh", "zsh-integration.zsh"),
    ),
    "fish": (("fish-integration.fish", "fish-integration.fish"),),
}

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _script(name: str) -> str:
    return (resources.files("registry.shell") / "scripts" / name).read_text("utf-8")


def sh_quote(value: str) -> str:
    """``value`` as one POSIX shell word (single-quoted)."""
    return "'" + value.replace("'", "'\\''") + "'"


def posix_command(script: str) -> str:
    """A command line that any login shell hands to ``/bin/sh`` as ``script``, intact."""
    encoded = base64.b64encode(script.encode("utf-8", "surrogateescape")).decode("ascii")
    return f"exec /bin/sh -c 'eval \"$(printf %s {encoded} | base64 -d)\"'"


def _files_function(kinds: tuple[str, ...]) -> str:
    """``__tr_files DIR``: writes the scripts of ``kinds`` into DIR, as here-documents."""
    lines = ["__tr_files() {"]
    written: dict[str, str] = {}
    for kind in kinds:
        for target, source in _FILES[kind]:
            if source in written:
                # The zsh stubs are one file under four names.
                lines.append(f'  cp -- "$1/{written[source]}" "$1/{target}" || return 1')
                continue
            text = _script(source)
            end = "__TR_END_" + secrets.token_hex(6)
            while end in text:  # pragma: no cover - 48 random bits
                end = "__TR_END_" + secrets.token_hex(6)
            lines.append(f"  cat >\"$1/{target}\" <<'{end}' || return 1")
            lines.append(text.rstrip("\n"))
            lines.append(end)
            written[source] = target
    lines.append("}")
    return "\n".join(lines)


def bootstrap_script(
    *,
    tag: str,
    cwd: str,
    shell: str | None,
    login: bool,
    env: Mapping[str, str] | None = None,
    integration: bool = True,
) -> str:
    """The bootstrap with its parameters: what :func:`posix_command` wraps.

    With ``shell`` given, only its integration is delivered; without, the target
    picks the user's shell and every shell's integration travels.  Without
    ``integration`` none does: the shell starts plain (strategy none).
    """
    kind = shell_kind(shell) if shell else None
    kinds = (kind,) if kind else (() if shell else SHELL_KINDS)
    if not integration:
        kinds = ()
    exports = []
    for name, value in (env or {}).items():
        if not _NAME.fullmatch(name):
            raise ValueError(f"invalid environment variable name {name!r}")
        exports.append(f"  export {name}={sh_quote(value)}")
    parts = [
        f"__tr_tag={sh_quote(tag)}",
        f"__tr_cwd={sh_quote(cwd)}",
        f"__tr_shell={sh_quote(shell or '')}",
        f"__tr_login={'1' if login else '0'}",
        _files_function(kinds),
        "__tr_env() {",
        *exports,
        "  :",
        "}",
        _script("remote-bootstrap.sh"),
    ]
    return "\n".join(parts)


def nonce_reply(nonce: str) -> bytes:
    """What the terminal types when the bootstrap asks for the nonce (echo is off)."""
    return nonce.encode("ascii") + b"\n"


@dataclass(frozen=True)
class RemoteReport:
    """What the bootstrap reported in its signed ``P;Remote=...`` (or why it failed)."""

    pid: int = 0
    host: str = ""
    directory: str = ""
    home: str = ""
    shell: str = ""
    kind: str = "none"
    cwd: str = ""
    #: Set when the bootstrap could not start the shell (``P;RemoteFailed=``).
    failure: str | None = None


def parse_report(fields: tuple[str, ...]) -> RemoteReport | None:
    """The report in a verified P marker's fields; None when it is not one."""
    values = dict(f.partition("=")[::2] for f in fields)
    if "RemoteFailed" in values:
        return RemoteReport(failure=values["RemoteFailed"] or "unknown")
    pid = values.get("Remote", "")
    if not pid.isdigit():
        return None
    return RemoteReport(
        pid=int(pid),
        host=values.get("Host", ""),
        directory=values.get("Dir", ""),
        home=values.get("Home", ""),
        shell=values.get("Shell", ""),
        kind=values.get("Kind", "none"),
        cwd=values.get("Cwd", ""),
    )


#: Control script: send signal $2 to the foreground job of the terminal whose shell is
#: $1 -- its tty's foreground process group (/proc/<pid>/stat field 8, else ps) and,
#: as the local provider does, every descendant of the group's members (with /proc).
#: Prints ``sent <pgid>``, or ``shell`` when the shell itself is in the foreground,
#: or ``gone`` when the shell is not there.  Signal 0 only asks.
SIGNAL_FOREGROUND = r"""
pid=$1 sig=$2 tpgid=
if [ -r "/proc/$pid/stat" ]; then
  IFS= read -r stat <"/proc/$pid/stat" 2>/dev/null || { echo gone; exit 0; }
  set -- ${stat##*) }
  tpgid=$6
elif kill -0 "$pid" 2>/dev/null; then
  tpgid=$(ps -o tpgid= -p "$pid" 2>/dev/null | tr -d ' ')
else
  echo gone; exit 0
fi
if [ -z "$tpgid" ] || [ "$tpgid" -le 0 ] || [ "$tpgid" = "$pid" ]; then
  echo shell; exit 0
fi
tree=
if [ "$sig" != 0 ] && [ -d /proc/self ]; then
  tree=$(
    for f in /proc/[0-9]*/stat; do
      IFS= read -r line <"$f" 2>/dev/null || continue
      set -- ${line##*) }
      echo "${line%% *} $2 $3"
    done | awk -v g="$tpgid" '
      { parent[$1] = $2; if ($3 == g) found[$1] = 1 }
      END {
        do { more = 0
          for (p in parent) if (!(p in found) && (parent[p] in found)) { found[p] = 1; more = 1 }
        } while (more)
        for (p in found) print p
      }'
  )
fi
kill "-$sig" "-$tpgid" $tree 2>/dev/null
echo "sent $tpgid"
"""

#: Control script: end every process carrying the terminal's tag ($1, the variable's
#: whole ``NAME=value``): SIGHUP to the shell ($2) first, as a closing terminal would,
#: then SIGTERM to all, then SIGKILL, each after up to $3 steps of 20 ms; then remove
#: the scratch directory ($4).  Prints how many processes it found.  (It polls /proc:
#: a POSIX shell has no way to wait for another process's exit.)  Without /proc
#: (macOS, BSD) only the shell is found.
SWEEP = r"""
want=$1 shell=$2 grace=$3 dir=$4 me=$$
if [ ! -d /proc/self ]; then
  [ "$shell" -gt 0 ] 2>/dev/null && kill -HUP "$shell" 2>/dev/null && echo 1 || echo 0
  [ -n "$dir" ] && rm -rf -- "$dir"
  exit 0
fi
if printf 'a\0' | grep -qz a 2>/dev/null; then zgrep=1; else zgrep=; fi
tagged() {
  if [ -n "$zgrep" ]; then
    for f in $(grep -lzxF -- "$want" /proc/[0-9]*/environ 2>/dev/null); do
      p=${f#/proc/}; p=${p%/environ}
      [ "$p" = "$me" ] || printf '%s ' "$p"
    done
  else
    for f in /proc/[0-9]*/environ; do
      p=${f#/proc/}; p=${p%/environ}
      [ "$p" = "$me" ] && continue
      tr '\0' '\n' <"$f" 2>/dev/null | grep -qxF -- "$want" && printf '%s ' "$p"
    done
  fi
}
settle() {
  n=0
  while [ "$n" -lt "$grace" ]; do
    left=$(tagged)
    [ -z "$left" ] && return 0
    sleep 0.02 2>/dev/null || sleep 1
    n=$((n + 1))
  done
  return 1
}
found=$(tagged)
count=0
for p in $found; do count=$((count + 1)); done
if [ -n "$found" ]; then
  [ "$shell" -gt 0 ] 2>/dev/null && kill -HUP "$shell" 2>/dev/null
  if ! settle; then
    kill -TERM $left 2>/dev/null
    settle || kill -KILL $left 2>/dev/null
  fi
fi
[ -n "$dir" ] && rm -rf -- "$dir"
echo "$count"
"""


def control_command(script: str, *args: str) -> str:
    """:func:`posix_command` of ``script`` run with ``args`` as $1, $2, ..."""
    return posix_command("set -- " + " ".join(sh_quote(a) for a in args) + "\n" + script)
