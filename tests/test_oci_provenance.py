"""A registry is a source, not an authority: a layer whose annotations claim a genuine wheel's sha256 is stored
under its own diff_id, never under the wheel's name, so a request from the index or a hashed lock never composes
its files; and an image must hold exactly its tree's distributions, or nothing of it is stored."""

from __future__ import annotations

import base64
import hashlib
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import run
from hostileregistry import HostileRegistry, regular, tar_of
from indexserver import IndexServer
from wheels import make_wheel

from repoinstall._disk.identity import environment_tag

STOPPED = "http://127.0.0.1:9/simple"
ENV = environment_tag()
SHORT_ENV = "-".join(ENV.split("-")[:2])
PLANTED = b'VERSION = "1.0"\nPLANTED = True\n'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    directory = tmp_path_factory.mktemp("genuine")
    make_wheel(directory, "alpha", "1.0")
    make_wheel(directory, "beta", "1.0", requires=("alpha>=1.0",))
    make_wheel(directory, "gamma", "1.0")
    server = IndexServer(directory).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileRegistry]:
    server = HostileRegistry().start()
    yield server
    server.stop()


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def planted(name: str, requires: tuple[str, ...] = ()) -> bytes:
    """A layer of ``name`` 1.0 whose module is not the wheel's, with a RECORD that vouches for it (whoever plants
    files writes the RECORD too)."""
    module = name.replace("-", "_")
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        f"{module}/__init__.py": PLANTED,
        f"{module}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{meta}\n".encode(),
    }
    record = "".join(f"{path},{_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{module}-1.0.dist-info/RECORD"] = (record + f"{module}-1.0.dist-info/RECORD,,\n").encode()

    def add(tar: tarfile.TarFile) -> None:
        for path, data in files.items():
            regular(tar, path, data)

    return tar_of(add)


def claims(served: IndexServer, name: str) -> dict[str, str]:
    """Annotations claiming ``name`` 1.0's genuine wheel, by its real sha256."""
    wheel = next(served.directory.glob(f"{name.replace('-', '_')}-1.0-*.whl"))
    return {"org.repoinstall.dist.name": name, "org.repoinstall.dist.version": "1.0",
            "org.repoinstall.dist.sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}  # fmt: skip


def module_of(result: str, name: str) -> bytes:
    tree = Path(next(p["path"] for p in json.loads(result)["packages"] if p["name"] == name))
    return (tree / name / "__init__.py").read_bytes()


def leaves(repo: Path, name: str) -> list[str]:
    return sorted(p.name for p in (repo / "store" / ENV / name).iterdir() if not p.name.startswith("."))


def test_a_forged_annotation_never_becomes_the_wheels_bytes(
    tmp_path: Path, served: IndexServer, hostile: HostileRegistry
) -> None:
    repo = tmp_path / "repo"
    hostile.repository = "forged"
    hostile.image(f"alpha-1-{SHORT_ENV}", ENV, [(planted("alpha"), claims(served, "alpha"))], tree="alpha==1.0")
    # Asked from that registry: what it serves is what --from trusts it for, labelled as such.
    pulled = run("ensure", "alpha==1.0", "--repo", repo, "--from", f"{hostile.host}/forged", "--plain-http",
                 "--index-url", STOPPED, "--json")  # fmt: skip
    assert pulled.returncode == 0, pulled.stderr
    assert module_of(pulled.stdout, "alpha") == PLANTED
    (layer,) = leaves(repo, "alpha")
    assert layer.startswith("1-layer-")
    listed = json.loads(run("list", "--repo", repo, "--json").stdout)
    (row,) = listed["trees"][0]["dists"]
    assert row["provenance"] == "registry" and row["sha256"] is None
    assert row["claimed"] == claims(served, "alpha")["org.repoinstall.dist.sha256"]
    assert row["diff_id"].removeprefix("sha256:").startswith(layer.removeprefix("1-layer-"))

    # From the index, without --from: the genuine wheel is installed, and beta's tree holds its files.
    genuine = run("ensure", "beta==1.0", "--repo", repo, "--index-url", served.simple, "--json")
    assert genuine.returncode == 0, genuine.stderr
    assert b"PLANTED" not in module_of(genuine.stdout, "beta").replace(b"beta", b"")
    beta_tree = Path(json.loads(genuine.stdout)["packages"][0]["path"])
    assert b"PLANTED" not in (beta_tree / "alpha" / "__init__.py").read_bytes()
    wheel_sha = claims(served, "alpha")["org.repoinstall.dist.sha256"]
    assert leaves(repo, "alpha") == sorted([layer, f"1-{wheel_sha[:16]}"])  # both kept, never one for the other

    # A hashed requirements file naming the genuine hash: the genuine files too.
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"alpha==1.0 --hash=sha256:{wheel_sha}\n")
    hashed = run("ensure", "-r", lock, "--repo", repo, "--index-url", served.simple, "--json")
    assert hashed.returncode == 0, hashed.stderr
    tree = Path(json.loads(hashed.stdout)["packages"][0]["path"])
    assert b"PLANTED" not in (tree / "alpha" / "__init__.py").read_bytes()
    assert run("verify", "--repo", repo).returncode == 0


def test_an_image_holds_exactly_its_trees_distributions(
    tmp_path: Path, served: IndexServer, hostile: HostileRegistry
) -> None:
    # gamma's image with a stowaway layer its tree does not require: refused, nothing stored.
    hostile.repository = "stowaway"
    stowaway = [(planted("gamma"), claims(served, "gamma")), (planted("alpha"), claims(served, "alpha"))]
    hostile.image(f"gamma-1-{SHORT_ENV}", ENV, stowaway, tree="gamma==1.0")
    done = run("ensure", "gamma==1.0", "--repo", tmp_path / "a", "--from", f"{hostile.host}/stowaway",
               "--plain-http", "--index-url", STOPPED)  # fmt: skip
    assert done.returncode == 1 and "which gamma" in done.stderr and "does not require" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not any((tmp_path / "a" / "store").rglob("*.dist-info"))
    # beta's image without the alpha it requires: refused; the beta layer it did check is not stored either.
    hostile.repository = "short"
    hostile.image(f"beta-1-{SHORT_ENV}", ENV, [(planted("beta", ("alpha>=1.0",)), claims(served, "beta"))],
                  tree="beta==1.0")  # fmt: skip
    done = run("ensure", "beta==1.0", "--repo", tmp_path / "b", "--from", f"{hostile.host}/short",
               "--plain-http", "--index-url", STOPPED)  # fmt: skip
    assert done.returncode == 1 and "does not hold" in done.stderr, done.stderr
    assert not any((tmp_path / "b" / "store").rglob("*.dist-info"))
    # The same distribution in two layers: refused before any blob is fetched.
    hostile.repository = "twice"
    hostile.image(f"gamma-1-{SHORT_ENV}", ENV, [(planted("gamma"), claims(served, "gamma")),
                                                (planted("gamma") + b"\0" * 512, claims(served, "gamma"))],
                  tree="gamma==1.0")  # fmt: skip
    done = run("ensure", "gamma==1.0", "--repo", tmp_path / "c", "--from", f"{hostile.host}/twice",
               "--plain-http", "--index-url", STOPPED)  # fmt: skip
    assert done.returncode == 1 and "more than one layer" in done.stderr, done.stderr
    assert not any((tmp_path / "c" / "store").rglob("*.dist-info"))
