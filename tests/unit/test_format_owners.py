"""Each on-disk format has one owner module: no other module spells its names."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "repoinstall"


def _strings(path: Path) -> set[str]:
    """Every string constant in a module, f-string parts included, docstrings left out."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


def _spelled_outside(owner: str, names: set[str], *, whole: bool = False) -> dict[str, set[str]]:
    """Modules other than ``owner`` (a path below the package) with a string holding one of ``names`` (equal to one,
    if ``whole``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        hits = {s for s in _strings(path) if (s in names if whole else any(n in s for n in names))}
        module = path.relative_to(PACKAGE).as_posix()
        if module != owner and hits:
            found[module] = hits
    return found


def _importers(top: str) -> set[str]:
    """The modules of the package that import ``top`` (or a module of it), anywhere in their body."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if any(name == top or name.startswith(top + ".") for name in names):
                found.add(path.relative_to(PACKAGE).as_posix())
    return found


#: The one module that imports filelock or knows its on-disk layout.
FILELOCK_MODULE = "_lock/filelock_rw.py"


def test_only_the_lock_format_module_knows_filelocks_layout() -> None:
    # The repo's format file states the lock protocol its writers speak: the one other place that names it.
    assert _spelled_outside(FILELOCK_MODULE, {".lock.rw", "holders", "/gen"}) == {}
    assert _spelled_outside(FILELOCK_MODULE, {"filelock-rw"}) == {"_disk/repoformat.py": {"filelock-rw/1"}}
    assert _spelled_outside(FILELOCK_MODULE, {"gen", ".rw"}, whole=True) == {}


def test_only_the_lock_format_module_imports_filelock() -> None:
    assert _importers("filelock") == {FILELOCK_MODULE}


def test_the_check_sees_a_planted_spelling(tmp_path: Path) -> None:
    planted = tmp_path / "m.py"
    planted.write_text('"""holders in a docstring are fine."""\nX = f"{1}/gen"\nY = "holders"\n')
    assert _strings(planted) >= {"/gen", "holders"}
    assert "holders in a docstring are fine." not in _strings(planted)
