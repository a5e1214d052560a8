"""A tree of more distributions than a runtime stacks layers: pushed in at most CAP layers (small distributions
grouped, big ones alone and shared with other trees' images), mounted by podman, unpacked by umoci, pulled into
a second repo with its index stopped; and a registry's grouped layer that is not what it names is refused."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import run
from hostileregistry import HostileRegistry, regular, tar_of
from indexserver import IndexServer
from registry import Registry, registry
from wheels import make_wheel

from repoinstall._disk.identity import environment_tag
from repoinstall._oci.groups import BIG, CAP

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("docker-registry", "skopeo", "umoci", "podman")),
    reason="needs docker-registry, skopeo, umoci and podman (bash .ci/run installs them)",
)
#: No index at all for the second cluster: a closed port on 127.0.0.1, so any installer run fails.
STOPPED = "http://127.0.0.1:9/simple"
ENV = environment_tag()
SHORT_ENV = "-".join(ENV.split("-")[:2])
#: The big tree: its root, big-lib (above BIG: a layer of its own) and 298 small ones: 300 distributions.
SMALL = [f"dep-{n:03d}" for n in range(298)]
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    directory = tmp_path_factory.mktemp("many-wheels")
    for name in SMALL:
        make_wheel(directory, name, "1.0")
    make_wheel(directory, "big-lib", "1.0", payload=BIG + (1 << 20))
    make_wheel(directory, "many-root", "1.0", requires=(*SMALL, "big-lib"))
    make_wheel(directory, "few-root", "1.0", requires=("big-lib", "dep-000"))
    server = IndexServer(directory).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def oci(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with registry(tmp_path_factory.mktemp("registry")) as found:
        yield found


def push(repo: Path, served: IndexServer, where: str, spec: str) -> dict[str, Any]:
    done = run("push", where, spec, "--repo", repo, "--no-index", "-f", served.url, "--plain-http", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["images"][0]  # type: ignore[no-any-return]


def manifest(oci: Registry, where: str, digest: str) -> dict[str, Any]:
    got = httpx.get(oci.url(f"/v2/{where.split('/', 1)[1]}/manifests/{digest}"), headers={"Accept": MANIFEST})
    assert got.status_code == 200, got.text
    return got.json()  # type: ignore[no-any-return]


def names_of(layer: dict[str, Any]) -> list[str]:
    notes = layer["annotations"]
    if "org.repoinstall.dists" in notes:
        assert set(notes) == {"org.repoinstall.dists"}
        return [one["name"] for one in json.loads(notes["org.repoinstall.dists"])]
    return [notes["org.repoinstall.dist.name"]]


class Many:
    """The 300-distribution tree, installed and pushed once for the module."""

    def __init__(self, where: str, pushed: dict[str, Any], layers: list[dict[str, Any]]) -> None:
        self.where, self.pushed, self.layers = where, pushed, layers


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory, served: IndexServer, oci: Registry) -> Many:
    where = f"{oci.host}/many"
    pushed = push(tmp_path_factory.mktemp("many-repo") / "repo", served, where, "many-root==1.0")
    return Many(where, pushed, manifest(oci, where, pushed["manifest"])["layers"])


def test_a_tree_of_300_distributions_is_pushed_within_the_cap(
    tmp_path: Path, many: Many, served: IndexServer, oci: Registry
) -> None:
    assert many.pushed["layers"] == len(many.layers) <= CAP
    assert len(many.layers) == 76  # big-lib alone, and the 299 others in 75 runs of 4 (the fewest that fit)
    held = [names_of(layer) for layer in many.layers]
    assert sorted(name for names in held for name in names) == sorted([*SMALL, "big-lib", "many-root"])
    assert all(names == sorted(names) for names in held) and max(len(names) for names in held) > 1
    # big-lib (above the threshold) alone, with the one-distribution annotations; its layer is the very one
    # another tree's image (of 3 distributions: one layer each, as without grouping) has.
    (big,) = [layer for layer in many.layers if "big-lib" in names_of(layer)]
    assert set(big["annotations"]) == {f"org.repoinstall.dist.{key}" for key in ("name", "version", "sha256")}
    few = push(tmp_path / "few", served, many.where, "few-root==1.0")
    few_layers = manifest(oci, many.where, few["manifest"])["layers"]
    assert [names_of(layer) for layer in few_layers] == [["big-lib"], ["dep-000"], ["few-root"]]
    assert few_layers[0]["digest"] == big["digest"]
    assert few["uploaded"] == 2  # few-root's and dep-000's (grouped in the big tree's image): not big-lib's


def test_the_grouped_image_mounts_with_podman_and_unpacks_with_umoci(tmp_path: Path, many: Many) -> None:
    tag = many.pushed["tag"]
    layout = tmp_path / "layout"
    subprocess.run(["skopeo", "copy", "-q", "--src-tls-verify=false", f"docker://{tag}", f"oci:{layout}:tree"],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    subprocess.run(["umoci", "unpack", "--rootless", "--image", f"{layout}:tree", str(tmp_path / "bundle")],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    assert len(list((tmp_path / "bundle" / "rootfs").glob("*.dist-info"))) == 300
    runroot = Path(tempfile.mkdtemp(prefix="ri-podman-"))  # podman takes a runroot of 50 characters at most
    podman = ["podman", "--storage-driver", "overlay", "--root", str(tmp_path / "pr"), "--runroot", str(runroot)]
    try:
        subprocess.run([*podman, "pull", "-q", "--tls-verify=false", f"docker://{tag}"],
                       check=True, capture_output=True, timeout=300)  # fmt: skip
        mounting = subprocess.run([*podman, "image", "mount", tag], capture_output=True, text=True, timeout=120,
                                  check=False)  # fmt: skip
        assert mounting.returncode == 0, mounting.stderr  # one layer per distribution: "max depth exceeded"
        mounted = Path(mounting.stdout.strip())
        assert len(list(mounted.glob("*.dist-info"))) == 300
        assert (mounted / "big_lib" / "payload.bin").stat().st_size > BIG
    finally:
        subprocess.run([*podman, "image", "unmount", "--all"], capture_output=True, timeout=120, check=False)
        subprocess.run([*podman, "system", "reset", "-f"], capture_output=True, timeout=120, check=False)
        shutil.rmtree(runroot, ignore_errors=True)


def test_the_grouped_image_is_pulled_with_the_index_stopped(tmp_path: Path, many: Many) -> None:
    repo = tmp_path / "pulled"
    done = run("ensure", "many-root==1.0", "--repo", repo, "--from", many.where, "--index-url", STOPPED,
               "--plain-http", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = json.loads(run("list", "--repo", repo, "--json").stdout)
    (tree,) = listed["trees"]
    assert tree["installer"] == "oci-image" and len(tree["dists"]) == 300
    assert {row["provenance"] for row in tree["dists"]} == {"registry"}
    # Each distribution named by its layer's diff_id: a group's by the group's, told apart by name and version.
    config = json.loads(subprocess.run(["skopeo", "inspect", "--config", "--tls-verify=false",
                                        f"docker://{many.pushed['tag']}"], check=True, capture_output=True,
                                       text=True, timeout=120).stdout)  # fmt: skip
    diff_ids = config["rootfs"]["diff_ids"]
    by_name = {name: diff_ids[n] for n, layer in enumerate(many.layers) for name in names_of(layer)}
    assert {row["name"]: row["diff_id"] for row in tree["dists"]} == by_name
    assert len(set(by_name.values())) == len(many.layers) <= CAP
    assert run("verify", "--repo", repo).returncode == 0
    # Pushed again from there: grouped the same, the same layers and the same image (nothing uploaded).
    again = run("push", many.where, "many-root==1.0", "--repo", repo, "--index-url", STOPPED, "--plain-http", "--json")
    assert again.returncode == 0, again.stderr
    pushed = json.loads(again.stdout)["images"][0]
    assert (pushed["manifest"], pushed["uploaded"]) == (many.pushed["manifest"], 0)


# ---- a registry's grouped layer that is not what it names --------------------------------------------------------


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileRegistry]:
    server = HostileRegistry().start()
    yield server
    server.stop()


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def files_of(name: str, requires: tuple[str, ...] = ()) -> dict[str, bytes]:
    """A distribution ``name`` 1.0's files, with a RECORD that lists them."""
    module = name.replace("-", "_")
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        f"{module}/__init__.py": f"NAME = {name!r}\n".encode(),
        f"{module}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{meta}\n".encode(),
    }
    record = "".join(f"{path},{_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{module}-1.0.dist-info/RECORD"] = (record + f"{module}-1.0.dist-info/RECORD,,\n").encode()
    return files


