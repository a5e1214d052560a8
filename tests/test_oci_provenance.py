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
    verified = run("verify", "--repo", repo, "--json")
    assert verified.returncode == 0, verified.stdout
    kinds = {d["stored"]: d["provenance"] for d in json.loads(verified.stdout)["store"] if d["dist"] == "alpha==1.0"}
    assert kinds == {layer: "registry", f"1-{wheel_sha[:16]}": "wheel"}


def test_an_image_holds_exactly_its_trees_distributions(
    tmp_path: Path, served: IndexServer, hostile: HostileRegistry
) -> None:
    # gamma's image with a stowaway layer its tree does not require: refused, nothing stored.
    hostile.repository = "stowaway"
    stowaway = [(planted("gamma"), claims(served, "gamma")), (planted("alpha"), claims(served, "alpha"))]
    hostile.image(f"gamma-1-{SHORT_ENV}", ENV, stowaway, tree="gamma==1.0")
    done = run("ensure", "gamma==1.0", "--repo", tmp_path / "a", "--from", f"{hostile.host}/stowaway",
               "--plain-http", "--no-index")  # fmt: skip
    assert done.returncode == 1 and "which gamma" in done.stderr and "does not require" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not any((tmp_path / "a" / "store").rglob("*.dist-info"))
    # beta's image without the alpha it requires: refused; the beta layer it did check is not stored either.
    hostile.repository = "short"
    hostile.image(f"beta-1-{SHORT_ENV}", ENV, [(planted("beta", ("alpha>=1.0",)), claims(served, "beta"))],
                  tree="beta==1.0")  # fmt: skip
    done = run("ensure", "beta==1.0", "--repo", tmp_path / "b", "--from", f"{hostile.host}/short",
               "--plain-http", "--no-index")  # fmt: skip
    assert done.returncode == 1 and "does not hold" in done.stderr, done.stderr
    assert not any((tmp_path / "b" / "store").rglob("*.dist-info"))
    # The same distribution in two layers: refused before any blob is fetched.
    hostile.repository = "twice"
    hostile.image(f"gamma-1-{SHORT_ENV}", ENV, [(planted("gamma"), claims(served, "gamma")),
                                                (planted("gamma") + b"\0" * 512, claims(served, "gamma"))],
                  tree="gamma==1.0")  # fmt: skip
    done = run("ensure", "gamma==1.0", "--repo", tmp_path / "c", "--from", f"{hostile.host}/twice",
               "--plain-http", "--no-index")  # fmt: skip
    assert done.returncode == 1 and "more than one layer" in done.stderr, done.stderr
    assert not any((tmp_path / "c" / "store").rglob("*.dist-info"))


