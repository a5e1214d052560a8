"""Trees without bytecode (``--no-compile``): their environment, and what their check takes for a fault."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from packaging.version import Version

from repoinstall._disk.dists import check_tree, scan
from repoinstall._disk.identity import NO_BYTECODE, TreeId, env_tag, environment_tag, has_bytecode, tree_env
from repoinstall._oci.reference import platform_of, platform_prefix, platform_tag, tag_for, wheels_tag
from repoinstall._store.identity import DistId


def test_the_environment_says_whether_trees_hold_bytecode() -> None:
    tag = environment_tag()
    assert "." not in tag  # so the mark never meets a tag
    assert (tree_env(tag), tree_env(tag, bytecode=False)) == (tag, tag + NO_BYTECODE)
    for bytecode in (True, False):
        env = tree_env(tag, bytecode)
        assert (has_bytecode(env), env_tag(env)) == (bytecode, tag)
    # Two trees, and two stored distributions of one wheel: every path of each is below its environment.
    with_pycs = TreeId(tag, "pandas", Version("2.2.3"))
    without = TreeId(tree_env(tag, bytecode=False), "pandas", Version("2.2.3"))
    assert with_pycs != without and with_pycs.leaf == without.leaf
    wheel = "ab" * 32
    stored = DistId.of(tag, "pandas", "2.2.3", wheel), DistId.of(without.env, "pandas", "2.2.3", wheel)
    assert stored[0].parts() != stored[1].parts() and stored[0].lock_key() != stored[1].lock_key()


@pytest.mark.parametrize("env", ["cp311-cp311-manylinux_2_36_x86_64", "py3-none-" + "very_long_platform_" * 4])
def test_a_tree_without_bytecode_is_another_image(env: str) -> None:
    tid = TreeId(env, "pandas", Version("2.2.3"))
    bare = tid._replace(env=env + NO_BYTECODE)
    assert tag_for(bare) != tag_for(tid) and platform_tag(bare) != platform_tag(tid)
    assert wheels_tag(bare) != wheels_tag(tid)
    # Neither one's platform tags are listed as the other's.
    assert not platform_tag(bare).startswith(platform_prefix(tid))
    assert not platform_tag(tid).startswith(platform_prefix(bare))
    assert platform_of(bare.env) == platform_of(tid.env)
    if len(env) < 40:
        assert tag_for(bare) == tag_for(tid) + NO_BYTECODE
        assert platform_tag(bare).endswith("--" + env.split("-", 2)[2])


def _tree(tmp_path: Path, pycs: dict[str, bool]) -> Path:
    """A one-dist tree: a module, and pycs recorded with their hash (True: as a wheel ships one) or without."""
    tree = tmp_path / "tree"
    (tree / "pkg" / "__pycache__").mkdir(parents=True)
    (tree / "pkg-1.0.dist-info").mkdir()
    (tree / "pkg-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
    rows = []
    for relative, data in (("pkg/__init__.py", b"x = 1\n"), *((p, b"pyc") for p in pycs)):
        (tree / relative).write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        hashed = pycs.get(relative, True)
        rows.append(f"{relative},{'sha256=' + digest if hashed else ''},{len(data) if hashed else ''}")
    rows += ["pkg-1.0.dist-info/METADATA,,", "pkg-1.0.dist-info/RECORD,,"]
    (tree / "pkg-1.0.dist-info" / "RECORD").write_text("\n".join(rows) + "\n")
    return tree


def test_a_tree_without_bytecode_holds_no_compiled_pyc(tmp_path: Path) -> None:
    shipped, compiled = "pkg/__pycache__/shipped.cpython-311.pyc", "pkg/__pycache__/__init__.cpython-311.pyc"
    tree = _tree(tmp_path, {shipped: True, compiled: False})
    (tree / "pkg" / "__pycache__" / "__init__.cpython-311.opt-1.pyc").write_bytes(b"written by python -O")
    dists = scan(str(tree))
    # With bytecode: a compiled pyc recorded without a hash is whole, one nobody recorded harmless.
    assert not check_tree(str(tree), dists)
    # Without: both are faults; the pyc its wheel ships (recorded with a hash) is its content.
    found = check_tree(str(tree), dists, bytecode=False)
    assert found and sorted(found.compiled) == ["pkg/__pycache__/__init__.cpython-311.opt-1.pyc", compiled]
    assert "2 compiled bytecode in a tree made without it" in found.summary()
    assert (found.missing, found.changed, found.extra) == ((), (), ())