def group_layer(*files: dict[str, bytes]) -> bytes:
    def add(tar: tarfile.TarFile) -> None:
        for held in files:
            for path, data in held.items():
                regular(tar, path, data)

    return tar_of(add)


def dists_note(*names: str) -> dict[str, str]:
    held = [{"name": name, "version": "1.0", "sha256": f"{n:064x}"} for n, name in enumerate(sorted(names), 1)]
    return {"org.repoinstall.dists": json.dumps(held, sort_keys=True, separators=(",", ":"))}


ROOT = files_of("grp-root", ("grp-a", "grp-b"))
A, B = files_of("grp-a"), files_of("grp-b")
#: grp-b with a RECORD that lists grp-a's module too.
B_TOO = {**B, "grp_b-1.0.dist-info/RECORD": B["grp_b-1.0.dist-info/RECORD"] + b"grp_a/__init__.py,,\n"}
HOSTILE = {
    # A file in the layer that no distribution's RECORD lists.
    "unrecorded": (group_layer(A, B, {"grp_a/planted.py": b"PLANTED = True\n"}), "listed in no distribution's RECORD"),
    # ... named to clear the terminal: shown escaped.
    "unrecorded-escape": (group_layer(A, B, {"grp_a/\x1b[2J.py": b"X = 1\n"}), "grp_a/\\x1b[2J.py: listed in no"),
    # Named, but not in the layer.
    "missing": (group_layer(A), "holds no grp-b 1.0, which its annotations name"),
    # In the layer, but not named.
    "stowaway": (group_layer(A, B, files_of("grp-c")), "which its annotations do not name"),
    # A file two RECORDs list.
    "shared": (group_layer(A, B_TOO), "both write grp_a/__init__.py"),
}


