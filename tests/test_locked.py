"""Lock files as trees: real locks made by ``pip lock`` and ``uv pip compile`` against a real index on 127.0.0.1,
ensured as ONE tree each: exactly their artifacts, hash-checked, nothing resolved, keyed by what they hold here."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import actions, document, import_version, isolated_env, run, start
from indexserver import IndexServer
from wheels import make_wheel

from repoinstall import InstallOptions, Repo


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    """app 1.0 (needs dep>=1), dep 1.0, lone 1.0, and a wheel for no interpreter of this machine."""
    directory = tmp_path_factory.mktemp("lock-wheels")
    make_wheel(directory, "app", "1.0", requires=("dep>=1",))
    make_wheel(directory, "dep", "1.0")
    make_wheel(directory, "lone", "1.0", scripts={"lone-tool": "lone:main"})
    server = IndexServer(directory).start()
    yield server
    server.stop()


def pip_lock(index: IndexServer, out: Path, *specs: str) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "lock", *specs, "--no-index", "--find-links", index.url, "-o", str(out)],
        env=isolated_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def uv_compile(index: IndexServer, out: Path, *specs: str, hashes: bool = False) -> Path:
    # From the index's simple pages, whose hashes uv writes into the lock. (uv 0.13 leaves the hashes out when it
    # reads them from a find-links page's #sha256= links instead.)
    command = ["uv", "pip", "compile", "-", "--index-url", index.simple, "-o", str(out)]
    done = subprocess.run(
        [*command, *(["--generate-hashes"] if hashes else [])],
        input="\n".join(specs) + "\n",
        env=isolated_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


def pip_install(target: Path, lock: Path) -> None:
    """A plain ``pip install --target`` of a lock file, to compare a tree with."""
    command = [sys.executable, "-m", "pip", "install", "--target", str(target), "-r", str(lock)]
    done = subprocess.run(command, env=isolated_env(), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def ensure(repo: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    # No index at all: a lock that gives URLs needs none.
    return run("ensure", *args, "--repo", repo, "--json")


def records(tree: Path) -> dict[str, str]:
    # Every file that came from an artifact, with its RECORD hash. Not the installer's own notes (INSTALLER,
    # REQUESTED, direct_url.json), bytecode (compiled on install) or console scripts (written for the
    # interpreter that installs them): they say how, not what, was installed.
    rows = {}
    for record in tree.glob("*.dist-info/RECORD"):
        for line in record.read_text().splitlines():
            path, digest, _ = line.rsplit(",", 2)
            own = path.rsplit("/", 1)[-1] in ("INSTALLER", "REQUESTED", "direct_url.json")
            if digest and "__pycache__" not in path and "bin/" not in path and not own:
                rows[path] = digest
    return rows


def dist_infos(tree: str | Path) -> list[str]:
    return sorted(p.name for p in Path(tree).iterdir() if p.name.endswith(".dist-info"))


def test_a_pip_lock_is_one_tree_of_exactly_its_artifacts(tmp_path: Path, served: IndexServer, installer: str) -> None:
    lock = pip_lock(served, tmp_path / "pylock.toml", "app==1.0")
    repo = tmp_path / "repo"
    before = served.downloads("dep-1.0")
    done = ensure(repo, "-r", lock)
    assert done.returncode == 0, done.stderr
    [package] = document(done.stdout)["packages"]
    assert package["action"] == "installed"
    assert package["name"].startswith("locked-") and package["version"] == "1"
    assert package["requirement"] == str(lock)
    tree = package["path"]
    assert import_version(tree, "app") == "1.0" and import_version(tree, "dep") == "1.0"
    assert dist_infos(tree) == [
        "app-1.0.dist-info",
        "dep-1.0.dist-info",
        f"{package['name'].replace('-', '_')}-1.dist-info",
    ]
    assert served.downloads("dep-1.0") == before + 1
    # path -r and run -r use the same tree, and install nothing.
    path = run("path", "-r", lock, "--repo", repo)
    assert path.returncode == 0, path.stderr
    assert path.stdout.strip() == tree
    ran = run("run", "-r", lock, "--repo", repo, "--", sys.executable, "-c", "import app, dep; print('both')")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "both"
    assert served.downloads("dep-1.0") == before + 1


def test_nothing_is_resolved_or_added(tmp_path: Path, served: IndexServer) -> None:
    # A lock that leaves app's dependency out installs app alone (--no-deps): the lock is the whole truth.
    full = pip_lock(served, tmp_path / "full.toml", "app==1.0")
    text = full.read_text()
    cut = text[: text.index('[[packages]]\nname = "dep"')]
    lock = tmp_path / "pylock.app-only.toml"
    lock.write_text(cut)
    done = ensure(tmp_path / "repo", "-r", lock)
    assert done.returncode == 0, done.stderr
    tree = document(done.stdout)["packages"][0]["path"]
    assert "dep-1.0.dist-info" not in dist_infos(tree)
    assert "app-1.0.dist-info" in dist_infos(tree)


def test_locks_with_the_same_content_share_one_tree(tmp_path: Path, served: IndexServer) -> None:
    # pip's pylock, uv's pylock and uv's hashed requirements name the same artifacts: one tree, one install.
    locks = [
        pip_lock(served, tmp_path / "pylock.toml", "app==1.0"),
        uv_compile(served, tmp_path / "pylock.uv.toml", "app==1.0"),
        uv_compile(served, tmp_path / "locked.txt", "app==1.0", hashes=True),
    ]
    repo = tmp_path / "repo"
    done = [ensure(repo, "-r", lock) for lock in locks]
    assert [d.returncode for d in done] == [0, 0, 0], [d.stderr for d in done]
    assert [actions(d.stdout) for d in done] == [["installed"], ["present"], ["present"]]
    assert len({document(d.stdout)["packages"][0]["path"] for d in done}) == 1


def test_a_changed_hash_is_another_tree(tmp_path: Path) -> None:
    # Two indexes serve different bytes for dep 1.0: their locks differ by one hash, so they are two trees.
    trees = []
    for payload in (0, 64):
        directory = tmp_path / f"wheels-{payload}"
        directory.mkdir()
        make_wheel(directory, "dep", "1.0", payload=payload)
        server = IndexServer(directory).start()
        try:
            lock = pip_lock(server, tmp_path / f"pylock.p{payload}.toml", "dep==1.0")
            done = ensure(tmp_path / "repo", "-r", lock)
        finally:
            server.stop()
        assert done.returncode == 0, done.stderr
        trees.append(document(done.stdout)["packages"][0]["path"])
    assert trees[0] != trees[1]


def test_a_hash_mismatch_is_one_line_and_publishes_nothing(tmp_path: Path, served: IndexServer, installer: str) -> None:
    lock = pip_lock(served, tmp_path / "pylock.toml", "app==1.0")
    text = lock.read_text()
    good = text.split('sha256 = "')[2].split('"')[0]  # dep's
    lock.write_text(text.replace(good, "0" * 64))
    repo = tmp_path / "repo"
    done = run("ensure", "-r", lock, "--repo", repo)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 2, done.stderr  # "installing ..." and the error
    error = done.stderr.splitlines()[-1]
    assert error.startswith("repoinstall: error: locked-") and "hash mismatch for dep" in error, error
    assert "dep-1.0-py3-none-any.whl" in error and "0" * 64 in error and good in error
    assert not list((repo / "trees").glob("*/*/*")) and not list((repo / "records").glob("*/*/*"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('lock-version = "2.0"\ncreated-by = "x"\n', "lock-version: '2.0' is not supported"),
        ("lock-version = \n", "pylock.toml: not a valid TOML lock file"),
        (
            'lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "w"\nversion = "1"\n'
            '[[packages.wheels]]\nname = "w-1-cp27-cp27m-win32.whl"\nurl = "http://127.0.0.1:9/w-1-cp27-cp27m-win32.whl"\n'
            '[packages.wheels.hashes]\nsha256 = "' + "a" * 64 + '"\n',
            "packages[0] (w): no wheel fits this environment",
        ),
    ],
    ids=["unknown major", "malformed", "no artifact here"],
)
def test_a_bad_lock_is_one_line_exit_2_and_creates_nothing(tmp_path: Path, text: str, message: str) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(text)
    repo = tmp_path / "repo"
    done = run("ensure", "-r", lock, "--repo", repo)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("repoinstall: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr
    assert not repo.exists()


def test_hashed_requirements_rules_as_pip_has_them(tmp_path: Path, served: IndexServer) -> None:
    hashed = uv_compile(served, tmp_path / "locked.txt", "app==1.0", hashes=True)
    mixed = tmp_path / "mixed.txt"
    mixed.write_text(hashed.read_text() + "lone==1.0\n")
    plain = tmp_path / "plain.txt"
    plain.write_text("lone==1.0\n")
    repo = tmp_path / "repo"
    done = run("ensure", "-r", mixed, "--repo", repo)
    assert done.returncode == 2
    assert "Hashes are required in --require-hashes mode" in done.stderr and "lone==1.0" in done.stderr
    done = run("ensure", "-r", plain, "--require-hashes", "--repo", repo)
    assert done.returncode == 2 and "Hashes are required in --require-hashes mode" in done.stderr, done.stderr
    done = run("ensure", "lone==1.0", "--require-hashes", "--repo", repo)
    assert done.returncode == 2 and "--require-hashes" in done.stderr, done.stderr
    assert not repo.exists()
    done = run(
        "ensure", "-r", hashed, "--require-hashes", "--repo", repo, "--json", "--no-index", "--find-links", served.url
    )
    assert done.returncode == 0, done.stderr
    assert actions(done.stdout) == ["installed"]


def test_list_shows_a_locked_trees_members_and_source(tmp_path: Path, served: IndexServer) -> None:
    lock = pip_lock(served, tmp_path / "pylock.toml", "app==1.0")
    repo = tmp_path / "repo"
    done = ensure(repo, "-r", lock, "lone==1.0", "--no-index", "--find-links", served.url)
    assert done.returncode == 0, done.stderr
    listed = run("list", "--repo", repo, "--json")
    rows = {row["name"]: row for row in json.loads(listed.stdout)["trees"]}
    [locked] = [row for name, row in rows.items() if name.startswith("locked-")]
    assert locked["lock"] == {"source": str(lock), "members": ["app==1.0", "dep==1.0"]}
    assert "lock" not in rows["lone"]
    human = run("list", "--repo", repo).stdout
    assert re.search(r"\n  locked-app-dep-[0-9a-f]{10}==1  .*  with app==1\.0, dep==1\.0\n", human), human
    assert f"(lock {lock}: app==1.0, dep==1.0)" in run("list", "--repo", repo, "--long").stdout


def test_repair_reinstalls_a_locked_tree_from_what_it_was_installed_from(tmp_path: Path, served: IndexServer) -> None:
    lock = pip_lock(served, tmp_path / "pylock.toml", "app==1.0")
    repo = tmp_path / "repo"
    done = ensure(repo, "-r", lock)
    tree = Path(document(done.stdout)["packages"][0]["path"])
    record = (tree / "dep-1.0.dist-info" / "RECORD").read_text()
    lock.unlink()  # the file is gone: the tree itself says what it holds
    module = tree / "dep" / "__init__.py"
    module.chmod(0o644)
    module.write_text("tampered = True\n")
    repaired = run("verify", "--all", "--repair", "--repo", repo, "--no-index")
    assert repaired.returncode == 0, repaired.stderr
    assert "reinstalled" in repaired.stdout + repaired.stderr
    assert (tree / "dep-1.0.dist-info" / "RECORD").read_text() == record
    assert import_version(tree, "dep") == "1.0"


def test_two_pods_ensuring_one_lock_install_it_once(tmp_path: Path, served: IndexServer) -> None:
    lock = pip_lock(served, tmp_path / "pylock.toml", "lone==1.0")
    before = served.downloads("lone-1.0")
    served.delays["lone-1.0"] = 1.5
    try:
        pods = [start("ensure", "-r", lock, "--repo", tmp_path / "repo", "--json") for _ in range(2)]
        outcomes = [pod.finish(120) for pod in pods]
    finally:
        served.delays.pop("lone-1.0")
    assert [code for code, _, _ in outcomes] == [0, 0], [err for _, _, err in outcomes]
    assert sorted(actions(out)[0] for _, out, _ in outcomes) == ["installed", "waited"]
    assert served.downloads("lone-1.0") == before + 1


def test_the_api_ensures_a_lock(tmp_path: Path, served: IndexServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    lock = uv_compile(served, tmp_path / "locked.txt", "lone==1.0", hashes=True)
    for key in [k for k in __import__("os").environ if k.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    with Repo(tmp_path / "repo", install=InstallOptions(find_links=(served.url,), no_index=True)) as repo:
        first = repo.ensure_lock(str(lock))
        again = asyncio.run(repo.aensure_lock(str(lock)))
    assert (first.action, again.action) == ("installed", "present")
    assert first.path == again.path and first.name.startswith("locked-")


@pytest.fixture
def changing(tmp_path: Path) -> Iterator[tuple[Path, IndexServer]]:
    """An index whose files a test changes: app 1.0 (needs dep>=1) and dep 1.0 to begin with."""
    directory = tmp_path / "changing"
    directory.mkdir()
    make_wheel(directory, "app", "1.0", requires=("dep>=1",))
    make_wheel(directory, "dep", "1.0")
    server = IndexServer(directory).start()
    yield directory, server
    server.stop()


def _ensure_app(repo: Path, server: IndexServer) -> subprocess.CompletedProcess[str]:
    return run("ensure", "app==1.0", "--repo", repo, "--json", "--no-index", "--find-links", server.url)


def test_a_tree_comes_back_with_the_closure_it_had(
    tmp_path: Path, changing: tuple[Path, IndexServer], installer: str
) -> None:
    directory, server = changing
    repo = tmp_path / "repo"
    first = _ensure_app(repo, server)
    assert first.returncode == 0, first.stderr
    tree = Path(document(first.stdout)["packages"][0]["path"])
    assert import_version(tree, "dep") == "1.0"
    make_wheel(directory, "dep", "1.1")  # a newer dependency appears: a fresh resolution would take it
    # Removed, then ensured again: the same closure.
    assert run("remove", "app==1.0", "--repo", repo).returncode == 0
    again = _ensure_app(repo, server)
    assert again.returncode == 0, again.stderr
    assert actions(again.stdout) == ["installed"]
    assert import_version(tree, "dep") == "1.0"
    # Collected by gc, then ensured again: the same.
    assert run("gc", "--unused-for", "0", "--repo", repo).returncode == 0
    assert not tree.exists()
    assert _ensure_app(repo, server).returncode == 0
    assert import_version(tree, "dep") == "1.0"
    # Damaged and repaired: the same.
    module = tree / "dep" / "__init__.py"
    module.chmod(0o644)
    module.write_text("broken = True\n")
    repaired = run("verify", "--all", "--repair", "--repo", repo, "--no-index", "--find-links", server.url)
    assert repaired.returncode == 0, repaired.stderr
    assert import_version(tree, "dep") == "1.0"
    # Removed and forgotten: the next install resolves afresh, and takes the newer dep.
    assert run("remove", "app==1.0", "--forget", "--repo", repo).returncode == 0
    assert _ensure_app(repo, server).returncode == 0
    assert import_version(tree, "dep") == "1.1"


def test_an_artifact_no_longer_there_is_one_line_and_publishes_nothing(
    tmp_path: Path, changing: tuple[Path, IndexServer], installer: str
) -> None:
    directory, server = changing
    repo = tmp_path / "repo"
    assert _ensure_app(repo, server).returncode == 0
    assert run("remove", "app==1.0", "--repo", repo).returncode == 0
    (directory / "dep-1.0-py3-none-any.whl").unlink()
    make_wheel(directory, "dep", "1.1")
    # The store still holds dep 1.0: the tree comes back from it, its artifact not needed.
    back = run("ensure", "app==1.0", "--repo", repo, "--json", "--no-index", "--find-links", server.url)
    assert back.returncode == 0, back.stderr
    assert import_version(document(back.stdout)["packages"][0]["path"], "dep") == "1.0"
    assert run("remove", "app==1.0", "--repo", repo).returncode == 0
    for stored in (repo / "store").glob("*/dep"):
        shutil.rmtree(stored)  # as gc removes a stored distribution no tree holds
    done = run("ensure", "app==1.0", "--repo", repo, "--no-index", "--find-links", server.url)
    assert done.returncode == 1, done.stderr
    error = done.stderr.splitlines()[-1]
    assert error.startswith("repoinstall: error: app==1.0: ") and "dep-1.0-py3-none-any.whl" in error, done.stderr
    assert "no longer available" in error and "`repoinstall remove app==1.0 --forget`" in error, error
    assert done.stderr.count("\n") == 2, done.stderr  # "installing ..." and the error
    assert not list((repo / "trees").glob("*/app/*"))
    # As it says: with its closure forgotten, the next install resolves afresh (and takes dep 1.1).
    forgot = run("remove", "app==1.0", "--forget", "--repo", repo)
    assert forgot.returncode == 0 and "not installed" in forgot.stderr, forgot.stderr
    again = _ensure_app(repo, server)
    assert again.returncode == 0, again.stderr
    assert import_version(document(again.stdout)["packages"][0]["path"], "dep") == "1.1"


def test_an_export_installs_the_same_bytes_with_pip_uv_and_repoinstall(tmp_path: Path, served: IndexServer) -> None:
    repo = tmp_path / "repo"
    done = run("ensure", "app==1.0", "lone==1.0", "--repo", repo, "--json", "--no-index", "--find-links", served.url)
    assert done.returncode == 0, done.stderr
    trees = [Path(p["path"]) for p in document(done.stdout)["packages"]]
    exported = tmp_path / "pylock.team.toml"
    made = run("export", "app==1.0", "lone==1.0", "--repo", repo, "-o", exported)
    assert made.returncode == 0, made.stderr
    text = exported.read_text()
    assert 'created-by = "repoinstall"' in text and text.count("[[packages]]") == 3
    # The same file on stdout.
    assert run("export", "app==1.0", "lone==1.0", "--repo", repo).stdout == text

    in_trees: dict[str, str] = {}
    for tree in trees:
        in_trees.update(records(tree))
    by_pip = tmp_path / "by-pip"
    pip_install(by_pip, exported)
    by_uv = tmp_path / "by-uv"
    uv = subprocess.run(
        ["uv", "pip", "install", "--target", str(by_uv), "--python", sys.executable, "-r", str(exported)],
        env=isolated_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert uv.returncode == 0, uv.stderr
    assert records(by_pip) == in_trees
    assert records(by_uv) == in_trees
    # repoinstall ensure -r of it: one tree holding the same distributions, installed from the same bytes (and
    # its own metapackage, which says what it was installed from).
    locked = run("ensure", "-r", exported, "--repo", repo, "--json")
    assert locked.returncode == 0, locked.stderr
    [package] = document(locked.stdout)["packages"]
    own = package["name"].replace("-", "_") + "-1.dist-info/"
    assert {k: v for k, v in records(Path(package["path"])).items() if not k.startswith(own)} == in_trees


def test_an_export_of_a_locked_tree_is_that_same_tree(tmp_path: Path, served: IndexServer) -> None:
    lock = pip_lock(served, tmp_path / "pylock.toml", "app==1.0")
    repo = tmp_path / "repo"
    first = ensure(repo, "-r", lock)
    exported = tmp_path / "pylock.again.toml"
    assert run("export", "-r", lock, "--repo", repo, "-o", exported).returncode == 0
    again = ensure(repo, "-r", exported)
    assert actions(again.stdout) == ["present"]
    assert document(again.stdout)["packages"][0]["path"] == document(first.stdout)["packages"][0]["path"]
    # remove -r names the lock's tree too.
    removed = run("remove", "-r", lock, "--repo", repo)
    assert removed.returncode == 0, removed.stderr
    assert not Path(document(first.stdout)["packages"][0]["path"]).exists()


def test_export_refuses_what_is_not_one_lock(tmp_path: Path, served: IndexServer) -> None:
    repo = tmp_path / "repo"
    assert run("ensure", "lone==1.0", "--repo", repo, "--no-index", "--find-links", served.url).returncode == 0
    missing = run("export", "app==1.0", "--repo", repo)
    assert missing.returncode == 1 and "not installed" in missing.stderr, missing.stderr
    named = run("export", "lone==1.0", "--repo", repo, "-o", tmp_path / "lock.toml")
    assert named.returncode == 2 and "pylock.toml or pylock.<name>.toml" in named.stderr, named.stderr
    assert not (tmp_path / "lock.toml").exists()


@pytest.mark.parametrize("tool", ["pip lock", "uv pip compile"])
def test_a_tools_lock_installs_what_pip_installs_from_it(tmp_path: Path, served: IndexServer, tool: str) -> None:
    # The same file, through repoinstall and through a plain pip install: the same distributions, same bytes.
    if tool == "pip lock":
        lock = pip_lock(served, tmp_path / "pylock.toml", "app==1.0", "lone==1.0")
    else:
        lock = uv_compile(served, tmp_path / "pylock.toml", "app==1.0", "lone==1.0")
    done = ensure(tmp_path / "repo", "-r", lock)
    assert done.returncode == 0, done.stderr
    [package] = document(done.stdout)["packages"]
    own = package["name"].replace("-", "_") + "-1.dist-info/"
    ours = {k: v for k, v in records(Path(package["path"])).items() if not k.startswith(own)}
    target = tmp_path / "plain"
    pip_install(target, lock)
    assert ours == records(target)
    assert sorted(p.name for p in target.glob("*.dist-info")) == [
        "app-1.0.dist-info",
        "dep-1.0.dist-info",
        "lone-1.0.dist-info",
    ]


def test_together_sets_the_specs_and_leaves_a_lock_as_it_is(tmp_path: Path, served: IndexServer) -> None:
    lock = pip_lock(served, tmp_path / "pylock.toml", "lone==1.0")
    done = run(
        "ensure", "app==1.0", "dep==1.0", "-r", lock, "--together", "--repo", tmp_path / "repo", "--json",
        "--no-index", "--find-links", served.url,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    names = sorted(p["name"].split("-")[0] for p in document(done.stdout)["packages"])
    assert names == ["locked", "together"]
