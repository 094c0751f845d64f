"""The shape of the code: no import cycle between our modules, an engine that never
knows it is served, modules a reader can hold, and imports that load only what they
need.

Imports are read from the source with ``ast``, so every import counts: at module
level, inside functions, and under ``if TYPE_CHECKING`` (a cycle through type hints
is still a cycle in the design).  What an import loads at run time is checked in a
fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("registry", "protocol")
MAX_LINES = 450

#: Rules the protocol layer still breaks until its half of issue 14 lands.  Each is
#: a strict expected failure: once the rule holds, the test fails until the entry
#: is removed here.
NOT_YET: dict[str, str] = {}

#: Module -> packages it must not load when imported (checked in a fresh interpreter).
LEAN_IMPORTS = {
    # The engine never knows it is served.
    "registry.registry": ("protocol", "pygls", "lsprotocol"),
    # The clients load no engine and no server; the CLI, started once per command,
    # loads not even asyncio, pygls, lsprotocol or attrs -- nor socket (it speaks
    # through _socket) and termios (for a person's terminal only): ~5 ms of its start.
    "protocol.client": ("registry", "pygls.server", "pygls.lsp.server", "protocol.server"),
    "protocol.cli": (
        "registry",
        "asyncio",
        "pygls",
        "lsprotocol",
        "attrs",
        "psutil",
        "socket",
        "selectors",
        "termios",
    ),
}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(name: str, path: Path) -> set[str]:
    """The project modules that module ``name`` (at ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            # ``from . import x`` imports the module x when there is one; the
            # package itself only for names that are not modules of it.
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in MODULES else base)
    return {module for module in found if module in MODULES and module != name}


GRAPH = {name: _imported(name, path) for name, path in MODULES.items()}


def _cycle(graph: dict[str, set[str]], modules: set[str]) -> list[str] | None:
    """One import cycle among ``modules`` (as a path back to its start), or None."""
    state: dict[str, str] = {}  # "open" while on the current path, then "done"
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module] & modules):
            if state.get(target) == "open":
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        path.pop()
        state[module] = "done"
        return None

    for module in sorted(modules):
        if module not in state and (found := visit(module)) is not None:
            return found
    return None


def _not_yet(key: str) -> list[pytest.MarkDecorator]:
    reason = NOT_YET.get(key)
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def test_the_graph_is_read() -> None:
    # The checks below would pass on an empty graph: make sure imports are found.
    assert "registry.terminals.base" in GRAPH["registry.terminals.shell"]
    assert "registry.shell" in GRAPH["registry.terminals.shell"]  # from ..shell import
    assert "registry.terminals.shell" in GRAPH["registry.registry"]
    assert "registry.registry" in GRAPH["protocol.server"]
    # ... and that a cycle would be found.
    loop = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle(loop, set(loop)) == ["a", "b", "c", "a"]
    assert _cycle(loop, {"a", "b", "d"}) is None


@pytest.mark.parametrize(
    "package",
    [pytest.param(p, marks=_not_yet(f"cycle:{p}")) for p in PACKAGES],
)
def test_no_import_cycle(package: str) -> None:
    members = {m for m in MODULES if m == package or m.startswith(package + ".")}
    cycle = _cycle(GRAPH, members)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_engine_never_imports_the_protocol_layer() -> None:
    # With this, no cycle can run through both packages: protocol -> registry only.
    offenders = {
        module: sorted(m for m in targets if m.startswith("protocol"))
        for module, targets in GRAPH.items()
        if module.startswith("registry")
    }
    assert {module: found for module, found in offenders.items() if found} == {}


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(rel, marks=_not_yet(f"size:{rel}"), id=rel)
        for rel in sorted(str(p.relative_to(ROOT)) for p in MODULES.values())
    ],
)
def test_module_size(path: str) -> None:
    lines = len((ROOT / path).read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path} has {lines} lines; cut it along its jobs"


@pytest.mark.parametrize(("module", "forbidden"), sorted(LEAN_IMPORTS.items()))
def test_import_loads_only_what_it_needs(module: str, forbidden: tuple[str, ...]) -> None:
    listing = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert module in listing
    loaded = [m for m in listing if any(m == f or m.startswith(f + ".") for f in forbidden)]
    assert loaded == []
