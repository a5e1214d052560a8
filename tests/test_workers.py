"""What every engine adapter stands on (repoinstall._workers): what a worker runtime asks is checked where it is
given, without touching the repo or an index, and ensured on a worker into paths in the order asked."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest
from indexserver import IndexServer

from repoinstall import InstallOptions, InvalidInput, Repo, RepoinstallError, TreesConflict
from repoinstall._workers import Packages, one_line, put_first


def test_bad_input_is_one_line_before_anything_is_touched(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    refused = {
        "nothing to install": Packages.of([], repo=str(repo)),
        "--jobs must be at least 1": Packages.of("adaptor-a==1.0", repo=str(repo), jobs=0),
        "requirements file not found": Packages.of(requirements=str(tmp_path / "nope.txt"), repo=str(repo)),
        "is not a valid version": Packages.of("adaptor-a====", repo=str(repo)),
    }
    for expected, packages in refused.items():
        with pytest.raises(RepoinstallError) as error:
            packages.check()
        assert expected in str(error.value) and "\n" not in str(error.value)
        assert error.value.exit_code == 2
    with pytest.raises(InvalidInput, match="'waittimeout' is not a repo option"):
        Packages.of("adaptor-a==1.0", repo=str(repo), waittimeout=3)
    with pytest.raises(InvalidInput, match="'index' is not an install option"):
        Packages.of("adaptor-a==1.0", install={"index": "http://127.0.0.1:1/simple"})
    with pytest.raises(InvalidInput, match="specs must be a string or a list of strings"):
        Packages.of(["adaptor-a==1.0", 3])  # type: ignore[list-item]
    assert not repo.exists()  # nothing was made


def test_ensured_on_a_worker_in_the_order_asked(tmp_path: Path, index: IndexServer) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("adaptor-b==1.0\n")
    packages = Packages.of(
        "adaptor-a==1.1",
        requirements=str(requirements),
        repo=str(tmp_path / "repo"),
        install={"find_links": [index.url], "no_index": True},
        wait_timeout=60,
    )
    packages.check()
    # Plain data: what goes to a worker comes back equal, and a repo given as a path is the same record as its
    # string (a Dask plugin's name hashes it; Celery remembers trees by it).
    assert pickle.loads(pickle.dumps(packages)) == packages
    as_path = Packages.of("adaptor-a==1.1", repo=tmp_path / "repo")
    assert as_path == Packages.of("adaptor-a==1.1", repo=str(tmp_path / "repo")) and isinstance(as_path.repo, str)
    paths = packages.ensure()
    with Repo(tmp_path / "repo", install=InstallOptions(find_links=(index.url,), no_index=True)) as repo:
        assert paths == [repo.tree_path("adaptor-a==1.1"), repo.tree_path("adaptor-b==1.0")]
    assert packages.ensure() == paths  # present: nothing installed again
    assert index.downloads("adaptor_a-1.1") == 1 and index.downloads("adaptor_b-1.0") == 1


def test_trees_that_disagree_are_refused_and_a_failure_is_its_one_line(tmp_path: Path, index: IndexServer) -> None:
    options = {"find_links": [index.url], "no_index": True}
    repo = str(tmp_path / "repo")
    with pytest.raises(TreesConflict, match=r"adaptor-a 1\.0.*adaptor-a 2\.0"):
        Packages.of(["adaptor-a==1.0", "adaptor-a==2.0"], repo=repo, install=options).ensure()
    with pytest.raises(RepoinstallError) as missing:
        Packages.of("adaptor-a==9.9", repo=repo, install=options).ensure()
    line = one_line(missing.value)
    assert "adaptor-a" in line and "\n" not in line


def test_put_first_keeps_order_and_refuses_a_version_already_imported(tmp_path: Path, index: IndexServer) -> None:
    options = {"find_links": [index.url], "no_index": True}
    repo = str(tmp_path / "repo")
    first = Packages.of("adaptor-e==1.0", repo=repo, install=options).ensure()
    before = list(sys.path)
    try:
        assert put_first(first) == first and sys.path[: len(first)] == first
        assert put_first(first) == []  # already there
        import adaptor_e  # type: ignore[import-not-found]

        assert adaptor_e.VERSION == "1.0"
    finally:
        sys.path[:] = before
    other = Packages.of("adaptor-a==1.0", repo=repo, install=options).ensure()
    sys.modules.pop("adaptor_a", None)
    put_first(other)
    try:
        import adaptor_a  # type: ignore[import-not-found]

        assert adaptor_a.VERSION == "1.0"
        newer = Packages.of("adaptor-a==2.0", repo=repo, install=options).ensure()
        from repoinstall import ActivationConflict

        with pytest.raises(ActivationConflict, match="already imported"):
            put_first(newer)
        assert newer[0] not in sys.path
    finally:
        sys.path[:] = before
        sys.modules.pop("adaptor_a", None)
        sys.modules.pop("adaptor_e", None)


def test_lock_names_files_and_lock_false_is_the_repos_no_lock(tmp_path: Path) -> None:
    no_lock = Packages.of("adaptor-a==1.0", lock=False, repo=str(tmp_path / "repo"))
    assert no_lock.files == () and dict(no_lock.options) == {"lock": False}
    no_lock.check()
    locked = Packages.of(lock=str(tmp_path / "pylock.toml"))
    assert locked.files == (str(tmp_path / "pylock.toml"),) and locked.options == ()
    with pytest.raises(InvalidInput, match="index URL"):
        Packages.of("adaptor-a==1.0", install={"index_url": "http://[::1"}).check()


def test_one_line_keeps_what_failed_and_the_installers_reason() -> None:
    from repoinstall import InstallError

    failed = InstallError("adaptor-a==9.9: pip failed (it exited with 1):\n  Looking in links: x\n  ERROR: No matching")
    assert one_line(failed) == "adaptor-a==9.9: pip failed (it exited with 1): ERROR: No matching"
    assert one_line(InstallError("a full disk\nmore")) == "a full disk"  # a line that says it all stays alone
    assert one_line(ValueError("bad\nvalue")) == "ValueError: bad"