def root_layer() -> tuple[bytes, dict[str, str]]:
    return group_layer(ROOT), {"org.repoinstall.dist.name": "grp-root", "org.repoinstall.dist.version": "1.0",
                               "org.repoinstall.dist.sha256": "f" * 64}  # fmt: skip


def test_a_grouped_layer_is_pulled_split_by_record(tmp_path: Path, hostile: HostileRegistry) -> None:
    hostile.repository = "grouped"
    hostile.image(f"grp-root-1-{SHORT_ENV}", ENV, [root_layer(), (group_layer(A, B), dists_note("grp-a", "grp-b"))],
                  tree="grp-root==1.0")  # fmt: skip
    repo = tmp_path / "repo"
    done = run("ensure", "grp-root==1.0", "--repo", repo, "--from", f"{hostile.host}/grouped", "--index-url", STOPPED,
               "--plain-http", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    for name in ("grp_a", "grp_b"):
        (stored,) = (repo / "store" / ENV / name.replace("_", "-")).glob("1-layer-*")
        assert sorted(p.name for p in stored.iterdir()) == [name, f"{name}-1.0.dist-info"]
    listed = json.loads(run("list", "--repo", repo, "--json").stdout)
    rows = {row["name"]: row for row in listed["trees"][0]["dists"]}
    assert rows["grp-a"]["diff_id"] == rows["grp-b"]["diff_id"] != rows["grp-root"]["diff_id"]
    assert (rows["grp-a"]["claimed"], rows["grp-b"]["claimed"]) == (f"{1:064x}", f"{2:064x}")
    assert run("verify", "--repo", repo).returncode == 0

    # Another tree's image with the same group, pulled where the store has one of its distributions but not the
    # other (taken away here, as gc takes what no tree holds): the group is fetched for the one it lacks.
    (b_stored,) = (repo / "store" / ENV / "grp-b").glob("1-layer-*")
    b_stored.chmod(0o755)
    b_stored.rename(tmp_path / "taken")
    hostile.image(f"grp-two-1-{SHORT_ENV}", ENV, [(group_layer(files_of("grp-two", ("grp-a", "grp-b"))), {
        "org.repoinstall.dist.name": "grp-two", "org.repoinstall.dist.version": "1.0",
        "org.repoinstall.dist.sha256": "e" * 64}), (group_layer(A, B), dists_note("grp-a", "grp-b"))],
                  tree="grp-two==1.0")  # fmt: skip
    done = run("ensure", "grp-two==1.0", "--repo", repo, "--from", f"{hostile.host}/grouped", "--index-url", STOPPED,
               "--plain-http", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (repo / "store" / ENV / "grp-b").glob("1-layer-*")] == [b_stored.name]
    tree = Path(json.loads(done.stdout)["packages"][0]["path"])
    assert (tree / "grp_b" / "__init__.py").read_bytes() == B["grp_b/__init__.py"]


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_grouped_layer_that_is_not_what_it_names_is_refused(
    tmp_path: Path, hostile: HostileRegistry, case: str
) -> None:
    layer, said = HOSTILE[case]
    hostile.repository = f"grouped-{case}"
    notes = dists_note("grp-a", "grp-b")
    hostile.image(f"grp-root-1-{SHORT_ENV}", ENV, [root_layer(), (layer, notes)], tree="grp-root==1.0")
    repo = tmp_path / "repo"
    done = run(
        "ensure",
        "grp-root==1.0",
        "--repo",
        repo,
        "--from",
        f"{hostile.host}/{hostile.repository}",
        "--no-index",
        "--plain-http",
    )  # fmt: skip (--no-index: the refusal is the answer)
    assert done.returncode == 1 and said in done.stderr and "refused" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "\x1b" not in done.stderr, done.stderr
    assert not any((repo / "store").rglob("*.dist-info")) and not any((repo / "trees").glob("*/*/*"))
