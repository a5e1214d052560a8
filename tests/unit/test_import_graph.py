"""The package's import graph has no cycle, counting imports inside functions too (a lazy import that closes a
circle still ties the modules together), and the result values sit at the bottom."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "repoinstall"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports anywhere in its body (top level, functions, TYPE_CHECKING)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                # "from . import _fs" imports the submodule, not the package's __init__ (which always runs
                # first anyway); a name that is not a submodule comes from the module named.
                submodules = [f"{target}.{alias.name}" for alias in node.names]
                candidates = [*submodules, *([target] if not all(m in modules for m in submodules) else [])]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            found.update(c for c in candidates if c in modules and c != name)
        graph[name] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_imports_inside_functions() -> None:
    graph = import_graph()
    # imported inside backend():
    assert "repoinstall._install.backends.pip" in graph["repoinstall._install.backends.run"]


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_result_values_import_nothing_from_the_package() -> None:
    assert import_graph()["repoinstall._results"] == set()


#: The package's layers, lowest first. A module may import from its own layer's package or from a lower layer,
#: never from a higher one: plain values at the bottom, the command line at the top.
LAYERS = [
    # values and leaf helpers: the version, hiding credentials, settings, results, errors, logging, URLs, pip's
    # configuration, text files, stopping installs and the worker threads that stop as one
    {
        *("_version", "_redact", "_errors", "_results", "_options", "_log", "_events", "_urls", "_textfile"),
        "_pipconfig",
        *("_stop", "_batch", "_formats"),
    },
    {"_disk"},  # the repo on disk: layout, fs, identity, manifest, the check
    {"_lock"},  # the lock on the shared volume: what it guards, how to wait, filelock's lock and its state
    {"_store"},  # the store of distributions, trees composed from it
    {"_requirements"},  # specs, bounded by the store's tree names
    {"_lockfile"},  # what a lock file installs here (a pure reader)
    {"_index", "_install"},  # asking an index; making a tree exist (neither imports the other)
    {"_oci"},  # trees as OCI images: pushed, and pulled into the store through the install protocol
    {"_ops"},  # operator commands: verify, repair, gc, remove, lock info, doctor, list
    {"_choose", "_activate"},
    {"_ensuring"},  # what an ensure decides, for Repo's sync and async paths alike
    {"_repo"},
    {"repoinstall"},  # the public names (__init__)
    {"_workers"},  # what a worker runtime asks, over the public Repo
    {"dask", "ray", "celery"},  # the engine adapters, each over _workers (none imports another)
    {"_cli"},
    {"__main__"},
]


def _unit(module: str) -> str:
    """The layer unit of a module: its subpackage (``_disk``), or the top-level module itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _rank(unit: str) -> int:
    for rank, layer in enumerate(LAYERS):
        if unit in layer:
            return rank
    raise AssertionError(f"{unit} is in no layer: add it to LAYERS")


def test_no_module_imports_from_a_higher_layer_or_a_sibling_package() -> None:
    upward = []
    for module, imports in import_graph().items():
        for imported in imports:
            mine, theirs = _unit(module), _unit(imported)
            if mine != theirs and (_rank(theirs) > _rank(mine) or {mine, theirs} == {"_index", "_install"}):
                upward.append(f"{module} -> {imported}")
    assert upward == []


def test_the_layer_check_sees_an_upward_import() -> None:
    assert _rank(_unit("repoinstall._disk.check")) < _rank(_unit("repoinstall._repo"))
    assert _unit("repoinstall._install.backends.pip") == "_install"


def test_subpackage_inits_import_nothing() -> None:
    inits = [name for name in import_graph() if (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists()]
    eager = {name: sorted(import_graph()[name]) for name in inits if name != "repoinstall" and import_graph()[name]}
    assert len(inits) >= 6
    assert eager == {}


def test_only_the_lock_package_knows_a_locks_files() -> None:
    """filelock's format is read in ``_lock/filelock_rw`` alone, and a lock's file names in ``_lock/`` alone: the
    operator commands and the index cache ask ``_lock.state`` (names and readings as values)."""
    graph = import_graph()
    outside = {m for m in graph if not m.startswith("repoinstall._lock")}
    assert sorted(m for m in outside if "repoinstall._lock.filelock_rw" in graph[m]) == []
    names = ("LOCK_SUFFIX", "STATE_SUFFIX", "OWNER_SUFFIX", "state_name")
    knowing = {
        m: [n for n in names if n in (PACKAGE.parent / m.replace(".", "/")).with_suffix(".py").read_text()]
        for m in outside
        if (PACKAGE.parent / m.replace(".", "/")).with_suffix(".py").is_file()
    }
    # The layout defines the owner note's suffix (a staging dir's note shares it); nobody else names one.
    assert {m: n for m, n in knowing.items() if n and m != "repoinstall._disk.layout"} == {}