def test_a_refused_image_falls_back_to_the_index_with_a_warning(
    tmp_path: Path, served: IndexServer, hostile: HostileRegistry
) -> None:
    hostile.repository = "refused"
    stowaway = [(planted("gamma"), claims(served, "gamma")), (planted("alpha"), claims(served, "alpha"))]
    hostile.image(f"gamma-1-{SHORT_ENV}", ENV, stowaway, tree="gamma==1.0")
    where = f"{hostile.host}/refused"
    # An index allowed: installed from it, the refusal a warning on stderr; nothing of the image stored.
    done = run("ensure", "gamma==1.0", "--repo", tmp_path / "a", "--from", where, "--plain-http",
               "--index-url", served.simple, "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "does not require: refused; installing gamma==1.0" in done.stderr and "from the index instead" in done.stderr
    assert b"PLANTED" not in module_of(done.stdout, "gamma")
    assert leaves(tmp_path / "a", "gamma") == [f"1-{claims(served, 'gamma')['org.repoinstall.dist.sha256'][:16]}"]
    assert not (tmp_path / "a" / "store" / ENV / "alpha").exists()
    # --no-index: the refusal is the answer, one line, exit 1.
    done = run("ensure", "gamma==1.0", "--repo", tmp_path / "b", "--from", where, "--plain-http", "--no-index")
    assert done.returncode == 1 and "does not require: refused" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    # An index that fails too: exit 1, and the refusal is still said.
    done = run("ensure", "gamma==1.0", "--repo", tmp_path / "c", "--from", where, "--plain-http",
               "--index-url", STOPPED)  # fmt: skip
    assert done.returncode == 1 and "refused; installing it from the index instead failed" in done.stderr, done.stderr
    # A manifest refused before any layer (a layer twice): the same fallback.
    hostile.repository = "refused-twice"
    twice = [(planted("gamma"), claims(served, "gamma")), (planted("gamma") + b"\0" * 512, claims(served, "gamma"))]
    hostile.image(f"gamma-1-{SHORT_ENV}", ENV, twice, tree="gamma==1.0")
    done = run("ensure", "gamma==1.0", "--repo", tmp_path / "d", "--from", f"{hostile.host}/refused-twice",
               "--plain-http", "--index-url", served.simple)  # fmt: skip
    assert done.returncode == 0 and "more than one layer: refused; installing" in done.stderr, done.stderr


def test_a_store_made_by_0_4_0_is_found_and_repaired(
    tmp_path: Path, served: IndexServer, hostile: HostileRegistry
) -> None:
    """0.4.0 stored a pulled layer under the wheel sha256 its annotation claimed, and composed it into trees from
    the index. verify names that entry and every tree composed from it; --repair sets it aside and reinstalls them."""
    repo = tmp_path / "repo"
    hostile.repository = "old-store"
    hostile.image(f"alpha-1-{SHORT_ENV}", ENV, [(planted("alpha"), claims(served, "alpha"))], tree="alpha==1.0")
    pulled = run("ensure", "alpha==1.0", "--repo", repo, "--from", f"{hostile.host}/old-store", "--plain-http",
                 "--no-index")  # fmt: skip
    assert pulled.returncode == 0, pulled.stderr
    # As 0.4.0 left it: the entry at the claimed wheel's name, the record's row naming it by that sha256.
    wheel_sha = claims(served, "alpha")["org.repoinstall.dist.sha256"]
    (layer,) = leaves(repo, "alpha")
    (repo / "store" / ENV / "alpha" / layer).rename(repo / "store" / ENV / "alpha" / f"1-{wheel_sha[:16]}")
    record_path = repo / "records" / ENV / "alpha" / "1.json"
    record = json.loads(record_path.read_text())
    (row,) = record["dists"]
    record["dists"] = [{**{k: v for k, v in row.items() if k not in ("diff_id", "claimed")}, "sha256": wheel_sha}]
    record_path.write_text(json.dumps(record))
    assert run("verify", "--repo", repo).returncode == 1  # named by a claim: found at once
    # ... and, as 0.4.0 did, a tree from the index composed from it.
    composed = run("ensure", "beta==1.0", "--repo", repo, "--index-url", served.simple, "--json")
    assert composed.returncode == 0, composed.stderr
    beta_tree = Path(json.loads(composed.stdout)["packages"][0]["path"])
    assert (beta_tree / "alpha" / "__init__.py").read_bytes() == PLANTED

    found = run("verify", "--repo", repo, "--json")
    assert found.returncode == 1, found.stderr
    report = json.loads(found.stdout)
    trees = {t["tree"]: t for t in report["trees"]}
    assert trees["alpha==1.0"]["status"] == trees["beta==1.0"]["status"] == "broken"
    assert any("annotation claimed" in note for note in trees["beta==1.0"]["notes"])
    (entry,) = [d for d in report["store"] if d["stored"] == f"1-{wheel_sha[:16]}"]
    assert entry["status"] == "broken" and sorted(entry["trees"]) == ["alpha==1.0", "beta==1.0"]

    repaired = run("verify", "--repair", "--repo", repo, "--index-url", served.simple)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert b"PLANTED" not in (beta_tree / "alpha" / "__init__.py").read_bytes()
    alpha_tree = repo / "trees" / ENV / "alpha" / "1"
    assert b"PLANTED" not in (alpha_tree / "alpha" / "__init__.py").read_bytes()
    assert run("verify", "--repo", repo).returncode == 0
