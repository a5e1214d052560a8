"""pip and uv backends: the same options mean the same tree, the tree says who built it, caches stay caches.

The core behaviour (races, SIGKILL takeover, SIGTERM, hashes, failures, pip configuration, bytecode) runs under
both installers in the other modules through the ``installer`` fixture; this module covers what differs.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import actions, document, ensure_args, import_version, isolated_env, run, snapshot, tmpfs
from indexserver import IndexServer
from servers import PypiServer
from wheels import make_wheel

from repoinstall import InstallOptions, InvalidInput, Repo


@pytest.fixture(scope="module")
def two_indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexServer, IndexServer]]:
    """The primary index has dep-k 1.0 only; the extra one has dep-k 1.0 and 2.0 (and lib-k's dependents)."""
    primary, extra = tmp_path_factory.mktemp("primary"), tmp_path_factory.mktemp("extra")
    make_wheel(primary, "app-k", "1.0", requires=("dep-k>=1",))
    make_wheel(primary, "dep-k", "1.0")
    make_wheel(extra, "dep-k", "1.0")
    make_wheel(extra, "dep-k", "2.0")
    servers = IndexServer(primary).start(), IndexServer(extra).start()
    yield servers
    for server in servers:
        server.stop()


def tree_files(tree: Path) -> set[str]:
    """A tree's files, minus what only says who installed it (INSTALLER, REQUESTED, uv's cache note)."""
    own = {"INSTALLER", "REQUESTED", "RECORD", "uv_cache.json", "direct_url.json"}
    return {str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file() and p.name not in own}


def test_both_installers_build_the_same_tree_and_record_which_did(tmp_path: Path, index: IndexServer) -> None:
    trees = {}
    for name in ("pip", "uv"):
        repo = tmp_path / name
        done = run(*ensure_args(repo, index.url, "adaptor-b==1.0"), "--installer", name)
        assert done.returncode == 0, done.stderr
        tree = Path(document(done.stdout)["packages"][0]["path"])
        trees[name] = tree
        listed = json.loads(run("list", "--repo", repo, "--json").stdout)["trees"]
        assert [t["installer"] for t in listed] == [name]
        assert (tree / "adaptor_b-1.0.dist-info" / "INSTALLER").read_text().strip() == name
        assert not (tree / ".lock").exists()  # uv's lock on its target is not part of the tree
        verified = run("verify", "--all", "--repo", repo, "--json")
        assert verified.returncode == 0, verified.stdout  # every file, bytecode included, is in a RECORD
        assert import_version(tree, "dep_c") == "1.0"
    assert tree_files(trees["pip"]) == tree_files(trees["uv"])
    assert any(name.endswith(".pyc") for name in tree_files(trees["uv"]))


def test_installer_from_the_environment_and_a_tree_serves_either(repo: Path, index: IndexServer) -> None:
    first = run(*ensure_args(repo, index.url, "adaptor-a==1.0"), env=isolated_env(REPOINSTALL_INSTALLER="uv"))
    assert first.returncode == 0, first.stderr
    record = json.loads(next((repo / "records").rglob("1.json")).read_text())
    assert record["installer"] == "uv" and record["installer_version"][0].isdigit()
    again = run(*ensure_args(repo, index.url, "adaptor-a==1.0"), "--installer", "pip")
    assert actions(again.stdout) == ["present"]  # a tree is a tree, whoever built it


def test_unknown_installer_is_one_line_exit_2_and_writes_nothing(repo: Path, index: IndexServer) -> None:
    for args, env in (
        (("--installer", "conda"), isolated_env()),
        ((), isolated_env(REPOINSTALL_INSTALLER="poetry")),
    ):
        done = run(*ensure_args(repo, index.url, "adaptor-a==1.0"), *args, env=env)
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1 and "--installer must be one of pip, uv" in done.stderr, done.stderr
        assert not repo.exists()
    with pytest.raises(InvalidInput, match="installer must be one of pip, uv"):
        Repo(repo, install=InstallOptions(installer="conda"))


def test_missing_uv_is_one_clear_line_and_present_trees_still_serve(repo: Path, index: IndexServer) -> None:
    assert run(*ensure_args(repo, index.url, "adaptor-a==1.0")).returncode == 0
    before = snapshot(repo / "trees")
    # This interpreter without the uv package and with no uv on PATH: what a pod without the extra sees.
    blocked = (
        "import sys; sys.modules['uv'] = None; from repoinstall._cli.app import main; "
        "sys.argv[0] = 'repoinstall'; main()"
    )
    assert shutil.which("uv", path="/usr/bin:/bin") is None
    env = isolated_env(REPOINSTALL_INSTALLER="uv", PATH="/usr/bin:/bin")

    def ensure(spec: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-c", blocked, *ensure_args(repo, index.url, spec)]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)

    missing = ensure("adaptor-d==1.0")
    assert missing.returncode == 1
    assert missing.stderr.strip().count("\n") == 0, missing.stderr
    assert "uv installer is not available: pip install 'repoinstall[uv]'" in missing.stderr
    assert snapshot(repo / "trees") == before
    present = ensure("adaptor-a==1.0")
    assert present.returncode == 0, present.stderr
    assert actions(present.stdout) == ["present"]


@pytest.mark.parametrize("installer_name", ["pip", "uv"])
def test_index_options_mean_the_same_under_both(
    tmp_path: Path, two_indexes: tuple[IndexServer, IndexServer], installer_name: str
) -> None:
    primary, extra = two_indexes
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("dep-k<2\n")
    config = tmp_path / "pip.conf"
    config.write_text(f"[global]\nindex-url = {primary.simple}\nextra-index-url = {extra.simple}\n")
    # uv's own settings must not change which index answers: pip's configuration decides for both.
    env = isolated_env(
        PIP_CONFIG_FILE=str(config),
        UV_INDEX_URL="http://127.0.0.1:9/simple",
        UV_INDEX_STRATEGY="first-index",
        UV_RESOLUTION="lowest",
    )
    for extra_args, expected in (
        ((), "2.0"),  # pip.conf's indexes: the best version across both, as pip picks it
        (("--constraint", str(constraints)), "1.0"),
        (("--index-url", primary.simple), "2.0"),  # the extra index from pip.conf still counts
    ):
        repo = tmp_path / f"repo-{len(extra_args)}-{expected}"
        done = run(
            "ensure", "app-k==1.0", "--repo", repo, "--json", "--installer", installer_name, *extra_args, env=env
        )
        assert done.returncode == 0, done.stderr
        assert import_version(document(done.stdout)["packages"][0]["path"], "dep_k") == expected, extra_args
    no_index = run(
        "ensure", "app-k==1.0", "--repo", tmp_path / "none", "--installer", installer_name, "--no-index", env=env
    )
    assert no_index.returncode == 1 and "app-k" in no_index.stderr


@pytest.fixture
def other_filesystem(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "cache-fs", "64m") as mountpoint:
        yield mountpoint


@pytest.mark.parametrize("installer_name", ["pip", "uv"])
@pytest.mark.parametrize("where", ["same filesystem", "other filesystem"])
def test_cache_is_shared_between_installs_and_never_linked_into_trees(
    request: pytest.FixtureRequest, tmp_path: Path, index: IndexServer, installer_name: str, where: str
) -> None:
    cache = (request.getfixturevalue("other_filesystem") if where == "other filesystem" else tmp_path) / "cache"
    # pip keeps plain-HTTP downloads in its cache only from trusted hosts; a real index is HTTPS.
    env = {
        k: v
        for k, v in isolated_env(PIP_TRUSTED_HOST="127.0.0.1").items()
        if k not in ("PIP_NO_CACHE_DIR", "UV_NO_CACHE")
    }
    options = ["--installer", installer_name, "--cache-dir", str(cache), "--jobs", "1"]
    # Two trees that both hold dep-c, then the first again in a fresh repo: one download of each file.
    for repo, spec in ((tmp_path / "one", "adaptor-b==1.0"), (tmp_path / "one", "adaptor-x[fast]==1.0")):
        done = run(*ensure_args(repo, index.url, spec), *options, env=env)
        assert done.returncode == 0, done.stderr
    again = run(*ensure_args(tmp_path / "two", index.url, "adaptor-b==1.0"), *options, env=env)
    assert again.returncode == 0, again.stderr
    assert actions(again.stdout) == ["installed"]
    # The pages give hashes, as PyPI, pypiserver and devpi do, so uv's lock of the closure downloads nothing.
    assert index.downloads("dep_c") == 1 and index.downloads("adaptor_b") == 1
    assert (cache / installer_name).is_dir()
    cached = {(p.stat().st_dev, p.stat().st_ino) for p in cache.rglob("*") if p.is_file()}
    for repo in (tmp_path / "one", tmp_path / "two"):
        files = [p for p in (repo / "trees").rglob("*") if p.is_file()]
        # Linked from the repo's own store only: never an inode of the cache.
        assert files and not {(p.stat().st_dev, p.stat().st_ino) for p in files} & cached
        stored = {(p.stat().st_dev, p.stat().st_ino) for p in (repo / "store").rglob("*") if p.is_file()}
        assert {(p.stat().st_dev, p.stat().st_ino) for p in files} <= stored
        assert run("verify", "--all", "--repo", repo).returncode == 0


def test_pip_settings_without_files_match_what_pip_itself_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    from repoinstall._pipconfig import forget_settings, parse_listing, pip_settings

    for key, value in {
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
        "PIP_EXTRA_INDEX_URL": "http://127.0.0.1:9/a http://127.0.0.1:9/b",
        "PIP_TRUSTED_HOST": "127.0.0.1",
        "PIP_ONLY_BINARY": ":all:",
        "PIP_DEFAULT_TIMEOUT": "7",
    }.items():
        monkeypatch.setenv(key, value)
    forget_settings()
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    assert pip_settings(sys.executable) == parse_listing(listed)  # read without starting pip: no file to read
    assert pip_settings(sys.executable)["extra-index-url"] == "http://127.0.0.1:9/a http://127.0.0.1:9/b"


def test_user_pip_conf_is_honoured_by_both_installers(
    tmp_path: Path, two_indexes: tuple[IndexServer, IndexServer]
) -> None:
    primary, _ = two_indexes
    (tmp_path / "config" / "pip").mkdir(parents=True)
    (tmp_path / "config" / "pip" / "pip.conf").write_text(f"[global]\nindex-url = {primary.simple}\n")
    env = {k: v for k, v in isolated_env().items() if k != "PIP_CONFIG_FILE"}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_CONFIG_DIRS=str(tmp_path / "none"), HOME=str(tmp_path))
    for name in ("pip", "uv"):
        done = run("ensure", "app-k==1.0", "--repo", tmp_path / name, "--json", "--installer", name, env=env)
        assert done.returncode == 0, done.stderr
        assert import_version(document(done.stdout)["packages"][0]["path"], "dep_k") == "1.0"


# ---- the closure in the record: every file installed, its sha256 and its URL ------------------------------

CLOSURE_SECRET = "cl0sure-Pa55"


@pytest.fixture(scope="module")
def private_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PypiServer]:
    """pypiserver (HTML pages with #sha256 fragments) behind htpasswd: app-z needs dep-z, which has two wheels
    for this interpreter (the installers prefer the ``cpXY`` one)."""
    from passlib.apache import HtpasswdFile

    workdir = tmp_path_factory.mktemp("closure")
    htpasswd = HtpasswdFile(str(workdir / "htpasswd"), new=True)
    htpasswd.set_password("deploy", CLOSURE_SECRET)
    htpasswd.save()
    packages = workdir / "packages"
    packages.mkdir()
    make_wheel(packages, "app-z", "1.0", requires=("dep-z>=1",))
    make_wheel(packages, "dep-z", "1.0")
    make_wheel(packages, "dep-z", "1.0", tag=f"cp{sys.version_info[0]}{sys.version_info[1]}-none-any", payload=64)
    server = PypiServer(packages, workdir, htpasswd=workdir / "htpasswd")
    yield server
    server.stop()


