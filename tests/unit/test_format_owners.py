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
    """Modules other than ``owner`` with a string holding one of ``names`` (equal to one, if ``whole``)."""
    found = {}
    for path in sorted(PACKAGE.glob("*.py")):
        hits = {s for s in _strings(path) if (s in names if whole else any(n in s for n in names))}
        if path.stem != owner and hits:
            found[path.stem] = hits
    return found


def test_only_the_lock_format_module_knows_filelocks_layout() -> None:
    filelock_names = {".lock.rw", "holders", "filelock-rw", "/gen"}
    assert _spelled_outside("_lockformat", filelock_names) == {}
    assert _spelled_outside("_lockformat", {"gen", ".rw"}, whole=True) == {}


def test_the_check_sees_a_planted_spelling(tmp_path: Path) -> None:
    planted = tmp_path / "m.py"
    planted.write_text('"""holders in a docstring are fine."""\nX = f"{1}/gen"\nY = "holders"\n')
    assert _strings(planted) >= {"/gen", "holders"}
    assert "holders in a docstring are fine." not in _strings(planted)
