"""What the repo reports about its store is true, and a tree is the same whatever came before it.

``doctor`` run by a second UID whose trees are copies (``fs.protected_hardlinks``) does not say "hard links: yes";
a tree's dist-info does not carry what a lock's install stored first (``direct_url.json``, ``REQUESTED``); and
``verify`` sees what write access to the store can do to a stored distribution (see the second half).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import otheruid
import pytest
from helpers import document, ensure_args, run
from indexserver import IndexServer
from wheels import make_wheel

from repoinstall._disk.identity import environment_tag

GROUP = 2000


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    server = otheruid.serve_app_other_lib(tmp_path_factory.mktemp("truth-wheels"))
    yield server
    server.stop()


def _stored(repo: Path, project: str = "lib") -> Path:
    (found,) = (repo / "store" / environment_tag() / project).iterdir()
    return found


@pytest.fixture
def shared() -> Iterator[Path]:
    if not otheruid.available():
        pytest.skip("needs root, unshare and setpriv")
    if Path("/proc/sys/fs/protected_hardlinks").read_text().strip() != "1":
        pytest.skip("needs fs.protected_hardlinks = 1")
    with otheruid.shared_repo(GROUP) as repo:
        yield repo


def test_doctor_of_a_uid_whose_trees_are_copies_does_not_say_hard_links_yes(shared: Path, served: IndexServer) -> None:
    assert run(*ensure_args(shared, served.url, "app==1.0")).returncode == 0  # lib stored by uid 0
    composed = otheruid.run_as(1001, GROUP, *ensure_args(shared, served.url, "other==1.0"), groups=(GROUP,))
    assert composed.returncode == 0, composed.stderr
    tree = Path(document(composed.stdout)["packages"][0]["path"])
    stored = next(p for p in _stored(shared).rglob("*.py"))
    copy = tree / stored.relative_to(_stored(shared))
    assert copy.stat().st_ino != stored.stat().st_ino, "uid 1001 may not link uid 0's file: a copy"

    doctor = otheruid.run_as(1001, GROUP, "doctor", "--repo", shared, "--json", groups=(GROUP,))
    (links,) = [f for f in json.loads(doctor.stdout)["findings"] if f["check"] == "hard links"]
    assert links["result"] == (
        "own files only: another UID's stored files (uid 0) are refused (EPERM; fs.protected_hardlinks), so trees "
        "this UID composes from them are copies"
    ), links
    assert "one runAsUser" in links["consequence"]
    mine = run("doctor", "--repo", shared, "--json")  # uid 0 links anything: true for it
    assert [f["result"] for f in json.loads(mine.stdout)["findings"] if f["check"] == "hard links"] == ["yes"]


def test_a_trees_dist_info_does_not_depend_on_a_lock_installed_before(
    served: IndexServer, repo: Path, tmp_path: Path
) -> None:
    wheel = served.files("lib")[0]
    lock = tmp_path / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\ncreated-by = "hand"\n[[packages]]\nname = "lib"\nversion = "1.0"\n'
        f'wheels = [{{ url = "{served.url}{wheel.name}", hashes = {{ sha256 = "{served.sha256(wheel)}" }} }}]\n'
    )
    first = run("ensure", "--repo", repo, "--json", "-r", lock)
    assert first.returncode == 0, first.stderr
    later = run(*ensure_args(repo, served.url, "other==1.0"))  # from the index, composed of the stored lib
    assert later.returncode == 0, later.stderr
    info = "lib-1.0.dist-info"
    stored = _stored(repo) / info
    for tree in (
        Path(document(first.stdout)["packages"][0]["path"]),
        Path(document(later.stdout)["packages"][0]["path"]),
    ):
        assert not (tree / info / "direct_url.json").exists() and not (tree / info / "REQUESTED").exists(), tree
    assert sorted(p.name for p in stored.iterdir()) == ["INSTALLER", "METADATA", "RECORD", "WHEEL"]
    assert "direct_url.json" not in (stored / "RECORD").read_text()
    assert run("verify", "--repo", repo).returncode == 0


# ---- what verify sees of write access to the store ------------------------------------------------------------


def _store_report(repo: Path) -> tuple[int, dict[str, object]]:
    done = run("verify", "--repo", repo, "--json")
    (lib,) = [d for d in json.loads(done.stdout)["store"] if d["dist"] == "lib==1.0"]
    return done.returncode, lib


def _writable(directory: Path) -> None:
    for path in [directory, *directory.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)


@pytest.mark.parametrize(("mode", "shown"), [(0o666, "0666"), (0o4555, "4555")], ids=["0666", "setuid"])
def test_a_stored_file_of_an_unsafe_mode_is_reported_and_never_linked_again(
    served: IndexServer, repo: Path, mode: int, shown: str
) -> None:
    assert run(*ensure_args(repo, served.url, "app==1.0")).returncode == 0
    stored = _stored(repo)
    module = next(stored.rglob("*.py"))
    module.chmod(mode)
    code, lib = _store_report(repo)
    assert code == 1 and lib["status"] == "changed", lib
    assert f"{module.relative_to(stored)} has mode {shown} (stored files are read-only, never setuid)" in lib["notes"]
    later = run(*ensure_args(repo, served.url, "other==1.0"))  # composes lib: set aside, stored afresh first
    assert later.returncode == 0, later.stderr
    tree = Path(document(later.stdout)["packages"][0]["path"])
    assert (tree / module.relative_to(stored)).stat().st_mode & 0o7777 == 0o444
    assert _store_report(repo)[1]["status"] == "ok"


def test_a_file_changed_with_its_record_line_is_reported(served: IndexServer, repo: Path) -> None:
    import base64
    import hashlib

    assert run(*ensure_args(repo, served.url, "app==1.0")).returncode == 0
    stored = _stored(repo)
    _writable(stored)
    module = next(p for p in stored.rglob("*.py") if "dist-info" not in str(p))
    relative = module.relative_to(stored).as_posix()
    data = b"X = 'changed with its RECORD line'\n"
    module.write_bytes(data)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record = stored / "lib-1.0.dist-info" / "RECORD"
    lines = [
        f"{relative},sha256={digest},{len(data)}" if line.split(",")[0] == relative else line
        for line in record.read_text().splitlines()
    ]
    record.write_text("\n".join(lines) + "\n")
    code, lib = _store_report(repo)
    assert code == 1 and lib["status"] == "changed" and lib["changed"] == [], lib
    assert any("its RECORD is not the one stored" in note for note in lib["notes"]), lib


def test_another_builds_files_under_this_artifacts_name_are_reported_and_not_composed(
    served: IndexServer, repo: Path, tmp_path: Path
) -> None:
    assert run(*ensure_args(repo, served.url, "app==1.0")).returncode == 0
    other_build = tmp_path / "other-build"
    other_build.mkdir()
    make_wheel(other_build, "lib", "1.0", modules=3)  # lib 1.0 again, another artifact, self-consistent
    elsewhere = IndexServer(other_build).start()
    try:
        second = tmp_path / "second"
        assert run(*ensure_args(second, elsewhere.url, "lib==1.0")).returncode == 0
    finally:
        elsewhere.stop()
    ours, theirs = _stored(repo), _stored(second)
    assert ours.name != theirs.name
    _writable(ours)
    shutil.rmtree(ours)
    shutil.copytree(theirs, ours, symlinks=True)  # its files, under our artifact's name

    code, lib = _store_report(repo)
    assert code == 1 and lib["status"] == "changed", lib
    assert any("another build's files under this artifact's name" in note for note in lib["notes"]), lib
    later = run(*ensure_args(repo, served.url, "other==1.0"))
    assert later.returncode == 0, later.stderr
    tree = Path(document(later.stdout)["packages"][0]["path"])
    assert len(list((tree / "lib").glob("part_*.py"))) == 2, "composed of this artifact's files, stored afresh"