def _record(repo: Path, name: str) -> dict[str, Any]:
    (record,) = (repo / "records").glob(f"*/{name}/*.json")
    return dict(json.loads(record.read_text()))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_record_holds_the_closure_hashes_and_urls_without_credentials(
    repo: Path, private_index: PypiServer, installer: str
) -> None:
    with_userinfo = private_index.simple.replace("http://", f"http://deploy:{CLOSURE_SECRET}@")
    done = run("ensure", "app-z==1.0", "--repo", repo, "--index-url", with_userinfo, "--json")
    assert done.returncode == 0, done.stderr
    files = private_index.packages
    cp_tag = f"cp{sys.version_info[0]}{sys.version_info[1]}-none-any"
    record = _record(repo, "app-z")
    assert record["installer"] == installer
    rows = {row["name"]: row for row in record["dists"]}
    assert rows == {
        "app-z": {
            "name": "app-z",
            "version": "1.0",
            "dist_info": "app_z-1.0.dist-info",
            "sha256": _sha256(files / "app_z-1.0-py3-none-any.whl"),
            "url": f"{private_index.url}/packages/app_z-1.0-py3-none-any.whl",
        },
        "dep-z": {
            "name": "dep-z",
            "version": "1.0",
            "dist_info": "dep_z-1.0.dist-info",
            "sha256": _sha256(files / f"dep_z-1.0-{cp_tag}.whl"),  # the wheel installed, of the two
            "url": f"{private_index.url}/packages/dep_z-1.0-{cp_tag}.whl",
        },
    }
    assert CLOSURE_SECRET not in json.dumps(record) and "deploy" not in json.dumps(record)
    listed = json.loads(run("list", "--repo", repo, "--json").stdout)["trees"]
    # list shows each row as recorded, with its provenance: installed from a wheel repoinstall hashed.
    with_provenance = [sorted({**r, "provenance": "wheel"}.items()) for r in record["dists"]]
    assert [sorted(d.items()) for d in listed[0]["dists"]] == with_provenance
    verified = run("verify", "--all", "--repo", repo, "--json")
    assert verified.returncode == 0, verified.stdout
    # A record written before records held the closure (rows without sha256 and url) still verifies and lists.
    (path,) = (repo / "records").glob("*/app-z/*.json")
    old = {**record, "dists": [{k: row[k] for k in ("name", "version", "dist_info")} for row in record["dists"]]}
    path.write_text(json.dumps(old))
    verified = run("verify", "--all", "--repo", repo, "--json")
    assert verified.returncode == 0, verified.stdout
    listed = json.loads(run("list", "--repo", repo, "--json").stdout)["trees"]
    assert {(d["name"], d["sha256"], d["url"], d["provenance"]) for d in listed[0]["dists"]} == {
        ("app-z", None, None, None),
        ("dep-z", None, None, None),
    }
    assert actions(run("ensure", "app-z==1.0", "--repo", repo, "--json", "--no-index").stdout) == ["present"]


