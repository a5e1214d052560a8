"""A hashed lock with ``--from`` installs the lock's own wheels, pushed beside the tree's image and fetched by their
hashes (a wheel's sha256 is its blob's digest), against a real registry on 127.0.0.1 (Debian's docker-registry):
what it stores is wheel-verified, no index is asked, and a wheel the registry lacks comes from the index or fails
in one line."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import run
from indexserver import IndexServer
from registry import Registry, registry, tags
from wheels import make_wheel

pytestmark = pytest.mark.skipif(not shutil.which("docker-registry"), reason="needs docker-registry")
#: No index at all: a closed port on 127.0.0.1, so any index request fails.
STOPPED = "http://127.0.0.1:9/simple"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    directory = tmp_path_factory.mktemp("wheels")
    make_wheel(directory, "base-lib", "1.0", modules=2)
    make_wheel(directory, "app-one", "1.0", requires=("base-lib>=1.0",), modules=1)
    server = IndexServer(directory).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def oci(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with registry(tmp_path_factory.mktemp("registry")) as found:
        yield found


@pytest.fixture
def live(served: IndexServer) -> Iterator[IndexServer]:
    """Another index serving the same wheels, whose every request is counted."""
    server = IndexServer(served.directory).start()
    yield server
    server.stop()


def hashed_lock(served: IndexServer, path: Path) -> dict[str, str]:
    """A requirements file with ``--hash`` on every line for the served wheels; each wheel's sha256 by name."""
    hashes = {}
    for wheel in sorted(served.directory.glob("*.whl")):
        hashes[wheel.name.split("-")[0].replace("_", "-")] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    path.write_text("".join(f"{name}==1.0 --hash=sha256:{sha}\n" for name, sha in hashes.items()))
    return hashes


