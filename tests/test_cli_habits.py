"""What pip and uv users expect of the command line: -v shows the installer's command line and output, -q and
-v repeat, and nothing else is said with -qq."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import actions, ensure_args, run
from indexserver import IndexServer


def test_verbose_shows_the_installers_command_line_and_output(repo: Path, index: IndexServer) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0"), "-vv")
    assert done.returncode == 0, done.stderr
    assert actions(done.stdout) == ["installed"]
    running = [line for line in done.stderr.splitlines() if ": running " in line]
    assert running and " install --target " in running[0] and running[0].endswith("adaptor-a==1.0"), done.stderr
    assert "adaptor-a==1.0: pip said:" in done.stderr or "adaptor-a==1.0: uv said:" in done.stderr, done.stderr


def test_quiet_repeats_and_says_nothing_on_success(repo: Path, index: IndexServer) -> None:
    args = [a for a in ensure_args(repo, index.url, "adaptor-a==1.0") if a != "--json"]
    done = run(*args, "-qq")
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done
    again = run(*args, "-q", "-q")
    assert again.returncode == 0 and again.stdout == "" and again.stderr == "", again


def test_json_documents_carry_a_schema_and_errors_are_json_too(repo: Path, index: IndexServer) -> None:
    import json

    done = run(*ensure_args(repo, index.url, "adaptor-a[fast]==1.0"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["schema"] == 1
    listed = json.loads(run("list", "--repo", repo, "--json").stdout)
    assert listed["schema"] == 1 and listed["trees"][0]["installer_version"], listed
    human = run(*[a for a in ensure_args(repo, index.url, "adaptor-a[fast]==1.0") if a != "--json"])
    assert human.stdout.startswith("present    adaptor-a[fast]==1.0  "), human.stdout
    for bad in (["not a spec!!"], ["--no-such-option"]):
        failed = run("ensure", *bad, "--repo", repo, "--json")
        assert failed.returncode == 2, failed
        document = json.loads(failed.stdout)
        assert document["schema"] == 1 and document["exit_code"] == 2 and document["error"], document
        assert failed.stderr.startswith("repoinstall: error: ")


def test_run_finds_a_trees_console_script_and_runs_it_with_this_interpreter(repo: Path, tmp_path: Path) -> None:
    from wheels import make_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "tool-pkg", "1.0", scripts={"tool-say": "tool_pkg:main"})
    server = IndexServer(wheels).start()
    try:
        args = ["--repo", str(repo), "--no-index", "--find-links", server.url]
        done = run("run", "tool-pkg==1.0", *args, "--", "tool-say")
        assert done.returncode == 0 and done.stdout == "tool-pkg 1.0\n", done
        # As if the tree had been installed by another image's Python: its shebang names a missing interpreter.
        script = next(repo.rglob("tool-pkg/1/bin/tool-say"))
        lines = script.read_text().splitlines(keepends=True)
        script.write_text("#!/nonexistent/bin/python3.11\n" + "".join(lines[1:]))
        again = run("run", "tool-pkg==1.0", *args, "--", "tool-say")
        assert again.returncode == 0 and again.stdout == "tool-pkg 1.0\n", again
    finally:
        server.stop()


@pytest.fixture
def shadowing(tmp_path: Path) -> Iterator[IndexServer]:
    """app-pkg needs lib-pkg>=1, so its own tree holds the newest, lib-pkg 2.0; strict-pkg needs lib-pkg==2.0."""
    from wheels import make_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "app-pkg", "1.0", requires=("lib-pkg>=1",))
    make_wheel(wheels, "strict-pkg", "1.0", requires=("lib-pkg==2.0",))
    for version in ("1.0", "2.0"):
        make_wheel(wheels, "lib-pkg", version)
    server = IndexServer(wheels).start()
    yield server
    server.stop()


def test_trees_holding_two_versions_of_one_distribution_are_refused_together(
    repo: Path, shadowing: IndexServer
) -> None:
    from repoinstall import InstallOptions, Repo, TreesConflict

    server = shadowing
    args = ["--repo", str(repo), "--no-index", "--find-links", server.url]
    show = ["--", "python", "-c", "import lib_pkg; print(lib_pkg.VERSION)"]
    # app-pkg's tree holds lib-pkg 2.0: with lib-pkg 1.0 beside it, the order given would decide silently.
    for order in (["app-pkg==1.0", "lib-pkg==1.0"], ["lib-pkg==1.0", "app-pkg==1.0"]):
        refused = run("run", *order, *args, *show)
        assert refused.returncode == 2 and refused.stdout == "", refused
        (line,) = [line for line in refused.stderr.splitlines() if line.startswith("repoinstall: error: ")]
        assert "lib-pkg 1.0" in line and "lib-pkg 2.0" in line
        assert all(spec in line for spec in order), line
    agreeing = run("run", "app-pkg==1.0", "lib-pkg==2.0", *args, *show)
    assert agreeing.returncode == 0 and agreeing.stdout == "2.0\n", agreeing
    alone = run("run", "lib-pkg==1.0", *args, *show)
    assert alone.returncode == 0 and alone.stdout == "1.0\n", alone
    options = InstallOptions(find_links=(server.url,), no_index=True)
    with Repo(repo, install=options) as store:
        before = list(sys.path)
        with pytest.raises(TreesConflict, match=r"lib-pkg 1\.0") as refused_api:
            store.activate("app-pkg==1.0", "lib-pkg==1.0")
        assert refused_api.value.exit_code == 2 and sys.path == before
        with pytest.raises(TreesConflict):
            store.call_isolated(["lib-pkg==1.0", "app-pkg==1.0"], "lib_pkg:version")
        assert store.call_isolated(["app-pkg==1.0", "lib-pkg==2.0"], "lib_pkg:version") == ("2.0", [])


def test_a_set_installed_together_is_one_tree_keyed_by_the_set(repo: Path, shadowing: IndexServer) -> None:
    from repoinstall import InstallOptions, Repo

    args = ["--repo", str(repo), "--no-index", "--find-links", shadowing.url]
    show = ["--", "python", "-c", "import app_pkg, lib_pkg; print(app_pkg.VERSION, lib_pkg.VERSION)"]
    # Refused apart (app-pkg's own tree holds lib-pkg 2.0), they run as one tree together: lib-pkg 1.0 for both.
    assert run("run", "app-pkg==1.0", "lib-pkg==1.0", *args, *show).returncode == 2
    together = run("run", "--together", "app-pkg==1.0", "lib-pkg==1.0", *args, *show)
    assert together.returncode == 0 and together.stdout == "1.0 1.0\n", together

    def ensured(*specs: str) -> dict:
        done = run("ensure", "--together", *specs, *args, "--json")
        assert done.returncode == 0, done
        (package,) = json.loads(done.stdout)["packages"]
        return package

    first = ensured("lib-pkg==1.0", "app-pkg==1.0")  # the same set in another order: the same tree
    assert first["action"] == "present" and first["name"].startswith("together-") and first["version"] == "1"
    other = ensured("app-pkg==1.0", "lib-pkg==2.0")  # another set: another tree
    assert other["action"] == "installed" and other["path"] != first["path"]
    human = run("ensure", "--together", "lib-pkg==1.0", "app-pkg==1.0", *args)
    assert human.stdout == f"present    {first['name']}==1 (app-pkg==1.0, lib-pkg==1.0)  {first['path']}\n", human
    with_uv = run("ensure", "--together", "--installer", "uv", "strict-pkg==1.0", "lib-pkg==2.0", *args, "--json")
    assert with_uv.returncode == 0 and json.loads(with_uv.stdout)["packages"][0]["action"] == "installed", with_uv
    assert not [page for page in shadowing.pages if page.startswith("together")]  # never asked of the index
    listed = run("list", "--repo", str(repo), "--long")
    assert f"{first['name']}==1 (app-pkg==1.0, lib-pkg==1.0)  " in listed.stdout, listed
    trees = json.loads(run("list", "--repo", str(repo), "--json").stdout)["trees"]
    assert {"name": first["name"], "requirement": "app-pkg==1.0 lib-pkg==1.0"}.items() <= next(
        tree for tree in trees if tree["name"] == first["name"]
    ).items()
    # A set that cannot hold together fails as the installer says, and publishes nothing.
    trees_before = sorted(p.name for p in Path(first["path"]).parent.parent.iterdir())
    impossible = run("ensure", "--together", "strict-pkg==1.0", "lib-pkg==1.0", *args)
    assert impossible.returncode == 1 and "pip failed" in impossible.stderr, impossible
    assert sorted(p.name for p in Path(first["path"]).parent.parent.iterdir()) == trees_before
    # A set tree is an ordinary tree to verify and repair: broken, it is reinstalled from its record.
    (Path(first["path"]) / "lib_pkg" / "__init__.py").write_text("VERSION = 'tampered'\n")
    assert run("verify", "--all", "--repo", str(repo)).returncode == 1
    repaired = run("verify", "--all", "--repair", *args)
    assert repaired.returncode == 0, repaired
    assert run("verify", "--all", "--repo", str(repo)).returncode == 0
    # Its members come from its metapackage's METADATA, or from its record when that METADATA is gone; a
    # re-record keeps them, so a later repair still knows the set.
    tree, name = Path(first["path"]), first["name"]
    (record,) = repo.glob(f"records/*/{name}/1.json")
    record.unlink()
    assert run("verify", "--all", "--repair", *args).returncode == 0
    (meta,) = tree.glob("together_*.dist-info")
    (meta / "METADATA").unlink()
    assert run("verify", "--all", "--repo", str(repo)).returncode == 1
    assert run("verify", "--all", "--repair", *args).returncode == 0, "reinstalled from the record's members"
    assert run("verify", "--all", "--repo", str(repo)).returncode == 0
    listed_again = json.loads(run("list", "--repo", str(repo), "--json").stdout)["trees"]
    assert next(t for t in listed_again if t["name"] == name)["requirement"] == "app-pkg==1.0 lib-pkg==1.0"
    options = InstallOptions(find_links=(shadowing.url,), no_index=True)
    with Repo(repo, install=options) as store:
        result = store.ensure_together(["app-pkg==1.0", "lib-pkg==1.0"])
        assert result.path == first["path"] and result.action == "present"
        assert store.call_isolated([result], "lib_pkg:version") == ("1.0", [])
        assert store.ensure_together(["lib-pkg==1.0"]).name == "lib-pkg"  # a set of one is that spec's tree
