"""One process at a time: what ensure installs, reports, repairs and refuses."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from helpers import actions, document, ensure_args, import_version, isolated_env, run, snapshot
from indexserver import IndexServer


def test_installs_then_finds_present_without_pip(repo: Path, index: IndexServer) -> None:
    first = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert first.returncode == 0, first.stderr
    doc = document(first.stdout)
    assert doc["repo"] == str(repo)
    assert doc["env"].startswith("cp3")
    [package] = doc["packages"]
    assert package["action"] == "installed"
    assert (package["name"], package["version"]) == ("adaptor-a", "1.0")
    assert import_version(package["path"], "adaptor_a") == "1.0"

    again = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert again.returncode == 0, again.stderr
    assert actions(again.stdout) == ["present"]
    assert index.downloads("adaptor_a") == 1


def test_versions_live_side_by_side_and_path_lists_them(repo: Path, index: IndexServer) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0", "adaptor-a==2.0"))
    assert done.returncode == 0, done.stderr
    one, two = document(done.stdout)["packages"]
    assert one["path"] != two["path"]
    assert import_version(one["path"], "adaptor_a") == "1.0"
    assert import_version(two["path"], "adaptor_a") == "2.0"

    paths = run("path", "adaptor-a==1.0", "adaptor-a==2.0", "--repo", repo)
    assert paths.returncode == 0, paths.stderr
    assert paths.stdout.strip() == os.pathsep.join([one["path"], two["path"]])

    listed = run("list", "--repo", repo, "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(t["version"] for t in json.loads(listed.stdout)["trees"]) == ["1.0", "2.0"]


def test_tree_holds_the_whole_dependency_closure(repo: Path, index: IndexServer, installer: str) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-b==1.0"))
    assert done.returncode == 0, done.stderr
    tree = Path(document(done.stdout)["packages"][0]["path"])
    assert import_version(tree, "dep_c") == "1.0"
    record = json.loads(next((repo / "records").rglob("1.json")).read_text())
    assert {d["name"] for d in record["dists"]} == {"adaptor-b", "dep-c"}
    assert record["installer"] == installer and record["installer_version"] not in ("", "unknown")
    assert run("verify", "--all", "--repo", repo).returncode == 0  # bytecode too is in RECORD, nothing extra
    assert record["requirement"] == "adaptor-b==1.0"


def test_extras_are_part_of_the_tree_identity(repo: Path, index: IndexServer) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-x==1.0", "adaptor-x[fast]==1.0"))
    assert done.returncode == 0, done.stderr
    plain, fast = document(done.stdout)["packages"]
    assert plain["path"] != fast["path"] and fast["path"].endswith("/1[fast]")
    assert not list(Path(plain["path"]).glob("dep_c*"))
    assert import_version(fast["path"], "dep_c") == "1.0"


def test_false_marker_is_skipped_and_reported(repo: Path, index: IndexServer) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0; python_version < '3'", "adaptor-d==1.0"))
    assert done.returncode == 0, done.stderr
    doc = document(done.stdout)
    assert [p["name"] for p in doc["packages"]] == ["adaptor-d"]
    assert doc["skipped"][0]["requirement"].startswith("adaptor-a==1.0")
    assert index.downloads("adaptor_a") == 0


def test_unpinned_spec_uses_highest_installed_match_or_resolves(repo: Path, index: IndexServer) -> None:
    missing = run(*ensure_args(repo, index.url, "adaptor-a>=1,<2"))
    assert missing.returncode == 0, missing.stderr
    assert [p["version"] for p in document(missing.stdout)["packages"]] == ["1.1"]  # from the find-links page

    assert run(*ensure_args(repo, index.url, "adaptor-a==1.0", "adaptor-a==1.1", "adaptor-a==2.0")).returncode == 0
    ranged = run(*ensure_args(repo, index.url, "adaptor-a>=1,<2", "adaptor-a"))
    assert ranged.returncode == 0, ranged.stderr
    assert [p["version"] for p in document(ranged.stdout)["packages"]] == ["1.1", "2.0"]
    assert actions(ranged.stdout) == ["present", "present"]


def test_requirements_file_with_nesting_and_continuations(repo: Path, index: IndexServer, tmp_path: Path) -> None:
    (tmp_path / "more.txt").write_text("adaptor-e==1.0  # trailing comment\n")
    (tmp_path / "reqs.txt").write_text(
        "# comment\n\nadaptor-d\\\n==1.0\n-r more.txt\nadaptor-f==1.0 ; python_version >= '3'\n"
    )
    done = run(*ensure_args(repo, index.url, "-r", str(tmp_path / "reqs.txt")))
    assert done.returncode == 0, done.stderr
    assert [p["name"] for p in document(done.stdout)["packages"]] == ["adaptor-d", "adaptor-e", "adaptor-f"]


def test_hashes_are_checked_by_the_installer(
    repo: Path, index: IndexServer, tmp_path: Path, wheel_dir: Path, installer: str
) -> None:
    import hashlib

    digest = hashlib.sha256((wheel_dir / "adaptor_g-1.0-py3-none-any.whl").read_bytes()).hexdigest()
    good = tmp_path / "good.txt"
    good.write_text(f"adaptor-g==1.0 \\\n    --hash=sha256:{digest}\n")
    bad = tmp_path / "bad.txt"
    bad.write_text(f"adaptor-h==1.0 --hash=sha256:{'0' * 64}\n")
    ok = run(*ensure_args(repo, index.url, "-r", str(good)))
    assert ok.returncode == 0, ok.stderr
    wrong = run(*ensure_args(repo, index.url, "-r", str(bad)))
    assert wrong.returncode == 1
    assert "HASH" in wrong.stderr.upper()
    assert not list((repo / "trees").rglob("adaptor-h/*"))


def test_installer_failure_exits_1_with_its_words_and_changes_nothing(
    repo: Path, index: IndexServer, installer: str
) -> None:
    assert run(*ensure_args(repo, index.url, "adaptor-a==1.0")).returncode == 0
    before = snapshot(repo / "trees")
    for spec, words in (
        ("needs-missing==1.0", "not-on-the-index"),
        ("broken-pkg==1.0", "broken"),
        ("adaptor-a==9.9", "adaptor-a"),
    ):
        failed = run(*ensure_args(repo, index.url, spec))
        assert failed.returncode == 1, failed.stderr
        assert f"{installer} failed" in failed.stderr and words in failed.stderr.lower()
        assert "Traceback" not in failed.stderr
        assert snapshot(repo / "trees") == before
        assert not any((repo / "staging").rglob("*.*.*")), "staging left behind"


def test_crash_between_publish_and_record_is_repaired_without_pip(repo: Path, index: IndexServer) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-b==1.0"))
    record = next((repo / "records").rglob("1.json"))
    original = json.loads(record.read_text())
    record.unlink()  # as if the installer died right after the rename
    repaired = run(*ensure_args(repo, index.url, "adaptor-b==1.0"))
    assert repaired.returncode == 0, repaired.stderr
    assert actions(repaired.stdout) == ["repaired"]
    assert index.downloads("adaptor_b") == 1  # no second pip run
    # Re-recorded from the tree and its kept closure: which files the installer took (sha256, url) as before.
    assert json.loads(record.read_text())["dists"] == original["dists"]
    assert all(d["sha256"] and d["url"] for d in original["dists"])
    assert document(done.stdout)["packages"][0]["path"] == document(repaired.stdout)["packages"][0]["path"]
    exported = run("export", "adaptor-b==1.0", "--repo", repo)
    assert exported.returncode == 0, exported.stderr
    assert all(f'sha256 = "{d["sha256"]}"' in exported.stdout for d in original["dists"])


def test_a_tree_re_recorded_without_a_closure_says_how_to_export_it(repo: Path, index: IndexServer) -> None:
    assert run(*ensure_args(repo, index.url, "adaptor-b==1.0")).returncode == 0
    next((repo / "records").rglob("1.json")).unlink()  # as if killed between publish and record...
    next((repo / "closures").rglob("1.json")).unlink()  # ...of its first install: no closure kept yet
    assert actions(run(*ensure_args(repo, index.url, "adaptor-b==1.0")).stdout) == ["repaired"]
    refused = run("export", "adaptor-b==1.0", "--repo", repo)
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith(
        "install it again to export it: `repoinstall remove adaptor-b==1.0` then `repoinstall ensure adaptor-b==1.0`"
    ), refused.stderr
    assert run("remove", "adaptor-b==1.0", "--repo", repo).returncode == 0
    assert run(*ensure_args(repo, index.url, "adaptor-b==1.0")).returncode == 0
    assert run("export", "adaptor-b==1.0", "--repo", repo).returncode == 0


def test_tampered_unrecorded_tree_is_reinstalled(repo: Path, index: IndexServer) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    tree = Path(document(done.stdout)["packages"][0]["path"])
    next((repo / "records").rglob("1.json")).unlink()
    (tree / "adaptor_a" / "__init__.py").write_text("VERSION = 'tampered'\n")
    fixed = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert fixed.returncode == 0, fixed.stderr
    assert actions(fixed.stdout) == ["installed"]
    assert import_version(tree, "adaptor_a") == "1.0"


def test_record_without_tree_or_with_wrong_tree_reinstalls(repo: Path, index: IndexServer) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    tree = Path(document(done.stdout)["packages"][0]["path"])
    shutil.rmtree(tree)
    again = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert actions(again.stdout) == ["installed"], again.stderr
    metadata = next(tree.glob("*.dist-info")) / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 1.0", "Version: 7.0"))
    third = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert actions(third.stdout) == ["installed"], third.stderr
    assert "Version: 1.0" in metadata.read_text()
    # The removed tree came back from the store (no download); the edit in place changed the stored file it
    # links, so that distribution was set aside and downloaded again.
    assert index.downloads("adaptor_a") == 2


def test_planted_symlink_is_never_followed_out_of_the_repo(repo: Path, index: IndexServer, tmp_path: Path) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    env = document(done.stdout)["env"]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    name_dir = repo / "trees" / env / "adaptor-d"
    name_dir.parent.mkdir(parents=True, exist_ok=True)
    name_dir.symlink_to(outside, target_is_directory=True)
    planted = run(*ensure_args(repo, index.url, "adaptor-d==1.0"))
    assert planted.returncode == 2, planted.stderr
    assert "symlink" in planted.stderr and str(name_dir) in planted.stderr
    assert [p.name for p in outside.iterdir()] == ["keep.txt"]
    # A symlink where a tree should be is set aside, never followed or deleted through.
    leaf = repo / "trees" / env / "adaptor-e" / "1"
    leaf.parent.mkdir(parents=True)
    leaf.symlink_to(outside, target_is_directory=True)
    replaced = run(*ensure_args(repo, index.url, "adaptor-e==1.0"))
    assert replaced.returncode == 0, replaced.stderr
    assert not leaf.is_symlink() and import_version(leaf, "adaptor_e") == "1.0"
    assert [p.name for p in outside.iterdir()] == ["keep.txt"]


def test_no_lock_creates_no_lock_files(repo: Path, index: IndexServer) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0", "adaptor-b==1.0", "--no-lock"))
    assert done.returncode == 0, done.stderr
    assert not (repo / "locks").exists()
    env_var = run(*ensure_args(repo, index.url, "adaptor-d==1.0"), env=isolated_env(REPOINSTALL_NO_LOCK="1"))
    assert env_var.returncode == 0, env_var.stderr
    assert not (repo / "locks").exists()


def test_human_output_and_default_repo(tmp_path: Path, index: IndexServer) -> None:
    env = isolated_env(XDG_DATA_HOME=str(tmp_path / "data"))
    done = run("ensure", "adaptor-a==1.0", "--no-index", "--find-links", index.url, env=env)
    assert done.returncode == 0, done.stderr
    default = tmp_path / "data" / "repoinstall" / "repo"
    assert f"default repo {default}" in done.stderr
    assert done.stdout.startswith("installed  adaptor-a==1.0  " + str(default))


def test_install_timeout_bounds_pip(repo: Path, index: IndexServer) -> None:
    index.delays["slow_pkg"] = 6.0
    done = run(*ensure_args(repo, index.url, "slow-pkg==1.0"), "--install-timeout", "1")
    assert done.returncode == 1, done.stderr
    assert "did not finish within 1s" in done.stderr
    assert not list((repo / "trees").rglob("slow*")) and not list((repo / "records").rglob("slow*"))
    assert not any(p for p in (repo / "staging").rglob("*") if p.is_dir() and p.parent.parent.name == "staging")


def test_one_version_spelled_two_ways_is_one_tree(repo: Path, index: IndexServer) -> None:
    first = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    second = run(*ensure_args(repo, index.url, "adaptor-a==1.0.0", "Adaptor_A==1"))
    assert second.returncode == 0, second.stderr
    assert actions(second.stdout) == ["present", "present"]
    paths = {p["path"] for p in document(first.stdout)["packages"] + document(second.stdout)["packages"]}
    assert len(paths) == 1 and paths.pop().endswith("/adaptor-a/1")
    assert index.downloads("adaptor_a") == 1


def test_corrupt_lock_state_is_a_clear_error_naming_it(repo: Path, index: IndexServer) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    shutil.rmtree(Path(document(done.stdout)["packages"][0]["path"]))
    lock_dir = next((repo / "locks").rglob("1.lock.rw"))
    for generation in (lock_dir / "gen").glob("0*"):
        generation.write_text("garbage\n")
    broken = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert broken.returncode == 1
    lines = broken.stderr.strip().splitlines()
    assert len(lines) == 1 and str(lock_dir) in lines[0] and "Traceback" not in broken.stderr


def test_requirements_file_listing_nothing_is_a_no_op(repo: Path, tmp_path: Path, index: IndexServer) -> None:
    # What an init container does for a chart whose requirement list is empty.
    (tmp_path / "empty.txt").write_text("# nothing yet\n\n")
    done = run(*ensure_args(repo, index.url), "-r", str(tmp_path / "empty.txt"))
    assert done.returncode == 0, done.stderr
    assert document(done.stdout)["packages"] == []
    assert run(*ensure_args(repo, index.url)).returncode == 2  # no specs and no file at all is still a usage error