def pushed_from_index(repo: Path, lock: Path, served: IndexServer, where: str) -> dict[str, object]:
    done = run("ensure", "-r", lock, "--repo", repo, "--no-index", "-f", served.url, "--from", where, "--push",
               "--plain-http", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (image,) = json.loads(done.stdout)["pushed"]
    return image  # type: ignore[no-any-return]


def ensure_from(repo: Path, lock: Path, where: str, index: str) -> tuple[int, str, str]:
    done = run("ensure", "-r", lock, "--repo", repo, "--from", where, "--plain-http", "--index-url", index, "--json")
    return done.returncode, done.stdout, done.stderr


def rows(repo: Path) -> tuple[list[dict[str, object]], list[dict[str, str]]]:
    """The trees of ``repo`` and the dists rows of its one lock tree (its own metapackage left out)."""
    trees = json.loads(run("list", "--repo", repo, "--json").stdout)["trees"]
    (tree,) = [tree for tree in trees if tree["name"].startswith("locked-")]
    return trees, [row for row in tree["dists"] if not row["name"].startswith("locked-")]


def test_a_hashed_lock_from_a_registry_installs_its_wheels_and_asks_no_index(
    tmp_path: Path, served: IndexServer, oci: Registry, live: IndexServer
) -> None:
    where = f"{oci.host}/locks"
    lock = tmp_path / "requirements.txt"
    hashes = hashed_lock(served, lock)
    image = pushed_from_index(tmp_path / "one", lock, served, where)
    # The lock's wheels went up beside the image, listed by an OCI artifact manifest tagged for tree and platform.
    assert (image["wheels"], image["wheels_uploaded"]) == (2, 2)
    tag = str(image["tag"]).rsplit(":", 1)[1]
    platform = str(image["env"]).split("-", 2)[2]
    listed = [name for name in tags(oci, "locks") if ".wheels--" in name]
    assert listed == [f"{tag}.wheels--{platform}"]
    got = httpx.get(oci.url(f"/v2/locks/manifests/{listed[0]}"), headers={"Accept": MANIFEST})
    document = got.json()
    assert document["artifactType"] == "application/vnd.repoinstall.wheels.v1"
    assert document["config"]["mediaType"] == "application/vnd.oci.empty.v1+json"
    assert {(layer["digest"], layer["annotations"]["org.opencontainers.image.title"]) for layer in document["layers"]}
    assert {layer["digest"] for layer in document["layers"]} == {f"sha256:{sha}" for sha in hashes.values()}
    assert {layer["mediaType"] for layer in document["layers"]} == {"application/vnd.repoinstall.wheel.v1+zip"}
    # Pushed again: every wheel is there (HEAD), none uploaded.
    again = run("push", where, "-r", lock, "--repo", tmp_path / "one", "--no-index", "-f", served.url, "--plain-http",
                "--json")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert [(one["wheels"], one["wheels_uploaded"]) for one in json.loads(again.stdout)["images"]] == [(2, 0)]

    # A second cluster with a live index: the lock's wheels from the registry, not one request to the index.
    code, out, err = ensure_from(tmp_path / "two", lock, where, live.simple)
    assert code == 0, err
    assert live.requests == 0 and sum(live.pages.values()) == 0
    # And one with its index stopped.
    code, out, err = ensure_from(tmp_path / "three", lock, where, STOPPED)
    assert code == 0, err
    assert [p["action"] for p in json.loads(out)["packages"]] == ["installed"]
    for repo in (tmp_path / "two", tmp_path / "three"):
        trees, found = rows(repo)
        # Wheel-verified, as from an index: the installer's record, the lock's own sha256s, no layer anywhere.
        assert {tree["installer"] for tree in trees} <= {"pip", "uv"}
        assert {row["name"]: row["sha256"] for row in found} == hashes
        assert {row["provenance"] for row in found} == {"wheel"}
        assert not any("diff_id" in row for row in found)
        leaves = [path.name for path in (repo / "store").glob("*/*/*")]
        assert len(leaves) == 3 and not [leaf for leaf in leaves if "-layer-" in leaf]
        assert run("verify", "--repo", repo).returncode == 0
    # Another lock whose distributions are all stored: composed from the store, asking no registry (none is up).
    subset = tmp_path / "subset.txt"
    subset.write_text(f"base-lib==1.0 --hash=sha256:{hashes['base-lib']}\n")
    code, _, err = ensure_from(tmp_path / "two", subset, "127.0.0.1:9/gone", STOPPED)
    assert code == 0, err


def test_a_wheel_the_registry_lacks_comes_from_the_index_or_fails_in_one_line(
    tmp_path: Path, served: IndexServer, oci: Registry, live: IndexServer
) -> None:
    where = f"{oci.host}/lacking"
    lock = tmp_path / "requirements.txt"
    hashes = hashed_lock(served, lock)
    pushed_from_index(tmp_path / "one", lock, served, where)
    # base-lib's wheel deleted from the registry: its wheels manifest still lists it, a GET is a 404.
    deleted = httpx.delete(oci.url(f"/v2/lacking/blobs/sha256:{hashes['base-lib']}"))
    assert deleted.status_code == 202, deleted.text
    # A live index: base-lib from it (one line says so), app-one from the registry.
    code, _, err = ensure_from(tmp_path / "two", lock, where, live.simple)
    assert code == 0, err
    assert "has no wheel of base-lib==1.0" in err
    assert (live.downloads("base_lib"), live.downloads("app_one")) == (1, 0)
    _, found = rows(tmp_path / "two")
    assert {row["name"]: row["sha256"] for row in found} == hashes
    # The index stopped too: exit 1, one line naming the pin, nothing installed.
    code, _, err = ensure_from(tmp_path / "three", lock, where, STOPPED)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert code == 1 and len(errors) == 1 and "base-lib==1.0" in errors[0] and "has no wheel of it" in errors[0], err
    assert not any((tmp_path / "three" / "trees").glob("*/*/*"))


def test_a_pulled_tree_pushes_no_wheels_and_a_changed_wheel_stops_the_push(
    tmp_path: Path, served: IndexServer, oci: Registry
) -> None:
    where = f"{oci.host}/origin"
    first = run("push", where, "app-one==1.0", "--repo", tmp_path / "one", "--no-index", "-f", served.url,
                "--plain-http")  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "wheels: 2 of 2 uploaded" in first.stdout, first.stdout
    # app-one's tree pulled as an image (no lock: its layers), then pushed elsewhere: registry-sourced, no wheels.
    pulled = run("ensure", "app-one==1.0", "--repo", tmp_path / "two", "--from", where, "--plain-http",
                 "--index-url", STOPPED)  # fmt: skip
    assert pulled.returncode == 0, pulled.stderr
    again = run("push", f"{oci.host}/elsewhere", "app-one==1.0", "--repo", tmp_path / "two", "--plain-http",
                "--index-url", STOPPED, "--json")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert [one["wheels"] for one in json.loads(again.stdout)["images"]] == [0]
    assert not [name for name in tags(oci, "elsewhere") if ".wheels--" in name]

    # A tree installed from a local wheel that has changed since: the push says so in one line, exit 1, and
    # uploads nothing more (no image of it).
    local = tmp_path / "local"
    local.mkdir()
    wheel = make_wheel(local, "solo-lib", "1.0", modules=1)
    done = run("ensure", "solo-lib==1.0", "--repo", tmp_path / "three", "--no-index", "-f", local)
    assert done.returncode == 0, done.stderr
    make_wheel(local, "solo-lib", "1.0", modules=2)
    assert wheel.exists()
    done = run("push", f"{oci.host}/changed", "solo-lib==1.0", "--repo", tmp_path / "three", "--no-index", "-f",
               local, "--plain-http")  # fmt: skip
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert done.returncode == 1 and len(errors) == 1 and "is not the wheel solo-lib 1.0" in errors[0], done.stderr
    assert tags(oci, "changed") == []


def test_a_pylock_takes_its_wheels_from_the_registry_not_from_its_urls(
    tmp_path: Path, served: IndexServer, oci: Registry, live: IndexServer
) -> None:
    import subprocess
    import sys

    from helpers import isolated_env

    where = f"{oci.host}/pylocks"
    lock = tmp_path / "pylock.toml"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "lock", "app-one==1.0", "--no-index", "--find-links", live.url, "-o", str(lock)],
        env=isolated_env(), capture_output=True, text=True, check=False, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (pushed_from_index(tmp_path / "one", lock, live, where)["wheels"]) == 2
    before = live.requests
    # Its URLs name the live index's files: the registry's wheels are taken instead, by the lock's hashes.
    code, _, err = ensure_from(tmp_path / "two", lock, where, STOPPED)
    assert code == 0, err
    assert live.requests == before
    _, found = rows(tmp_path / "two")
    assert {row["provenance"] for row in found} == {"wheel"}
    # Its record names each wheel where the lock says it is, not the scratch file it was installed from.
    assert all(str(row["url"]).startswith(live.url) for row in found), found
    assert run("verify", "--repo", tmp_path / "two").returncode == 0


