"""Trees as OCI images, against a real registry on 127.0.0.1 (Debian's docker-registry, the CNCF distribution
registry): pushed with one reproducible layer per stored distribution and an image-shaped config, inspected with
skopeo, applied as a node would (umoci unpack; podman's read-only overlay mount) and imported from with strace
watching, and pulled into a second repo with its index stopped."""

from __future__ import annotations

import collections
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import cli, isolated_env, run, wait_until
from indexserver import IndexServer
from registry import Registry, registry, tags
from wheels import make_wheel

from repoinstall._disk.identity import NO_BYTECODE, environment_tag

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("docker-registry", "skopeo", "umoci", "podman", "strace")),
    reason="needs docker-registry, skopeo, umoci, podman and strace (bash .ci/run installs them)",
)
#: No index at all for the second cluster: a closed port on 127.0.0.1, so any installer run fails.
STOPPED = "http://127.0.0.1:9/simple"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    directory = tmp_path_factory.mktemp("oci-wheels")
    make_wheel(directory, "base-lib", "1.0", modules=3)
    make_wheel(directory, "app-one", "1.0", requires=("base-lib>=1.0",), modules=2)
    make_wheel(directory, "app-two", "1.0", requires=("base-lib>=1.0",), modules=1)
    server = IndexServer(directory).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def oci(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with registry(tmp_path_factory.mktemp("registry")) as found:
        yield found


def push(repo: Path, served: IndexServer, where: str, *specs: str) -> dict[str, object]:
    done = run("push", where, *specs, "--repo", repo, "--no-index", "-f", served.url, "--plain-http", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def skopeo(*args: str) -> str:
    done = subprocess.run(["skopeo", *args], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def test_push_one_reproducible_layer_per_distribution_head_before_upload(
    tmp_path: Path, served: IndexServer, oci: Registry
) -> None:
    where = f"{oci.host}/push-{tmp_path.name[-8:].lower().strip('_')}"
    first = push(tmp_path / "one", served, where, "app-one==1.0")["images"][0]
    assert first["tag"] == f"{where}:app-one-1-{'-'.join(first['env'].split('-')[:2])}"
    assert re.fullmatch(r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}", first["tag"].rsplit(":", 1)[1])
    assert (first["layers"], first["uploaded"]) == (2, 2)
    # skopeo reads the tag as an index, the platform's manifest and an image-shaped config.
    raw = json.loads(skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{first['tag']}"))
    assert raw["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert raw["manifests"][0]["platform"] == {"architecture": "amd64", "os": "linux"} or sys.maxsize < 2**32
    manifest = json.loads(skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{where}@{first['manifest']}"))
    assert [layer["mediaType"] for layer in manifest["layers"]] == ["application/vnd.oci.image.layer.v1.tar+gzip"] * 2
    assert sorted(layer["annotations"]["org.repoinstall.dist.name"] for layer in manifest["layers"]) == [
        "app-one",
        "base-lib",
    ]
    config = json.loads(skopeo("inspect", "--config", "--tls-verify=false", f"docker://{first['tag']}"))
    assert len(config["rootfs"]["diff_ids"]) == 2 and config["os"] == "linux"

    # Pushed again: every blob is there (HEAD), nothing uploaded, the same digest.
    again = push(tmp_path / "one", served, where, "app-one==1.0")["images"][0]
    assert (again["uploaded"], again["digest"]) == (0, first["digest"])
    # A second tree sharing base-lib uploads only its own distribution.
    second = push(tmp_path / "one", served, where, "app-two==1.0")["images"][0]
    assert (second["layers"], second["uploaded"]) == (2, 1)
    # The same tree installed in another repo gives the same layers and the same image.
    other = push(tmp_path / "two", served, where, "app-one==1.0")["images"][0]
    assert (other["uploaded"], other["digest"], other["manifest"]) == (0, first["digest"], first["manifest"])
    # Each tree's tag (its index), each platform's own tag beside it (<tag>--<platform>), and its wheels' tag.
    platform = first["env"].split("-", 2)[2]
    named = [first["tag"].rsplit(":", 1)[1], second["tag"].rsplit(":", 1)[1]]
    wheels = [f"{tag}.wheels--{platform}" for tag in named]
    assert tags(oci, where.split("/", 1)[1]) == sorted(named + [f"{tag}--{platform}" for tag in named] + wheels)


def _imports_compile_nothing(tree: Path, modules: str) -> None:
    """strace an import from ``tree``: no source read to compile, no pyc written, modules found there."""
    trace = Path(tempfile.mkdtemp(prefix="ri-trace-")) / "trace.txt"
    code = f"import sys; sys.path.insert(0, {str(tree)!r}); import {modules}"
    subprocess.run(
        ["strace", "-f", "-qq", "-e", "trace=openat,open,mkdir,rename", "-o", str(trace), sys.executable, "-c", code],
        env=isolated_env(), check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    calls = [line for line in trace.read_text().splitlines() if str(tree) in line]
    assert any(".pyc" in line for line in calls)
    assert [line for line in calls if re.search(r'\.py"', line)] == []  # no source read
    assert [line for line in calls if re.search(r"O_WRONLY|O_RDWR|O_CREAT|mkdir|rename", line)] == []


def test_bytecode_is_valid_wherever_a_layer_lands(tmp_path: Path, served: IndexServer, oci: Registry) -> None:
    where = f"{oci.host}/bytecode"
    pushed = push(tmp_path / "repo", served, where, "app-one==1.0")["images"][0]
    # umoci: the image copied to an OCI layout and unpacked as a runtime unpacks it.
    layout = tmp_path / "layout"
    skopeo("copy", "-q", "--src-tls-verify=false", f"docker://{pushed['tag']}", f"oci:{layout}:tree")
    subprocess.run(["umoci", "unpack", "--rootless", "--image", f"{layout}:tree", str(tmp_path / "bundle")],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    rootfs = tmp_path / "bundle" / "rootfs"
    pyc = next((rootfs / "base_lib" / "__pycache__").glob("part_000.*.pyc")).read_bytes()
    assert pyc[4:8] == b"\x01\x00\x00\x00"  # PEP 552: hash-based, unchecked
    assert {os.stat(p).st_mtime for p in rootfs.rglob("*")} == {0}
    _imports_compile_nothing(rootfs, "app_one,base_lib.part_000,base_lib.part_001")
    # podman: pulled into its own storage and mounted read-only with overlayfs, as a node mounts an image volume.
    runroot = Path(tempfile.mkdtemp(prefix="ri-podman-"))  # podman takes a runroot of 50 characters at most
    podman = ["podman", "--storage-driver", "overlay", "--root", str(tmp_path / "pr"), "--runroot", str(runroot)]
    subprocess.run([*podman, "pull", "-q", "--tls-verify=false", f"docker://{pushed['tag']}"],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    mounted = Path(subprocess.run([*podman, "image", "mount", pushed["tag"]], check=True, capture_output=True,
                                  text=True, timeout=120).stdout.strip())  # fmt: skip
    try:
        mounts = Path("/proc/self/mounts").read_text()
        assert any(
            line.split()[1] == str(mounted) and "ro" in line.split()[3].split(",") for line in mounts.splitlines()
        )
        _imports_compile_nothing(mounted, "app_one,base_lib.part_000")
    finally:
        subprocess.run([*podman, "image", "unmount", "--all"], capture_output=True, timeout=120, check=False)
        subprocess.run([*podman, "system", "reset", "-f"], capture_output=True, timeout=120, check=False)
        shutil.rmtree(runroot, ignore_errors=True)


def _lock(served: IndexServer, path: Path, *names: str) -> Path:
    lines = []
    for wheel in sorted(served.directory.glob("*.whl")):
        name = wheel.name.split("-")[0].replace("_", "-")
        if name in names:
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            lines.append(f"{name}=={wheel.name.split('-')[1]} --hash=sha256:{digest}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_second_cluster_pulls_with_its_index_stopped(tmp_path: Path, served: IndexServer, oci: Registry) -> None:
    where = f"{oci.host}/clusters"
    lock = _lock(served, tmp_path / "requirements.txt", "app-one", "base-lib")
    first = run("ensure", "-r", lock, "app-two==1.0", "--repo", tmp_path / "one", "--no-index", "-f", served.url,
                "--from", where, "--push", "--plain-http", "--json")  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert len(json.loads(first.stdout)["pushed"]) == 2
    second = run("ensure", "-r", lock, "app-two==1.0", "--repo", tmp_path / "two", "--index-url", STOPPED,
                 "--from", where, "--plain-http", "--json")  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert [p["action"] for p in json.loads(second.stdout)["packages"]] == ["installed", "installed"]
    listed = json.loads(run("list", "--repo", tmp_path / "two", "--json").stdout)
    # The lock's tree from the lock's wheels (wheel-verified, by its installer); app-two's from its image.
    by_name = {tree["name"].split("-")[0]: tree for tree in listed["trees"]}
    assert by_name["app"]["installer"] == "oci-image" and by_name["locked"]["installer"] in ("pip", "uv")
    assert by_name["app"]["installer_version"].startswith(f"{where}@sha256:")
    assert {row["provenance"] for row in by_name["locked"]["dists"]} == {"wheel"}
    # base-lib twice (the lock's wheel; app-two's layer, registry-sourced), the apps, the lock's own metapackage
    assert listed["store"]["distributions"] == 5
    assert run("verify", "--repo", tmp_path / "two").returncode == 0
    tree = Path(next(p["path"] for p in json.loads(second.stdout)["packages"] if p["name"] == "app-two"))
    _imports_compile_nothing(tree, "app_two,base_lib.part_000")
    # Present now: no registry asked (it is not even reachable).
    again = run("ensure", "app-two==1.0", "--repo", tmp_path / "two", "--from", "127.0.0.1:9/gone", "--plain-http")
    assert again.returncode == 0, again.stderr
    # Not in the registry: installed from the index as without --from.
    third = run("ensure", "base-lib==1.0", "--repo", tmp_path / "three", "--no-index", "-f", served.url,
                "--from", where, "--plain-http", "--json")  # fmt: skip
    assert third.returncode == 0 and json.loads(third.stdout)["packages"][0]["action"] == "installed"
    assert json.loads(run("list", "--repo", tmp_path / "three", "--json").stdout)["trees"][0]["installer"] == "pip"


def other_machine(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """The environment of this interpreter on the other architecture (aarch64 here on x86_64, and back), and an
    environment for repoinstall processes that run as on such a node: the environment tag is what
    ``repoinstall._disk.envtag`` remembers for this interpreter, so a cache that remembers the other
    platform makes the process file, push and pull its trees as that node's. Wheels of the test index are
    pure Python, so they install the same on either."""
    from repoinstall._disk import envtag

    native = envtag.environment_tag()
    swap = {"x86_64": "aarch64", "aarch64": "x86_64"}
    arch = next((a for a in swap if native.endswith("_" + a)), None)
    if arch is None:
        pytest.skip(f"{native}: not an x86_64 or aarch64 environment")
    other = native[: -len(arch)] + swap[arch]
    cache = tmp_path / f"cache-{swap[arch]}"
    key = envtag.fingerprint()
    entry = cache / "repoinstall" / Path(envtag.cache_path(key)).name
    entry.parent.mkdir(parents=True)
    entry.write_text(f"{key}\n{other}\n")
    return other, isolated_env(XDG_CACHE_HOME=str(cache))


def test_one_reference_serves_two_architectures(tmp_path: Path, served: IndexServer, oci: Registry) -> None:
    where = f"{oci.host}/two-arch"
    other, env = other_machine(tmp_path)
    native = push(tmp_path / "native", served, where, "app-one==1.0")["images"][0]
    done = run("push", where, "app-one==1.0", "--repo", tmp_path / "other", "--no-index", "-f", served.url,
               "--plain-http", "--json", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    pushed = json.loads(done.stdout)["images"][0]
    assert (pushed["env"], pushed["tag"]) == (other, native["tag"])  # one reference for both
    index = json.loads(skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{native['tag']}"))
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    entries = {e["annotations"]["org.repoinstall.env"]: e for e in index["manifests"]}
    assert set(entries) == {native["env"], other}
    assert entries[native["env"]]["digest"] == native["manifest"] and entries[other]["digest"] == pushed["manifest"]
    assert {e["platform"]["architecture"] for e in index["manifests"]} == {"amd64", "arm64"}
    # A runtime picks its platform's image from the one reference, as a node of each architecture would.
    config = json.loads(skopeo("inspect", "--config", "--tls-verify=false", "--override-arch", "arm64",
                               "--override-os", "linux", f"docker://{native['tag']}"))  # fmt: skip
    assert config["architecture"] == "arm64" and config["config"]["Labels"]["org.repoinstall.env"].endswith("aarch64")
    # An index that lost the aarch64 entry (its pusher died before writing it): its platform tag still serves.
    lost = {**index, "manifests": [entries[native["env"]]]}
    put = httpx.put(oci.url(f"/v2/two-arch/manifests/{native['tag'].rsplit(':', 1)[1]}"), content=json.dumps(lost),
                    headers={"Content-Type": index["mediaType"]})  # fmt: skip
    assert put.status_code == 201
    # Each kind of node pulls its own platform's tree from the same reference.
    done = run("ensure", "app-one==1.0", "--repo", tmp_path / "pulled", "--from", where, "--index-url", STOPPED,
               "--plain-http", "--json", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = json.loads(run("list", "--repo", tmp_path / "pulled", "--json", env=env).stdout)
    assert [(t["env"], t["installer_version"]) for t in listed["trees"]] == [(other, f"{where}@{pushed['manifest']}")]


def test_two_platforms_pushed_at_once_both_stay_in_the_index(
    tmp_path: Path, served: IndexServer, oci: Registry
) -> None:
    """Two real pushers, an x86_64 and an aarch64 node, race for one tag: both read the tag before either
    writes it (the front holds each write until both have read), the order in which a read-modify-write
    without compare-and-swap loses an entry. Both platforms must be in the index at the end."""
    from heldtag import HeldTag

    repository = "race"
    other, env = other_machine(tmp_path)
    native = environment_tag()
    tag = f"app-one-1-{'-'.join(native.split('-')[:2])}"
    front = HeldTag(oci.host, repository, tag)
    try:
        where = f"{front.host}/{repository}"
        pods = []
        for name, machine in (("native", isolated_env()), ("other", env)):
            command = cli("push", where, "app-one==1.0", "--repo", tmp_path / name, "--no-index", "-f", served.url,
                          "--plain-http")  # fmt: skip
            pods.append(
                subprocess.Popen(command, env=machine, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            )
        for pod in pods:
            _, err = pod.communicate(timeout=300)
            assert pod.returncode == 0, err
    finally:
        front.stop()
    assert front.reads >= 2 and front.writes >= 2  # the race was run: both read, both wrote
    index = json.loads(skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{oci.host}/{repository}:{tag}"))
    assert sorted(e["annotations"]["org.repoinstall.env"] for e in index["manifests"]) == sorted([native, other])


def test_aensure_all_from_a_registry_asks_the_index_for_no_file(
    tmp_path: Path, served: IndexServer, oci: Registry
) -> None:
    import asyncio

    from repoinstall import InstallOptions, Repo
    from repoinstall._oci.reference import Reference
    from repoinstall._oci.settings import Settings

    where = f"{oci.host}/batches"
    first = run("ensure", "app-one==1.0", "app-two==1.0", "--repo", tmp_path / "one", "--no-index", "-f", served.url,
                "--from", where, "--push", "--plain-http", "--json")  # fmt: skip
    assert first.returncode == 0, first.stderr
    names = ("app_one", "app_two", "base_lib")
    downloads = {name: served.downloads(name) for name in names}
    options = InstallOptions(find_links=(served.url,), no_index=True)
    pulling = Repo(tmp_path / "two", install=options, pull_from=Reference.parse(where), registry=Settings(True))
    with pulling as repo:
        done = asyncio.run(repo.aensure_all(["app-one==1.0", "app-two==1.0"]))
        assert [one.action for one in done] == ["installed", "installed"]
        assert {entry.installer for entry, _ in repo.list()} == {"oci-image"}
        assert repo.verify().ok
    # As ensure_all does: a batch whose trees' images are looked for first stores nothing from the index first.
    assert {name: served.downloads(name) for name in names} == downloads


def _registry_files(found: Registry) -> list[str]:
    """Every file and directory of the registry's storage: a blob, upload, manifest or tag sent would add one."""
    return sorted(str(path.relative_to(found.root)) for path in found.root.rglob("*")) if found.root.exists() else []


def _stored(repo: Path, name: str) -> Path:
    (stored,) = (repo / "store").glob(f"*/{name}/*")
    return stored


@pytest.mark.parametrize("damage", ["changed", "unrecorded"])
def test_a_damaged_stored_distribution_stops_the_push_before_any_upload(
    tmp_path: Path, served: IndexServer, damage: str
) -> None:
    repo = tmp_path / "repo"
    done = run("ensure", "app-one==1.0", "app-two==1.0", "--repo", repo, "--no-index", "-f", served.url)
    assert done.returncode == 0, done.stderr
    # app-one's distributions (app-one, base-lib) are whole: pushed first, before app-two's, they would go up.
    stored = _stored(repo, "app-two")
    if damage == "changed":  # changed in place (stored files are read-only: made writable first)
        damaged = "app_two/__init__.py"
        os.chmod(stored / damaged, 0o644)
        with open(stored / damaged, "r+b") as changing:
            changing.write(b"X = 'tampered'\n")
    else:  # a file no RECORD lists, in a stored distribution's directory
        damaged = "app_two/planted.py"
        os.chmod(stored / "app_two", 0o755)
        (stored / damaged).write_text("PLANTED = True\n")
        os.chmod(stored / "app_two", 0o555)
    with registry(tmp_path / "registry") as oci:
        before = _registry_files(oci)
        where = f"{oci.host}/damaged"
        pushing = run("push", where, "app-one==1.0", "app-two==1.0", "--repo", repo, "--no-index", "-f", served.url,
                      "--plain-http")  # fmt: skip
        assert pushing.returncode == 1, pushing.stderr
        (line,) = pushing.stderr.splitlines()
        label = "changed" if damage == "changed" else "not in its RECORD"
        assert line.startswith("repoinstall: error: app-two==1.0: app-two==1.0 (sha256:"), line
        assert f"is damaged in the store ({damaged} {label}): nothing was pushed" in line, line
        assert line.endswith("`repoinstall verify --repair` installs it afresh"), line
        assert pushing.stdout == ""
        # Nothing went up: no blob, no manifest, no tag, not even the whole tree pushed first.
        assert tags(oci, "damaged") == []
        assert httpx.get(oci.url("/v2/_catalog")).json().get("repositories") in (None, [])
        assert _registry_files(oci) == before

        if damage != "changed":
            return  # repair sets it aside, but puts it back only for a tree it damaged (not this one's)
        # Repaired (the damaged distribution installed afresh, app-two's tree recomposed), the push goes up whole.
        fixed = run("verify", "--repo", repo, "--repair", "--no-index", "-f", served.url)
        assert fixed.returncode == 0, fixed.stderr
        pushed = run("push", where, "app-one==1.0", "app-two==1.0", "--repo", repo, "--no-index", "-f", served.url,
                     "--plain-http", "--json")  # fmt: skip
        assert pushed.returncode == 0, pushed.stderr
        assert len(tags(oci, "damaged")) == 6  # each tree's tag, its platform tag and its wheels' tag


def _blob_gets(oci: Registry, repository: str) -> collections.Counter[str]:
    """The blob GETs the registry answered for ``repository``, per digest, from its access log: once a request
    sent after them is logged (the registry logs each request as it ends)."""
    marker = f"/v2/{repository}/tags/list?n=1&marker={os.urandom(6).hex()}"
    httpx.get(oci.url(marker))
    log = oci.root.parent / "registry.log"
    wait_until(lambda: marker in log.read_text(errors="replace"), what="the registry to log the marker request")
    found = re.findall(rf'"GET /v2/{re.escape(repository)}/blobs/(sha256:[0-9a-f]{{64}}) HTTP/[0-9.]+" 200 ',
                       log.read_text(errors="replace"))  # fmt: skip
    return collections.Counter(found)


def test_a_pull_gets_each_layer_once_per_repo(tmp_path: Path, served: IndexServer, oci: Registry) -> None:
    """Two trees sharing base-lib pulled at once into a new repo GET each layer blob once (base-lib's too); a tree
    pulled later into the same repo GETs only the layer the store lacks, and one present GETs nothing."""
    repository = f"once-{tmp_path.name[-8:].lower().strip('_')}"
    where = f"{oci.host}/{repository}"
    images = push(tmp_path / "source", served, where, "app-one==1.0", "app-two==1.0", "base-lib==1.0")["images"]
    layers: dict[str, set[str]] = {}
    for image in images:
        manifest = json.loads(skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{where}@{image['manifest']}"))
        layers[str(image["tree"])] = {layer["digest"] for layer in manifest["layers"]}
    shared = layers["base-lib==1.0"]
    assert len(shared) == 1 and shared < layers["app-one==1.0"] and shared < layers["app-two==1.0"]
    before = _blob_gets(oci, repository)

    def pull(*specs: str) -> collections.Counter[str]:
        done = run("ensure", *specs, "--repo", tmp_path / "repo", "--index-url", STOPPED, "--from", where,
                   "--plain-http")  # fmt: skip
        assert done.returncode == 0, done.stderr
        return _blob_gets(oci, repository)

    cold = pull("app-one==1.0", "base-lib==1.0") - before
    wanted = layers["app-one==1.0"]
    assert {digest: cold[digest] for digest in wanted} == dict.fromkeys(wanted, 1), cold
    later = pull("app-two==1.0") - before - cold
    assert {digest: later[digest] for digest in layers["app-two==1.0"]} == {
        **dict.fromkeys(layers["app-two==1.0"] - shared, 1), **dict.fromkeys(shared, 0)
    }, later  # fmt: skip
    again = pull("app-one==1.0", "app-two==1.0", "base-lib==1.0") - before - cold - later
    assert not +again, again
    assert run("verify", "--repo", tmp_path / "repo").returncode == 0


def test_a_tree_without_bytecode_is_its_own_image_and_pulls_as_such(
    tmp_path: Path, served: IndexServer, oci: Registry
) -> None:
    where = f"{oci.host}/nopyc"
    compiled = push(tmp_path / "one", served, where, "app-one==1.0")["images"][0]
    done = run("push", where, "app-one==1.0", "--repo", tmp_path / "one", "--no-index", "-f", served.url,
               "--plain-http", "--json", "--no-compile")  # fmt: skip
    assert done.returncode == 0, done.stderr
    bare = json.loads(done.stdout)["images"][0]
    # Another tree, so another image, tag and layers: nothing of the compiled one is reused or replaced.
    assert bare["env"] == compiled["env"] + NO_BYTECODE
    assert bare["tag"] == compiled["tag"] + NO_BYTECODE and (bare["layers"], bare["uploaded"]) == (2, 2)
    manifest = json.loads(skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{where}@{bare['manifest']}"))
    assert not any(".pyc" in name for name in _layer_names(where, manifest))
    again = json.loads(skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{compiled['tag']}"))
    assert [m["digest"] for m in again["manifests"]] == [compiled["manifest"]]

    # Pulled into a second repo with its index stopped: without bytecode, stored apart, verified as such.
    pulled = run("ensure", "app-one==1.0", "--no-compile", "--repo", tmp_path / "two", "--index-url", STOPPED,
                 "--from", where, "--plain-http", "--json")  # fmt: skip
    assert pulled.returncode == 0, pulled.stderr
    tree = Path(json.loads(pulled.stdout)["packages"][0]["path"])
    assert tree.parent.parent.name == bare["env"] and not list(tree.rglob("*.pyc"))
    stored = sorted(p.name for p in (tmp_path / "two" / "store" / bare["env"]).glob("*/*"))
    assert len(stored) == 2 and all("-layer-" in leaf for leaf in stored)
    # And the compiled image beside it, from the same registry: two trees.
    full = run("ensure", "app-one==1.0", "--repo", tmp_path / "two", "--index-url", STOPPED,
               "--from", where, "--plain-http", "--json")  # fmt: skip
    assert full.returncode == 0, full.stderr
    other = Path(json.loads(full.stdout)["packages"][0]["path"])
    assert other != tree and list(other.rglob("*.pyc")) and not list(tree.rglob("*.pyc"))
    assert run("verify", "--repo", tmp_path / "two").returncode == 0


def _layer_names(where: str, manifest: dict[str, object]) -> list[str]:
    """The paths every layer of ``manifest`` writes."""
    names: list[str] = []
    for layer in manifest["layers"]:  # type: ignore[attr-defined]
        blob = httpx.get(f"http://{where.split('/', 1)[0]}/v2/{where.split('/', 1)[1]}/blobs/{layer['digest']}")
        with tarfile.open(fileobj=io.BytesIO(blob.content), mode="r:gz") as archive:
            names += archive.getnames()
    return names
