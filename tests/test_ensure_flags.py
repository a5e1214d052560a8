"""The flags pip and uv users reach for, with real pip and uv: ``ensure --dry-run`` (nothing on disk changes),
``--only-binary`` / ``--no-binary`` as pip reads them, and ``verify -r FILE``."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from helpers import run, snapshot
from indexserver import IndexServer
from wheels import make_wheel

from repoinstall import Repo


def find(index: IndexServer) -> list[str]:
    return ["--no-index", "--find-links", index.url]


# ---- --dry-run ----------------------------------------------------------------------------------------------------


def test_dry_run_says_what_would_be_installed_stored_and_downloaded_and_changes_nothing(
    repo: Path, index: IndexServer, installer: str
) -> None:
    stored = run("ensure", "dep-c==1.0", "--repo", repo, *find(index), "-q")
    assert stored.returncode == 0, stored.stderr
    before = snapshot(repo)
    done = run("ensure", "adaptor-b==1.0", "dep-c==1.0", "--repo", repo, *find(index), "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    assert snapshot(repo) == before  # no tree, no lock, no staging dir, no stored file, no index cache
    plan = json.loads(done.stdout)
    assert plan["dry_run"] is True and plan["install"] == ["adaptor-b==1.0"], plan
    trees = {tree["requirement"]: tree for tree in plan["trees"]}
    assert trees["dep-c==1.0"]["action"] == "present" and trees["dep-c==1.0"]["path"], trees
    dists = {d["name"]: d for d in trees["adaptor-b==1.0"]["dists"]}
    assert sorted(dists) == ["adaptor-b", "dep-c"], dists
    assert dists["dep-c"]["stored"] and not dists["dep-c"]["download"]  # linked from the store
    assert not dists["adaptor-b"]["stored"] and dists["adaptor-b"]["download"]  # from the index
    assert dists["adaptor-b"]["url"].startswith(index.url.rsplit("/", 1)[0]) and len(dists["adaptor-b"]["sha256"]) == 64
    assert [d["name"] for d in plan["store"]] == ["adaptor-b"] == [d["name"] for d in plan["download"]], plan
    # What it said is what ensure then does.
    ensured = run("ensure", "adaptor-b==1.0", "--repo", repo, *find(index), "--json")
    assert ensured.returncode == 0, ensured.stderr
    again = run("ensure", "adaptor-b==1.0", "--repo", repo, *find(index), "--dry-run")
    assert again.returncode == 0 and again.stdout.startswith("present "), again.stdout
    assert "0 tree(s) to install, 0 distribution(s) to store, 0 to download; nothing changed" in again.stdout


def test_dry_run_of_a_lock_into_a_repo_that_does_not_exist_creates_nothing(
    tmp_path: Path, index: IndexServer, wheel_dir: Path
) -> None:
    repo = tmp_path / "nowhere" / "repo"
    lock = tmp_path / "locks" / "pylock.toml"
    lock.parent.mkdir()
    exported = tmp_path / "exported"
    made = run("ensure", "adaptor-b==1.0", "--repo", exported, *find(index), "-q")
    assert made.returncode == 0, made.stderr
    assert run("export", "adaptor-b==1.0", "--repo", exported, "-o", lock).returncode == 0
    before = snapshot(tmp_path / "locks")
    done = run("ensure", "-r", lock, "--repo", repo, *find(index), "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "nowhere").exists() and snapshot(tmp_path / "locks") == before
    (tree,) = json.loads(done.stdout)["trees"]
    assert tree["action"] == "install" and sorted(d["name"] for d in tree["dists"]) == ["adaptor-b", "dep-c"], tree


@pytest.mark.parametrize("other", [["--together"], ["--from", "127.0.0.1:1/x"]])
def test_dry_run_refuses_what_it_cannot_plan(repo: Path, index: IndexServer, other: list[str]) -> None:
    done = run("ensure", "adaptor-a==1.0", "dep-c==1.0", "--repo", repo, *find(index), "--dry-run", *other)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"--dry-run plans each tree from the indexes alone; it cannot plan {other[0]}" in done.stderr
    assert not repo.exists()


# ---- --only-binary, --no-binary ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def formats(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fmt-pkg 1.0 as a wheel only, 2.0 as a source distribution only (one that cannot build)."""
    directory = tmp_path_factory.mktemp("formats")
    make_wheel(directory, "fmt-pkg", "1.0")
    make_wheel(directory, "other-pkg", "1.0")
    data = b"no setup.py, no pyproject.toml"
    with tarfile.open(directory / "fmt_pkg-2.0.tar.gz", "w:gz") as sdist:
        member = tarfile.TarInfo("fmt_pkg-2.0/README")
        member.size = len(data)
        sdist.addfile(member, io.BytesIO(data))
    return directory


