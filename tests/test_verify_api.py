"""``Repo.verify(repair=True)``: the API repairs as ``verify --repair`` does, the store before the trees, so an API
user gets the order without knowing it, and values saying what was found and done."""

from __future__ import annotations

import os
from pathlib import Path

from indexserver import IndexServer

from repoinstall import DistReport, InstallOptions, Repo, RepoinstallError, TreeReport, Verification

SHARING = ("adaptor-b==1.0", "adaptor-x[fast]==1.0")  # both need dep-c
DEP_FILE = Path("dep_c") / "__init__.py"


def _repo(path: Path, index_url: str) -> Repo:
    return Repo(path, install=InstallOptions(find_links=(index_url,), no_index=True), stale_after=2, heartbeat=0.4)


def _stored_dep(repo: Path) -> Path:
    (stored,) = (repo / "store").glob("*/dep-c/*")
    return stored


def _tamper(stored: Path, keep: Path) -> bytes:
    """Change a stored file in place, its size kept (so only its hash tells), and keep a link to its inode."""
    original = (stored / DEP_FILE).read_bytes()
    os.chmod(stored / DEP_FILE, 0o644)
    with open(stored / DEP_FILE, "r+b") as changing:
        changing.write(b"#" * len(original))
    os.link(stored / DEP_FILE, keep)  # kept alive (its inode number not reused) to see who links it after
    return original


def test_verify_repair_sets_the_damaged_store_aside_before_the_trees(
    repo: Path, index: IndexServer, tmp_path: Path
) -> None:
    with _repo(repo, index.url) as opened:
        b, x = (Path(str(r.path)) for r in opened.ensure_all(SHARING))
        downloads = index.downloads("adaptor_b"), index.downloads("dep_c")
        original = _tamper(_stored_dep(repo), tmp_path / "tampered")
        tampered = (tmp_path / "tampered").stat().st_ino

        found = opened.verify()
        assert isinstance(found, Verification) and not found.ok and found.repaired == ()
        assert sorted(r.tid.pin for r in found if r.status == "changed") == sorted(SHARING)
        (damaged,) = [d for d in found.store if not d.ok]
        assert damaged.dist == "dep-c==1.0" and damaged.status == "changed"

        fixed = opened.verify(repair=True)
        assert fixed.ok and fixed.failed == []
        # The stored distribution first, then each tree composed from it: reinstalled from an intact store.
        first, *trees = fixed.repaired
        assert isinstance(first.report, DistReport) and first.action == "set aside"
        assert all(isinstance(t.report, TreeReport) for t in trees)
        assert sorted((t.report.tid.pin, t.action) for t in trees if isinstance(t.report, TreeReport)) == [
            (pin, "reinstalled") for pin in sorted(SHARING)
        ]
        assert [done.as_dict()["action"] for done in fixed.repaired] == ["set aside", "reinstalled", "reinstalled"]

        again = opened.verify()
        assert again.ok and all(r.ok for r in again) and all(d.ok for d in again.store)
    # Installed afresh: the artifact's bytes on new inodes, and no tree links the changed file.
    assert (b / DEP_FILE).read_bytes() == (x / DEP_FILE).read_bytes() == original
    assert (b / DEP_FILE).stat().st_ino == (x / DEP_FILE).stat().st_ino != tampered
    assert (tmp_path / "tampered").stat().st_nlink == 1
    # Once more, the damaged distribution only; the trees' own are composed from the intact store.
    assert (index.downloads("adaptor_b"), index.downloads("dep_c")) == (downloads[0], downloads[1] + 1)


def test_verify_repair_returns_what_it_could_not_repair(repo: Path, index: IndexServer, tmp_path: Path) -> None:
    with _repo(repo, index.url) as opened:
        b, x = (Path(str(r.path)) for r in opened.ensure_all(SHARING))
        _tamper(_stored_dep(repo), tmp_path / "tampered")
        index.stop()  # the artifacts' source is down: nothing can be installed again

        fixed = opened.verify(repair=True)  # no exception: each failure is a value, the others still tried
        assert not fixed.ok
        assert [done.action for done in fixed.repaired if done.error is None] == ["set aside"]
        failed = sorted(done.report.tid.pin for done in fixed.failed if isinstance(done.report, TreeReport))
        assert failed == sorted(SHARING)
        assert all(isinstance(done.error, RepoinstallError) for done in fixed.failed)

        # Both trees put back, recorded and still damaged: verify still names them.
        still = opened.verify()
        assert sorted(r.tid.pin for r in still if r.status == "changed") == sorted(SHARING)
    assert b.is_dir() and x.is_dir()