def test_wheels_are_downloaded_for_a_push_with_the_index_credentials_never_shown(tmp_path: Path, oci: Registry) -> None:
    from passlib.apache import HtpasswdFile
    from servers import PypiServer

    secret = "wh33ls-s3cret"
    htpasswd = HtpasswdFile(str(tmp_path / "htpasswd"), new=True)
    htpasswd.set_password("deploy", secret)
    htpasswd.save()
    packages = tmp_path / "packages"
    packages.mkdir()
    wheel = make_wheel(packages, "private-lib", "1.0", modules=1)
    (tmp_path / "pypiserver").mkdir()
    server = PypiServer(packages, tmp_path / "pypiserver", htpasswd=tmp_path / "htpasswd")
    try:
        index = server.simple.replace("http://", f"http://deploy:{secret}@")
        where = f"{oci.host}/private"
        # Installed from the private index; its record keeps the wheel's URL without the credentials, and the
        # push downloads it again with the credentials the index URL gave.
        done = run("push", where, "private-lib==1.0", "--repo", tmp_path / "repo", "--index-url", index,
                   "--plain-http", "--json", "-v")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert secret not in done.stdout + done.stderr
        assert [(one["wheels"], one["wheels_uploaded"]) for one in json.loads(done.stdout)["images"]] == [(1, 1)]
    finally:
        server.stop()
    digest = f"sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}"
    got = httpx.get(oci.url(f"/v2/private/blobs/{digest}"))
    assert got.status_code == 200 and got.content == wheel.read_bytes()
