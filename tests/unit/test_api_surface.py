"""The public API: result types of every operation importable from ``repoinstall`` (loaded on first use), and
``ensure_all`` typed by ``return_exceptions``."""

from __future__ import annotations

import subprocess
import sys
import typing

import repoinstall
from repoinstall import Repo


def test_every_result_type_is_exported() -> None:
    from repoinstall._disk.manifest import TreeEntry
    from repoinstall._ops.doctor import Finding
    from repoinstall._ops.gc import Removal
    from repoinstall._ops.lockinfo import LockInfo
    from repoinstall._ops.remove import Removed
    from repoinstall._ops.verify import TreeReport
    from repoinstall._store.usage import StoreUsage

    exported = {name: getattr(repoinstall, name) for name in repoinstall.__all__}
    assert exported["TreeReport"] is TreeReport and exported["LockInfo"] is LockInfo
    assert exported["Removal"] is Removal and exported["Finding"] is Finding and exported["TreeEntry"] is TreeEntry
    assert exported["Removed"] is Removed and exported["StoreUsage"] is StoreUsage
    from repoinstall._errors import InstallError, SourceRefused
    from repoinstall._oci.layer import Refused

    assert exported["SourceRefused"] is SourceRefused and issubclass(Refused, SourceRefused)
    assert issubclass(SourceRefused, InstallError)


def test_importing_the_package_loads_no_operator_module() -> None:
    probe = "import sys, repoinstall; print(sorted(m for m in sys.modules if m.startswith('repoinstall._ops')))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_ensure_all_is_overloaded_on_return_exceptions() -> None:
    for method in (Repo.ensure_all, Repo.aensure_all):
        overloads = typing.get_overloads(method)
        assert len(overloads) == 2
        hints = [typing.get_type_hints(o)["return"] for o in overloads]
        assert hints[0] == list[repoinstall.EnsureResult], hints


def _checking_namespace(module: object) -> dict[str, object]:
    """A module's globals plus what it imports only for type checkers (``if TYPE_CHECKING:``), resolved."""
    import ast
    import importlib
    import inspect

    namespace = dict(vars(module))
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    package = module.__name__.rpartition(".")[0]  # type: ignore[attr-defined]
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom):
                    source = importlib.import_module("." * statement.level + (statement.module or ""), package)
                    namespace.update({a.asname or a.name: getattr(source, a.name) for a in statement.names})
                elif isinstance(statement, ast.Import):
                    namespace.update({a.asname or a.name: importlib.import_module(a.name) for a in statement.names})
    return namespace


def _named_types(hint: object, found: set[type]) -> None:
    origin = typing.get_origin(hint)
    if origin is not None:
        for arg in typing.get_args(hint):
            _named_types(arg, found)
        hint = origin
    if isinstance(hint, type) and hint.__module__.startswith("repoinstall"):
        found.add(hint)


def public_signature_types() -> set[type]:
    """Every repoinstall type that ``Repo``'s public methods name, and, transitively, the fields of those types."""
    import inspect

    found: set[type] = set()
    names = sorted(n for n, _ in inspect.getmembers(Repo) if not n.startswith("_") or n == "__init__")
    todo: list[tuple[object, object]] = [(getattr(Repo, n), Repo) for n in names]
    done: set[type] = set()
    while todo:
        member, owner = todo.pop()
        function = member.fget if isinstance(member, property) else member
        if not callable(function):
            continue
        module = sys.modules[getattr(function, "__module__", None) or owner.__module__]  # type: ignore[attr-defined]
        hints = typing.get_type_hints(function, _checking_namespace(module))
        new: set[type] = set()
        for hint in hints.values():
            _named_types(hint, new)
        for kind in new - done:
            done.add(kind)
            if not issubclass(kind, BaseException):
                fields = typing.get_type_hints(kind, _checking_namespace(sys.modules[kind.__module__]))
                more: set[type] = set()
                for hint in fields.values():
                    _named_types(hint, more)
                found |= more
        found |= new
    return found


def test_every_type_a_public_signature_names_is_exported_and_documented() -> None:
    from pathlib import Path

    reference = (Path(__file__).parents[2] / "docs" / "reference" / "api.md").read_text()
    missing = sorted(
        k.__qualname__ for k in public_signature_types() if getattr(repoinstall, k.__name__, None) is not k
    )
    assert missing == [], f"named by Repo's public signatures but not importable from repoinstall: {missing}"
    undocumented = sorted(
        k.__name__ for k in public_signature_types() if f"repoinstall.{k.__name__}\n" not in reference
    )
    assert undocumented == [], f"exported but without an entry in docs/reference/api.md: {undocumented}"