def ensure_with(repo: Path, links: Path, *args: str) -> tuple[int, str, dict[str, object] | None]:
    done = run("ensure", *args, "--repo", repo, "--no-index", "--find-links", str(links), "--json")
    document = json.loads(done.stdout) if done.stdout.strip() else None
    return done.returncode, done.stderr, document


@pytest.mark.parametrize(
    "flags",
    [
        ["--only-binary", ":all:"],
        ["--only-binary", "other-pkg,fmt-pkg"],  # pip's comma-separated list
        ["--no-binary", ":all:", "--only-binary", "fmt-pkg"],  # a name in only-binary beats :all: in no-binary
    ],
)
def test_only_binary_chooses_the_newest_version_with_a_wheel(
    tmp_path: Path, formats: Path, installer: str, flags: list[str]
) -> None:
    code, stderr, document = ensure_with(tmp_path / "repo", formats, "fmt-pkg", *flags)
    assert code == 0, stderr
    assert document is not None and [(p["name"], p["version"]) for p in document["packages"]] == [("fmt-pkg", "1.0")]


def test_without_only_binary_the_source_distribution_is_taken(tmp_path: Path, formats: Path, installer: str) -> None:
    # The newest version is 2.0, an sdist: the installer tries to build it (and this one cannot be built).
    code, stderr, _ = ensure_with(tmp_path / "repo", formats, "fmt-pkg", "--only-binary", ":none:")
    assert code == 1 and "fmt-pkg==2.0" in stderr, stderr


def test_no_binary_is_passed_to_the_installer(tmp_path: Path, formats: Path, installer: str) -> None:
    # fmt-pkg 1.0 has only a wheel: no source distribution to take.
    code, stderr, _ = ensure_with(tmp_path / "repo", formats, "fmt-pkg==1.0", "--no-binary", "fmt-pkg")
    assert code == 1, stderr
    code, stderr, document = ensure_with(tmp_path / "repo", formats, "fmt-pkg==1.0", "--no-binary", "other-pkg")
    assert code == 0 and document is not None and document["packages"][0]["action"] == "installed", stderr


@pytest.mark.parametrize("value", ["not a name", "-e", "a,:al:"])
def test_a_bad_format_control_value_is_one_line_and_exit_2(tmp_path: Path, formats: Path, value: str) -> None:
    done = run("ensure", "fmt-pkg==1.0", "--repo", tmp_path / "repo", "--no-index", "--only-binary", value)
    assert not (tmp_path / "repo").exists()
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "--only-binary" in done.stderr and "project name" in done.stderr, done.stderr


# ---- verify -r FILE -----------------------------------------------------------------------------------------------


def test_verify_takes_the_trees_a_requirements_file_or_a_lock_names(
    repo: Path, index: IndexServer, tmp_path: Path
) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("adaptor-a==1.0\n# a comment\ndep-c==1.0\n")
    assert run("ensure", "-r", requirements, "adaptor-b==1.0", "--repo", repo, *find(index), "-q").returncode == 0
    lock = tmp_path / "pylock.toml"
    assert run("export", "adaptor-b==1.0", "--repo", repo, "-o", lock).returncode == 0
    assert run("ensure", "-r", lock, "--repo", repo, *find(index), "-q").returncode == 0
    listed = json.loads(run("verify", "-r", requirements, "--repo", repo, "--json").stdout)
    assert sorted(t["tree"] for t in listed["trees"]) == ["adaptor-a==1.0", "dep-c==1.0"], listed
    locked = json.loads(run("verify", "-r", lock, "--repo", repo, "--json").stdout)
    assert len(locked["trees"]) == 1 and locked["trees"][0]["tree"].startswith("locked-"), locked
    # A damaged file in a tree the file names: exit 1; one it does not name is not looked at.
    with Repo(repo) as opened:
        tree = Path(opened.tree_path("adaptor-b==1.0"))
    victim = next(tree.glob("adaptor_b/*.py"))
    victim.chmod(0o644)
    victim.write_text("changed = True\n")
    assert run("verify", "-r", requirements, "--repo", repo).returncode == 0
    assert run("verify", "adaptor-b==1.0", "--repo", repo).returncode == 1
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    none = json.loads(run("verify", "-r", empty, "--repo", repo, "--json").stdout)
    assert none["trees"] == [] and none["store"] == [], none
    assert run("verify", "-r", empty, "--repo", repo).stdout == "nothing to verify\n"
    both = run("verify", "-r", requirements, "--all", "--repo", repo)
    assert both.returncode == 2 and len(both.stderr.splitlines()) == 1, both.stderr