def test_find_links_and_a_set_record_their_files(
    tmp_path: Path, index: IndexServer, wheel_dir: Path, installer: str
) -> None:
    """A find-links page that gives no hashes (the installer hashes what it downloads) and a local directory; a
    set's metapackage, a wheel written for the install, is recorded with its hash and no URL."""
    index.hashes = False
    repo = tmp_path / "repo"
    done = run(*ensure_args(repo, index.url, "adaptor-b==1.0"))
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in _record(repo, "adaptor-b")["dists"]}
    assert {name: (row["sha256"], row["url"]) for name, row in rows.items()} == {
        name: (_sha256(wheel_dir / f"{name.replace('-', '_')}-1.0-py3-none-any.whl"),
               f"{index.url}{name.replace('-', '_')}-1.0-py3-none-any.whl")
        for name in ("adaptor-b", "dep-c")
    }  # fmt: skip
    local = tmp_path / "local"
    done = run(*ensure_args(local, str(wheel_dir), "--together", "adaptor-a==1.0", "adaptor-b==1.0"))
    assert done.returncode == 0, done.stderr
    (record,) = (local / "records").glob("*/*/*.json")
    rows = {row["name"]: row for row in json.loads(record.read_text())["dists"]}
    (metapackage,) = (name for name in rows if name not in ("adaptor-a", "adaptor-b", "dep-c"))
    assert "url" not in rows[metapackage] and len(rows[metapackage]["sha256"]) == 64
    for name in ("adaptor-a", "adaptor-b", "dep-c"):
        wheel = wheel_dir / f"{name.replace('-', '_')}-1.0-py3-none-any.whl"
        assert (rows[name]["sha256"], rows[name]["url"]) == (_sha256(wheel), wheel.as_uri())
    assert run("verify", "--all", "--repo", local).returncode == 0
