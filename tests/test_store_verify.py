"""verify and repair over the store of distributions: trees share a stored distribution's inodes, so a file
changed in place in the store is changed in every tree that holds it; repair sets the stored distribution aside
and installs it afresh (new inodes) before recomposing those trees, never linking the changed file again."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from helpers import find_links, installed_paths, run
from indexserver import IndexServer

LOCK = ["--stale-after", "2", "--heartbeat", "0.4"]
SHARING = ("adaptor-b==1.0", "adaptor-x[fast]==1.0")  # both need dep-c
DEP_FILE = Path("dep_c") / "__init__.py"


def _stored_dep(repo: Path) -> Path:
    (stored,) = (repo / "store").glob("*/dep-c/*")
    return stored


def _verify(repo: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = run("verify", "--repo", repo, "--json", *args)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def _tree_files(repo: Path) -> list[Path]:
    return [p for p in (repo / "trees").rglob("*") if p.is_file() and not p.is_symlink()]


def test_a_stored_file_changed_in_place_is_reported_for_every_tree_and_repaired_with_new_inodes(
    repo: Path, index: IndexServer, tmp_path: Path
) -> None:
    b, x = installed_paths(repo, index.url, *SHARING)
    downloads = {name: index.downloads(name) for name in ("dep_c", "adaptor_b", "adaptor_x")}
    stored = _stored_dep(repo)
    original = (stored / DEP_FILE).read_bytes()
    shared = (stored / DEP_FILE).stat()
    assert shared.st_nlink >= 3  # the store's, and both trees'
    assert (b / DEP_FILE).stat().st_ino == (x / DEP_FILE).stat().st_ino == shared.st_ino
    code, clean = _verify(repo)
    assert code == 0 and {d["status"] for d in clean["store"]} == {"ok"}

    # Changed in place, as an operator with a writable mount might: one inode, so every tree holding it changes.
    os.chmod(stored / DEP_FILE, 0o644)
    with open(stored / DEP_FILE, "r+b") as changing:
        changing.write(b"X = 'tampered'\n")
    tampered = tmp_path / "tampered"
    os.link(stored / DEP_FILE, tampered)  # kept alive (its inode number not reused) to see who links it after

    code, found = _verify(repo)
    assert code == 1
    trees = {t["tree"]: t for t in found["trees"]}
    assert trees["adaptor-b==1.0"]["changed"] == trees["adaptor-x[fast]==1.0"]["changed"] == [str(DEP_FILE)]
    (damaged,) = [d for d in found["store"] if d["status"] != "ok"]
    assert damaged["dist"] == "dep-c==1.0" and damaged["status"] == "changed"
    assert damaged["changed"] == [str(DEP_FILE)] and damaged["path"] == str(stored)
    assert sorted(damaged["trees"]) == sorted(SHARING)
    text = run("verify", "--repo", repo)
    assert text.returncode == 1
    assert f"changed    dep-c==1.0 (store/{stored.relative_to(repo / 'store')})" in text.stdout
    assert "held by adaptor-b==1.0, adaptor-x[fast]==1.0" in text.stdout

    fixed = run("verify", "--repo", repo, "--repair", "--json", *LOCK, *find_links(index.url))
    assert fixed.returncode == 0, fixed.stderr
    repaired = json.loads(fixed.stdout)["repaired"]
    assert repaired[0]["action"] == "set aside" and repaired[0]["dist"].startswith("dep-c==1.0 ")
    assert sorted((r["tree"], r["action"]) for r in repaired[1:]) == [(t, "reinstalled") for t in sorted(SHARING)]
    code, clean = _verify(repo)
    assert code == 0, clean
    assert {t["status"] for t in clean["trees"]} | {d["status"] for d in clean["store"]} == {"ok"}

    # The distribution was installed afresh: new inodes, the artifact's bytes, linked into both trees again.
    fresh = (_stored_dep(repo) / DEP_FILE).stat()
    assert fresh.st_ino != shared.st_ino and (_stored_dep(repo) / DEP_FILE).read_bytes() == original
    assert (b / DEP_FILE).stat().st_ino == (x / DEP_FILE).stat().st_ino == fresh.st_ino
    assert tampered.stat().st_nlink == 1  # ours: no tree and no stored dir links the changed file
    assert all(p.stat().st_ino != shared.st_ino for p in _tree_files(repo))
    # Once more, the damaged distribution only; the others are composed from the intact store.
    assert {name: index.downloads(name) - before for name, before in downloads.items()} == {
        "dep_c": 1,
        "adaptor_b": 0,
        "adaptor_x": 0,
    }


def test_a_tree_file_replaced_by_a_new_inode_is_that_trees_damage_only(repo: Path, index: IndexServer) -> None:
    b, x = installed_paths(repo, index.url, *SHARING)
    downloads = index.downloads("dep_c"), index.downloads("adaptor_b")
    stored = _stored_dep(repo) / DEP_FILE
    before = stored.stat().st_ino
    (b / DEP_FILE).unlink()
    (b / DEP_FILE).write_text("X = 'replaced'\n")

    code, found = _verify(repo)
    assert code == 1
    statuses = {t["tree"]: t["status"] for t in found["trees"]}
    assert statuses == {"adaptor-b==1.0": "changed", "adaptor-x[fast]==1.0": "ok"}
    assert {d["status"] for d in found["store"]} == {"ok"}

    fixed = run("verify", "--repo", repo, "--repair", "--json", *LOCK, *find_links(index.url))
    assert fixed.returncode == 0, fixed.stderr
    assert json.loads(fixed.stdout)["repaired"] == [
        {"tree": "adaptor-b==1.0", "env": found["trees"][0]["env"], "action": "reinstalled"}
    ]
    assert _verify(repo)[0] == 0
    # Recomposed from the intact store: nothing installed, the stored file is the one it was.
    assert stored.stat().st_ino == before == (b / DEP_FILE).stat().st_ino == (x / DEP_FILE).stat().st_ino
    assert (index.downloads("dep_c"), index.downloads("adaptor_b")) == downloads


def test_an_install_never_links_a_stored_file_whose_size_changed(repo: Path, index: IndexServer) -> None:
    b, x = installed_paths(repo, index.url, *SHARING)
    assert run("remove", "adaptor-x[fast]==1.0", "--repo", repo, *LOCK).returncode == 0  # its closure is kept
    stored = _stored_dep(repo) / DEP_FILE
    original, before = stored.read_bytes(), stored.stat().st_ino
    downloads = index.downloads("dep_c"), index.downloads("adaptor_x")
    stored.write_bytes(original + b"# grown\n")  # in place: the tree's file too

    # Installed again from its kept closure, from the store: the changed dist is set aside and installed afresh.
    assert installed_paths(repo, index.url, "adaptor-x[fast]==1.0") == [x]
    assert (x / DEP_FILE).read_bytes() == original and (x / DEP_FILE).stat().st_ino != before
    assert (x / DEP_FILE).stat().st_ino == stored.stat().st_ino  # the store holds it afresh
    assert (index.downloads("dep_c"), index.downloads("adaptor_x")) == (downloads[0] + 1, downloads[1])
    # The tree that held the changed file still does: verify names it, the store is whole again.
    code, found = _verify(repo)
    assert code == 1
    statuses = {t["tree"]: t["status"] for t in found["trees"]}
    assert statuses == {"adaptor-b==1.0": "changed", "adaptor-x[fast]==1.0": "ok"}
    assert {d["status"] for d in found["store"]} == {"ok"}
    assert run("verify", "--repo", repo, "--repair", *LOCK, *find_links(index.url)).returncode == 0
    assert (b / DEP_FILE).stat().st_ino == stored.stat().st_ino and (b / DEP_FILE).read_bytes() == original


def test_a_stored_file_replaced_by_a_new_inode_is_the_stores_damage_only(repo: Path, index: IndexServer) -> None:
    b, x = installed_paths(repo, index.url, *SHARING)
    stored = _stored_dep(repo)
    healthy = (b / DEP_FILE).stat().st_ino
    (stored / DEP_FILE).unlink()
    (stored / DEP_FILE).write_text("X = 'replaced'\n")

    code, found = _verify(repo)
    assert code == 1
    assert {t["status"] for t in found["trees"]} == {"ok"}  # they hold the artifact's inode still
    (damaged,) = [d for d in found["store"] if d["status"] != "ok"]
    assert damaged["changed"] == [str(DEP_FILE)] and sorted(damaged["trees"]) == sorted(SHARING)

    fixed = run("verify", "--repo", repo, "--repair", "--json", *LOCK, *find_links(index.url))
    assert fixed.returncode == 0, fixed.stderr
    assert [r["action"] for r in json.loads(fixed.stdout)["repaired"]] == ["set aside"]  # healthy trees untouched
    assert not stored.exists() and (b / DEP_FILE).stat().st_ino == (x / DEP_FILE).stat().st_ino == healthy
    assert _verify(repo)[0] == 0


def test_a_repair_that_cannot_reinstall_puts_the_trees_back_still_reported(repo: Path, index: IndexServer) -> None:
    b, x = installed_paths(repo, index.url, *SHARING)
    stored = _stored_dep(repo)
    os.chmod(stored / DEP_FILE, 0o644)
    with open(stored / DEP_FILE, "r+b") as changing:
        changing.write(b"X = 'tampered'\n")
    sources = find_links(index.url)
    index.stop()  # the artifacts' source is down: nothing can be installed again

    failed = run("verify", "--repo", repo, "--repair", "--json", *LOCK, *sources)
    assert failed.returncode == 1, failed.stderr
    assert "Traceback" not in failed.stderr
    # Never a clean report over trees that vanished: both are back where they were, recorded, and still damaged.
    code, found = _verify(repo)
    assert code == 1, found
    trees = {t["tree"]: t for t in found["trees"]}
    assert sorted(trees) == sorted(SHARING)
    assert trees["adaptor-b==1.0"]["changed"] == trees["adaptor-x[fast]==1.0"]["changed"] == [str(DEP_FILE)]
    assert b.is_dir() and x.is_dir() and (b / DEP_FILE).read_bytes().startswith(b"X = 'tampered'")
    listed = run("list", "--repo", repo)
    assert listed.returncode == 0 and all(spec in listed.stdout for spec in ("adaptor-b==1.0", "adaptor-x[fast]==1.0"))
    path = run("path", *SHARING, "--repo", repo)
    assert path.returncode == 0 and path.stdout.strip() == os.pathsep.join(map(str, (b, x)))
    assert not list((repo / "trash").iterdir()), "nothing held back in trash/"
