"""The store's parts on real installs: one pip run split by RECORD into one dir per distribution, and trees
composed from those dirs by hard links (one inode per file, however many trees hold it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import pip_target
from wheels import make_wheel

from repoinstall._disk.dists import check_tree, scan
from repoinstall._errors import InstallError, InvalidRequirement
from repoinstall._store.compose import compose
from repoinstall._store.identity import DistId
from repoinstall._store.split import split


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("store-wheels")
    return {
        "alpha": make_wheel(directory, "alpha", "1.0", modules=2, scripts={"alpha-tool": "alpha:main"}),
        "beta": make_wheel(directory, "beta", "2.0", modules=1),
        "gamma": make_wheel(directory, "gamma", "1.0"),
    }


def test_one_run_is_split_into_one_dir_per_distribution(tmp_path: Path, wheels: dict[str, Path]) -> None:
    combined = tmp_path / "combined"
    pip_target(combined, *wheels.values())
    made = split(str(combined), str(tmp_path / "split"))
    assert sorted(made) == ["alpha-1.0.dist-info", "beta-2.0.dist-info", "gamma-1.0.dist-info"]
    alpha = Path(made["alpha-1.0.dist-info"])
    assert (alpha / "alpha" / "__init__.py").is_file() and (alpha / "bin" / "alpha-tool").is_file()
    assert list((alpha / "alpha" / "__pycache__").glob("*.pyc"))  # its bytecode goes with it
    assert not (alpha / "beta").exists()
    assert not [p for p in combined.rglob("*") if p.is_file()]  # every file moved, none left behind


def test_a_directory_two_distributions_share_is_split_file_by_file(tmp_path: Path) -> None:
    """A namespace package's directory holds two distributions' files: each goes to its own distribution, while a
    directory one distribution owns whole (its package, its dist-info) moves as one, with what it holds."""
    ns_a = make_wheel(tmp_path, "ns-a", "1.0", more={"ns/a/__init__.py": b"A = 1\n", "ns/a/deep/x.py": b"X = 1\n"})
    ns_b = make_wheel(tmp_path, "ns-b", "1.0", more={"ns/b/__init__.py": b"B = 1\n", "ns/shared.txt": b"b\n"})
    combined = tmp_path / "combined"
    pip_target(combined, ns_a, ns_b)
    made = split(str(combined), str(tmp_path / "split"))
    a, b = Path(made["ns_a-1.0.dist-info"]), Path(made["ns_b-1.0.dist-info"])
    files = {
        side: sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for side, root in (("a", a), ("b", b))
    }  # fmt: skip
    assert [f for f in files["a"] if f.startswith("ns/")] == ["ns/a/__init__.py", "ns/a/deep/x.py"]
    assert [f for f in files["b"] if f.startswith("ns/")] == ["ns/b/__init__.py", "ns/shared.txt"]
    assert (a / "ns_a" / "__init__.py").is_file() and (a / "ns_a-1.0.dist-info" / "RECORD").is_file()
    assert not [p for p in combined.rglob("*") if not p.is_dir()]  # every file moved, none left behind


def test_trees_composed_from_the_store_share_every_file(tmp_path: Path, wheels: dict[str, Path]) -> None:
    combined = tmp_path / "combined"
    pip_target(combined, *wheels.values())
    made = split(str(combined), str(tmp_path / "store"))
    for stored in made.values():
        assert not check_tree(stored, scan(stored), seal=True)  # each file checked, and made read-only
    one, two = tmp_path / "one", tmp_path / "two"
    first = compose(str(one), [("alpha", made["alpha-1.0.dist-info"]), ("beta", made["beta-2.0.dist-info"])])
    compose(str(two), [("alpha", made["alpha-1.0.dist-info"]), ("gamma", made["gamma-1.0.dist-info"])])
    assert first.copied == 0 and first.linked > 5
    shared = one / "alpha" / "__init__.py"
    assert shared.stat().st_ino == (two / "alpha" / "__init__.py").stat().st_ino
    assert shared.stat().st_nlink == 3  # the store's, and two trees'
    assert shared.stat().st_mode & 0o777 == 0o444
    # Each tree is one dir to put on sys.path: both import as a --target install would.
    code = "import alpha, beta; print(alpha.__file__)"
    env = {**os.environ, "PYTHONPATH": str(one)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=False)
    assert done.returncode == 0 and str(one) in done.stdout.decode(), done.stderr


def test_two_distributions_that_write_one_path_are_refused(tmp_path: Path, wheels: dict[str, Path]) -> None:
    # Two versions of alpha write the same files: one tree cannot hold both.
    other = make_wheel(tmp_path, "alpha", "1.1")
    stores = []
    for index, wheel in enumerate((wheels["alpha"], other)):
        combined = tmp_path / f"combined-{index}"
        pip_target(combined, wheel)
        stores.append(next(iter(split(str(combined), str(tmp_path / f"store-{index}")).values())))
    with pytest.raises(InstallError, match=r"^alpha 1\.0 and alpha 1\.1 both write alpha/__init__\.py"):
        compose(str(tmp_path / "tree"), [("alpha 1.0", stores[0]), ("alpha 1.1", stores[1])])


def test_a_file_no_record_lists_is_refused(tmp_path: Path, wheels: dict[str, Path]) -> None:
    combined = tmp_path / "combined"
    pip_target(combined, wheels["gamma"])
    (combined / "stray.txt").write_text("nobody's")
    with pytest.raises(InstallError, match=r"stray\.txt: listed in no distribution's RECORD"):
        split(str(combined), str(tmp_path / "store"))


def test_a_stored_distribution_is_named_by_its_artifact() -> None:
    dist = DistId.of("cp311-cp311-x", "Alpha_Pkg", "1.0.0", "ab" * 32)
    assert dist.parts() == ("store", "cp311-cp311-x", "alpha-pkg", "1-abababababababab")
    with pytest.raises(InvalidRequirement):
        DistId.of("cp311-cp311-x", "../etc", "1.0", "ab" * 32)
    with pytest.raises(InvalidRequirement):
        DistId.of("cp311-cp311-x", "alpha", "1.0", "not-a-hash")


def test_a_trees_part_of_a_resolution_follows_requirements_markers_and_extras() -> None:
    from packaging.requirements import Requirement

    from repoinstall._store.requires import closure

    needs = {
        "app": [Requirement("lib-a>=1"), Requirement("lib-win; sys_platform == 'win32'"), Requirement("web[fast]")],
        "lib-a": [Requirement("lib-b")],
        "lib-b": [],
        "lib-win": [],
        "web": [Requirement("speedy; extra == 'fast'"), Requirement("docs; extra == 'docs'")],
        "speedy": [],
        "docs": [],
        "other": [Requirement("lib-b")],
    }
    linux = {"sys_platform": "linux", "python_version": "3.11"}
    found = closure("app", (), needs, linux)
    assert found is not None and set(found) == {"app", "lib-a", "lib-b", "web", "speedy"}
    assert str(found["lib-a"]) == ">=1" and str(found["app"]) == ""  # what the tree asks of each
    assert set(closure("other", (), needs, linux) or ()) == {"other", "lib-b"}
    assert set(closure("web", ("docs",), needs, linux) or ()) == {"web", "docs"}
    assert set(closure("app", (), needs, {**linux, "sys_platform": "win32"}) or ()) == {
        "app", "lib-a", "lib-b", "lib-win", "web", "speedy"
    }  # fmt: skip
    # A requirement naming nothing in the set: not one resolution of this root, so the tree resolves on its own.
    assert closure("app", (), {k: v for k, v in needs.items() if k != "lib-b"}, linux) is None


def test_a_sealing_check_makes_each_file_it_checked_read_only_and_no_other(
    tmp_path: Path, wheels: dict[str, Path]
) -> None:
    """A distribution is sealed as it is checked for its publish: each recorded file that matches its RECORD, and
    each unrecorded pyc, read-only for everyone (executables stay executable); a file that does not match is left
    as it is (the check fails, and nothing is published)."""
    combined = tmp_path / "combined"
    pip_target(combined, wheels["alpha"])
    stored = Path(split(str(combined), str(tmp_path / "store"))["alpha-1.0.dist-info"])
    unrecorded = stored / "alpha" / "__pycache__" / "__init__.cpython-311.opt-1.pyc"
    unrecorded.write_bytes(b"not a record's")
    assert not check_tree(str(stored), scan(str(stored)), seal=True)
    modes = {p.relative_to(stored): p.stat().st_mode & 0o7777 for p in stored.rglob("*") if p.is_file()}
    assert modes[Path("bin/alpha-tool")] == 0o555
    assert modes[unrecorded.relative_to(stored)] == 0o444
    assert set(modes.values()) == {0o444, 0o555} and len(modes) > 5
    # A file changed after its install: the check says so and leaves its mode alone.
    other = tmp_path / "other"
    pip_target(other, wheels["beta"])
    beta = Path(split(str(other), str(tmp_path / "store-2"))["beta-2.0.dist-info"])
    changed = beta / "beta" / "__init__.py"
    changed.write_text("changed = True\n")
    changed.chmod(0o640)
    problems = check_tree(str(beta), scan(str(beta)), seal=True)
    assert problems.changed == ("beta/__init__.py",)
    assert changed.stat().st_mode & 0o7777 == 0o640
    assert (beta / "beta-2.0.dist-info" / "METADATA").stat().st_mode & 0o7777 == 0o444


@pytest.mark.parametrize(
    ("recorded", "relative"),
    [
        ("alpha/__init__.py", "alpha/__init__.py"),
        ("alpha-1.0.dist-info/RECORD", "alpha-1.0.dist-info/RECORD"),
        ("../../bin/alpha-tool", "bin/alpha-tool"),
        ("alpha\\sub\\x.py", "alpha/sub/x.py"),
        ("./alpha/x.py", "alpha/x.py"),
        ("alpha//x.py", "alpha/x.py"),
        ("alpha/../beta/x.py", "beta/x.py"),
        ("alpha/x.py/", "alpha/x.py"),
        ("../../../etc/passwd", None),
        ("/etc/passwd", None),
        ("../x", "lib/x"),  # beside purelib in the home scheme pip --target installs into
        ("../python", None),
        ("", None),
    ],
)
def test_a_record_path_is_placed_in_the_tree_or_refused(recorded: str, relative: str | None) -> None:
    from repoinstall._disk.dists import tree_relative

    assert tree_relative(recorded) == relative
