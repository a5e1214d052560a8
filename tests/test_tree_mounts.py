"""Trees checked where they are mounted, before anything imports from them: a real tree made by `ensure`, under
a real ``noexec`` tmpfs (as CRI-O's first image-volume support mounted image volumes: every C extension fails
with "failed to map segment") or under an empty one (as k3s has mounted them, with no error), each in a mount
namespace of its own (``unshare -m``), so nothing is mounted outside the test's subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import cli, isolated_env, run
from wheels import make_wheel

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0
    or shutil.which("unshare") is None
    or subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False).returncode != 0,
    reason="needs root and unshare -m (a mount namespace) to mount a tmpfs",
)
SPEC = "mounted-pkg==1.0"
#: In a mount namespace of its own: a tmpfs with ``$1`` (its options) over the tree ``$2``, holding a copy of the
#: tree (``$3``: a scratch dir to copy it through) unless ``$3`` is empty, then the command after them.
MOUNT = """set -e
if [ -n "$3" ]; then cp -a "$2/." "$3/"; fi
mount -t tmpfs -o "$1" tmpfs "$2"
if [ -n "$3" ]; then cp -a "$3/." "$2/"; fi
shift 3
exec "$@"
"""
#: Activates the tree through the public API, prints what came of it.
ACTIVATE = textwrap.dedent("""
    import sys
    from repoinstall import Repo, RepoinstallError
    with Repo(sys.argv[1]) as repo:
        try:
            with repo.activate(sys.argv[2]):
                import mounted_pkg
        except RepoinstallError as error:
            print(type(error).__name__, error.exit_code, error)
            raise SystemExit(error.exit_code)
    print("activated", mounted_pkg.__file__)
""")


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A repo with one tree installed from a toy wheel: (the repo, the tree's path)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "mounted-pkg", "1.0")
    repo = tmp_path / "repo"
    done = run("ensure", SPEC, "--repo", repo, "--no-index", "-f", wheels)
    assert done.returncode == 0, done.stderr
    found = run("path", SPEC, "--repo", repo)
    assert found.returncode == 0, found.stderr
    return repo, Path(found.stdout.strip())


def mounted(options: str, tree: Path, scratch: Path | None, *command: str | Path) -> subprocess.CompletedProcess[str]:
    """``command`` run with a tmpfs mounted (``options``) over ``tree``: a copy of it with ``scratch``, else empty."""
    if scratch is not None:
        scratch.mkdir()
    return subprocess.run(
        ["unshare", "-m", "--", "sh", "-c", MOUNT, "sh", options, str(tree), str(scratch or ""), *map(str, command)],
        env=isolated_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_a_tree_mounted_noexec_is_refused_by_activate_and_check_trees(tree: tuple[Path, Path], tmp_path: Path) -> None:
    repo, path = tree
    # The same copy mounted exec: activated and checked fine (the tmpfs and the copy are not what is refused).
    fine = mounted("exec", path, tmp_path / "copy", sys.executable, "-c", ACTIVATE, repo, SPEC)
    assert fine.returncode == 0 and fine.stdout.startswith(f"activated {path}/"), fine.stderr
    assert mounted("exec", path, tmp_path / "copy2", *cli("check-trees", path)).returncode == 0

    refused = mounted("noexec", path, tmp_path / "copy3", sys.executable, "-c", ACTIVATE, repo, SPEC)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    (line,) = refused.stdout.splitlines()
    assert line.startswith(f"RepoUnusable 2 {path} is mounted noexec: no C extension can load from it"), line
    assert "upgrade the runtime, or use the trees on the shared volume" in line, line

    checked = mounted("noexec", path, tmp_path / "copy4", *cli("check-trees", path))
    assert checked.returncode == 2 and checked.stdout == "", checked
    assert checked.stderr.splitlines() == [f"repoinstall: error: {line.split(' ', 2)[2]}"]


def test_a_tree_mounted_empty_is_refused_by_check_trees(tree: tuple[Path, Path]) -> None:
    repo, path = tree
    checked = mounted("exec", path, None, *cli("check-trees", path))
    assert checked.returncode == 2 and checked.stdout == "", checked
    (line,) = checked.stderr.splitlines()
    assert line.startswith(f"repoinstall: error: {path} holds no distribution (no *.dist-info): an image volume"), line
    assert "mounted empty (k3s#14323)" in line and "what `repoinstall push` printed" in line, line
    # Repo.activate finds no tree there at all (its record's marker is in the tree): refused before the check.
    refused = mounted("exec", path, None, sys.executable, "-c", ACTIVATE, repo, SPEC)
    assert refused.returncode == 1 and refused.stdout.startswith(f"NotInstalled 1 {SPEC}: not installed"), refused
    # Nothing was mounted outside the namespaces: the tree is whole where it is.
    assert run("check-trees", path).returncode == 0
    assert run("verify", SPEC, "--repo", repo).returncode == 0
