"""A hostile registry gets one line and stores nothing; a real registry with htpasswd auth and TLS is reached
with the credentials and certificates users have (auth file, netrc, CA bundle, client certificate)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from certs import make_certificates
from helpers import isolated_env, run
from hostileregistry import HostileRegistry, canonical, digest, regular, tar_of
from registry import free_port, registry
from wheels import make_wheel

from repoinstall._disk.identity import environment_tag
from repoinstall._oci.reference import tag_for

STOPPED = "http://127.0.0.1:9/simple"
ENV = environment_tag()
TAG = "evil-pkg-1-" + "-".join(ENV.split("-")[:2])
NOTES = {"org.repoinstall.dist.name": "evil-pkg", "org.repoinstall.dist.version": "1.0",
         "org.repoinstall.dist.sha256": "a" * 64}  # fmt: skip
METADATA = b"Metadata-Version: 2.1\nName: evil-pkg\nVersion: 1.0\n\n"


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileRegistry]:
    server = HostileRegistry().start()
    yield server
    server.stop()


def dist(tar: tarfile.TarFile) -> None:
    """A distribution's files that check out against its RECORD (nothing hostile yet)."""
    regular(tar, "evil_pkg-1.0.dist-info/METADATA", METADATA)
    regular(
        tar, "evil_pkg-1.0.dist-info/RECORD", b"evil_pkg-1.0.dist-info/METADATA,,\nevil_pkg-1.0.dist-info/RECORD,,\n"
    )


def entry(name: str, kind: bytes, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def with_entry(info: tarfile.TarInfo) -> bytes:
    def add(tar: tarfile.TarFile) -> None:
        dist(tar)
        tar.addfile(info)

    return tar_of(add)


def pull(repo: Path, where: str, *more: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    # --no-index: the refusal is the answer (with an index allowed, ensure --from warns and installs from it).
    done = run("ensure", "evil-pkg==1.0", "--repo", repo, "--from", where, "--no-index", *more, env=env)
    return done.returncode, done.stderr


def nothing_stored(repo: Path) -> bool:
    return not any((repo / "store").rglob("*.dist-info")) and not any((repo / "trees").glob("*/*/*"))


def bomb() -> bytes:
    def add(tar: tarfile.TarFile) -> None:
        dist(tar)
        regular(tar, "evil_pkg/zeros.bin", bytes(160 << 20))

    return tar_of(add)


def sparse(*options: str) -> Callable[[], bytes]:
    """A layer GNU tar writes with a sparse file of 512 MiB that takes a few hundred bytes (``options``: its
    format and sparse version)."""

    def make() -> bytes:
        with tempfile.TemporaryDirectory() as where:
            root = Path(where)
            with tarfile.open(fileobj=(buffer := io.BytesIO()), mode="w") as tar:
                dist(tar)
            (root / "dist.tar").write_bytes(buffer.getvalue())
            subprocess.run(["tar", "-xf", "dist.tar"], cwd=root, check=True)
            (root / "evil_pkg").mkdir()
            with open(root / "evil_pkg" / "holes.bin", "wb") as handle:
                handle.truncate(512 << 20)
                handle.seek(512 << 20)
                handle.write(b"!")
            names = ["evil_pkg-1.0.dist-info", "evil_pkg"]
            return subprocess.run(["tar", "--sparse", *options, "-cf", "-", *names], cwd=root, check=True,
                                  capture_output=True).stdout  # fmt: skip

    return make


CASES = {
    "dotdot": (lambda: with_entry(entry("../escape.py", tarfile.REGTYPE)), "leaves the tree"),
    "absolute": (lambda: with_entry(entry("/tmp/evil.py", tarfile.REGTYPE)), "leaves the tree"),
    "symlink out": (lambda: with_entry(entry("evil_pkg/etc", tarfile.SYMTYPE, "../../../etc")), "leaves the tree"),
    "hard link": (lambda: with_entry(entry("evil_pkg/passwd", tarfile.LNKTYPE, "/etc/passwd")), "hard link"),
    "device": (lambda: with_entry(entry("evil_pkg/sda", tarfile.BLKTYPE)), "is a device"),
    "gzip bomb": (bomb, "gzip bomb"),
    "sparse gnu": (sparse("--format=gnu"), "sparse file"),
    "sparse pax 1.0": (sparse("--format=posix", "--sparse-version=1.0"), "sparse file"),
    "sparse pax 0.1": (sparse("--format=posix", "--sparse-version=0.1"), "sparse file"),
    "sparse pax 0.0": (sparse("--format=posix", "--sparse-version=0.0"), "sparse file"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_unsafe_layer_is_refused_with_one_line(tmp_path: Path, hostile: HostileRegistry, case: str) -> None:
    make, said = CASES[case]
    hostile.repository = f"evil-{case.replace(' ', '-')}"
    hostile.image(TAG, ENV, [(make(), NOTES)])
    code, err = pull(tmp_path / "repo", f"{hostile.host}/{hostile.repository}", "--plain-http")
    assert code == 1 and said in err and "refused" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert nothing_stored(tmp_path / "repo")


def test_a_lying_registry_is_refused(tmp_path: Path, hostile: HostileRegistry) -> None:
    where = f"{hostile.host}/{hostile.repository}"
    # A blob that is not its digest.
    hostile.repository = "evil-blob"
    manifest = hostile.image(TAG, ENV, [(tar_of(dist), NOTES)])
    hostile.blobs[manifest["layers"][0]["digest"]] = b"\x1f\x8b" + b"x" * 40
    code, err = pull(tmp_path / "a", f"{hostile.host}/evil-blob", "--plain-http")
    assert code == 1 and "does not match its digest" in err and nothing_stored(tmp_path / "a"), err
    # A manifest naming a media type nobody knows.
    hostile.repository = "evil-type"
    hostile.image(TAG, ENV, [(tar_of(dist), NOTES)], layer_type="application/vnd.example.unknown")
    code, err = pull(tmp_path / "b", f"{hostile.host}/evil-type", "--plain-http")
    assert code == 1 and "unknown media type" in err and nothing_stored(tmp_path / "b"), err
    # A tag moved between resolving it and reading it: what is sent by digest is another image.
    hostile.repository = "evil-moved"
    hostile.image(TAG, ENV, [(tar_of(dist), NOTES)])
    resolved = hostile.head_digest[TAG]
    other = next(data for key, data in hostile.manifests.items() if key != resolved)
    hostile.manifests[resolved] = other
    code, err = pull(tmp_path / "c", f"{hostile.host}/evil-moved", "--plain-http")
    assert code == 1 and "does not match its digest" in err and nothing_stored(tmp_path / "c"), err
    # Down, and too slow.
    code, err = pull(tmp_path / "d", f"127.0.0.1:{free_port()}/x", "--plain-http")
    assert code == 1 and "cannot connect" in err and len(err.strip().splitlines()) == 1, err
    hostile.delay = 3.0
    try:
        code, err = pull(tmp_path / "e", where, "--plain-http", "--registry-timeout", "0.5")
    finally:
        hostile.delay = 0.0
    assert code == 1 and "timed out" in err and nothing_stored(tmp_path / "e"), err


def test_a_hashed_lock_takes_only_the_wheel_its_hash_names(tmp_path: Path, hostile: HostileRegistry) -> None:
    """A hashed lock with --from fetches its wheels by their hashes, never the image's layers: a blob that is not
    its digest is refused in one line; a wheel the registry lacks, with the index stopped, is one line naming it."""
    import hashlib

    from repoinstall import Repo
    from repoinstall._lockfile.request import read
    from repoinstall._oci.reference import Reference, wheels_tag
    from repoinstall._oci.wheels import ARTIFACT_TYPE, TITLE, WHEEL

    wheel = make_wheel(tmp_path, "evil-pkg", "1.0")
    data = wheel.read_bytes()
    blob = f"sha256:{hashlib.sha256(data).hexdigest()}"
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"evil-pkg==1.0 --hash={blob}\n")
    with Repo(tmp_path / "probe", pull_from=Reference.parse("127.0.0.1:9/probe")) as repo:
        requested = read(str(lock))
        assert not isinstance(requested, list)
        tid = repo.resolve(requested)
    assert tid is not None
    hostile.repository = "evil-lock"
    image = hostile.image(tag_for(tid), ENV, [(tar_of(dist), NOTES)])  # layers a lock never fetches

    def list_wheel(title: str) -> None:
        listing = canonical({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "artifactType": ARTIFACT_TYPE,
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": digest(b"{}"), "size": 2},
            "layers": [{"mediaType": WHEEL, "digest": blob, "size": len(data), "annotations": {TITLE: title}}],
            "annotations": {"org.repoinstall.env": ENV, "org.repoinstall.tree": tid.pin}})  # fmt: skip
        hostile.manifests[digest(listing)] = (listing, "application/vnd.oci.image.manifest.v1+json")
        hostile.head_digest[wheels_tag(tid)] = digest(listing)

    list_wheel(wheel.name)
    where = f"{hostile.host}/evil-lock"

    def ensure(repo: str, *index: str) -> tuple[int, str]:
        done = run("ensure", "-r", lock, "--repo", tmp_path / repo, "--from", where, "--plain-http",
                   *(index or ("--index-url", STOPPED)))  # fmt: skip
        return done.returncode, done.stderr

    # Other bytes of the wheel's size at the wheel's digest: refused as they arrive, nothing stored (--no-index:
    # the refusal is the answer; with an index, a warning and the index).
    hostile.blobs[blob] = data[:-1] + bytes([data[-1] ^ 1])
    hostile.asked.clear()
    code, err = ensure("a", "--no-index")
    assert code == 1 and "does not match its digest" in err and len(err.strip().splitlines()) == 1, err
    assert nothing_stored(tmp_path / "a")
    assert not {layer["digest"] for layer in image["layers"]} & {path.rsplit("/", 1)[1] for path in hostile.asked}
    # The registry lacks the wheel (404), the index is stopped: one line naming the pin, nothing stored.
    del hostile.blobs[blob]
    code, err = ensure("b")
    assert code == 1 and "evil-pkg==1.0" in err and "has no wheel of it" in err, err
    assert len([line for line in err.splitlines() if "error:" in line]) == 1 and nothing_stored(tmp_path / "b"), err
    # The genuine wheel under a title that is a path, or another project's: not taken (no file is named by it).
    hostile.blobs[blob] = data
    for title in ("../" + wheel.name, "other_pkg-1.0-py3-none-any.whl", "evil_pkg-1.0-py3-none-any\x1b[2J.whl"):
        list_wheel(title)
        code, err = ensure("c")
        assert code == 1 and "has no wheel of it" in err and "\x1b" not in err, err
        assert nothing_stored(tmp_path / "c")
    list_wheel(wheel.name)  # and under its own: installed, wheel-verified
    code, err = ensure("d")
    assert code == 0, err
    assert [leaf.name for leaf in (tmp_path / "d" / "store").glob("*/evil-pkg/*")] == [f"1-{blob[7:23]}"]


def test_credentials_and_tls_as_users_have_them(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "private-pkg", "1.0")
    certs = make_certificates(tmp_path / "certs")
    auth = tmp_path / "auth.json"
    secret = "s3cret-never-shown"
    with registry(tmp_path / "reg", users={"alice": secret}, certificate=certs.server, client_ca=certs.ca) as found:

        def write_auth(password: str) -> None:
            encoded = base64.b64encode(f"alice:{password}".encode()).decode()
            auth.write_text(json.dumps({"auths": {found.host: {"auth": encoded}}}))

        tls = ["--registry-ca", str(certs.ca), "--registry-client-cert", str(certs.client)]
        where = f"{found.host}/private"
        write_auth(secret)
        env = isolated_env(REGISTRY_AUTH_FILE=str(auth))
        pushed = run("push", where, "private-pkg==1.0", "--repo", tmp_path / "one", "--no-index", "-f", wheels, *tls,
                     env=env)  # fmt: skip
        assert pushed.returncode == 0, pushed.stderr
        assert secret not in pushed.stdout + pushed.stderr
        # Refused credentials: one line, the secret never shown, nothing stored.
        write_auth("wrong-" + secret)
        done = run("ensure", "private-pkg==1.0", "--repo", tmp_path / "two", "--from", where, "--index-url", STOPPED,
                   *tls, env=env)  # fmt: skip
        assert done.returncode == 1 and "refused the credentials" in done.stderr, done.stderr
        assert secret not in done.stdout + done.stderr and nothing_stored(tmp_path / "two")
        # No client certificate: the TLS handshake fails, one line.
        done = run("ensure", "private-pkg==1.0", "--repo", tmp_path / "two", "--from", where, "--index-url", STOPPED,
                   "--registry-ca", str(certs.ca), env=env)  # fmt: skip
        assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        # A netrc entry works where no auth file names the host.
        netrc = tmp_path / "netrc"
        netrc.write_text(f"machine {found.host.split(':')[0]} login alice password {secret}\n")
        netrc.chmod(0o600)
        env = isolated_env(NETRC=str(netrc), DOCKER_CONFIG=str(tmp_path / "none"))
        done = run("ensure", "private-pkg==1.0", "--repo", tmp_path / "two", "--from", where, "--index-url", STOPPED,
                   *tls, "--json", env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr
        listed = json.loads(run("list", "--repo", tmp_path / "two", "--json").stdout)
        assert listed["trees"][0]["installer"] == "oci-image"
    shutil.rmtree(tmp_path / "reg", ignore_errors=True)


def whole(
    payload: dict[str, bytes], name: str = "evil_pkg", requires: tuple[str, ...] = ()
) -> tuple[bytes, dict[str, str]]:
    """A layer of the distribution ``name`` 1.0 whose files check out against its RECORD: it is stored unless a
    bound stops it. ``requires``: what its METADATA requires (an image holds exactly its tree's distributions)."""
    info = f"{name}-1.0.dist-info"
    needs = "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{needs}\n".encode(), **payload}
    rows = []
    for path, data in files.items():
        encoded = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={encoded},{len(data)}\n")
    rows.append(f"{info}/RECORD,,\n")

    def add(tar: tarfile.TarFile) -> None:
        for path, data in files.items():
            regular(tar, path, data)
        regular(tar, f"{info}/RECORD", "".join(rows).encode())

    notes = {"org.repoinstall.dist.name": name, "org.repoinstall.dist.version": "1.0",
             "org.repoinstall.dist.sha256": "a" * 64}  # fmt: skip
    return tar_of(add), notes


def stored(repo: Path) -> int:
    return len(list((repo / "store").rglob("*.dist-info")))


def no_tree(repo: Path) -> bool:
    return not any((repo / "trees").glob("*/*/*"))


def test_an_image_past_its_bounds_is_refused(tmp_path: Path, hostile: HostileRegistry) -> None:
    """Bytes and files per layer and per image, counted as they are written (a layer that compresses well
    claims little), and layers per image, counted before any blob is asked for."""
    one_mib = {"evil_pkg/zeros.bin": bytes(1 << 20)}
    many = {f"evil_pkg/f{n}.py": b"" for n in range(30)}
    names = ["evil_pkg", *(f"evil{n}" for n in range(1, 8))]
    others = tuple(f"evil{n}==1.0" for n in range(1, 8))

    def needs(name: str) -> tuple[str, ...]:
        return others if name == "evil_pkg" else ()  # the tree's root requires the other seven

    cases = [
        ("layer-bytes", [whole(one_mib)], ["--registry-max-layer-bytes", "1000000"], "--registry-max-layer-bytes"),
        ("layer-files", [whole(many)], ["--registry-max-layer-files", "20"], "--registry-max-layer-files"),
        # One file 40 directories deep: each directory it makes is a file too.
        ("layer-depth", [whole({"evil_pkg/" + "d/" * 40 + "x.py": b""})], ["--registry-max-layer-files", "20"],
         "--registry-max-layer-files"),
        # Eight layers of 1 MiB each (a few KB downloaded): the fourth passes 3 MiB in all.
        ("bytes", [whole({f"{n}/zeros.bin": bytes(1 << 20)}, n, needs(n)) for n in names],
         ["--registry-max-bytes", str(3 << 20)], "--registry-max-bytes"),
        ("files", [whole({f"{n}/f{k}.py": b"" for k in range(30)}, n, needs(n)) for n in names],
         ["--registry-max-files", "100"], "--registry-max-files"),
    ]  # fmt: skip
    for name, layers, options, said in cases:
        hostile.repository = f"evil-bounds-{name}"
        hostile.image(TAG, ENV, layers)
        repo = tmp_path / name
        code, err = pull(repo, f"{hostile.host}/{hostile.repository}", "--plain-http", *options)
        assert code == 1 and said in err and "refused" in err, err
        assert len(err.strip().splitlines()) == 1, err
        assert no_tree(repo) and stored(repo) == 0, err  # every layer staged and checked before any is stored
    # Within the bounds, the same image is stored whole.
    code, err = pull(tmp_path / "within", f"{hostile.host}/{hostile.repository}", "--plain-http")
    assert code == 0 and stored(tmp_path / "within") == 8, err


def test_an_image_of_too_many_layers_is_refused_before_any_blob(tmp_path: Path, hostile: HostileRegistry) -> None:
    hostile.repository = "evil-layers"
    layer = tar_of(dist)
    hostile.image(TAG, ENV, [(layer, {**NOTES, "org.repoinstall.dist.sha256": f"{n:064x}"}) for n in range(3001)])
    del hostile.requests[:]
    code, err = pull(tmp_path / "repo", f"{hostile.host}/{hostile.repository}", "--plain-http")
    assert code == 1 and "3001 layers" in err and "--registry-max-layers" in err, err
    assert len(err.strip().splitlines()) == 1 and nothing_stored(tmp_path / "repo"), err
    assert not [asked for asked in hostile.requests if "/blobs/" in asked], hostile.requests
    # The bound from its environment variable, as a pod spec sets it.
    env = isolated_env(REPOINSTALL_REGISTRY_MAX_LAYERS="100")
    code, err = pull(tmp_path / "repo", f"{hostile.host}/{hostile.repository}", "--plain-http", env=env)
    assert code == 1 and "more than 100 (--registry-max-layers)" in err, err


def test_a_layers_claimed_size_is_checked_before_it_is_fetched(tmp_path: Path, hostile: HostileRegistry) -> None:
    """Past the layer bound, or past the scratch filesystem's free space: refused with no GET of the blob; and
    a blob sending more than its manifest claims is cut off."""
    layer, notes = whole({"evil_pkg/zeros.bin": bytes(1 << 20)})
    where = f"{hostile.host}/evil-claims"
    hostile.repository = "evil-claims"
    hostile.image(TAG, ENV, [(layer, notes)])
    blob = digest(gzip.compress(layer, mtime=0))
    del hostile.requests[:]
    code, err = pull(tmp_path / "a", where, "--plain-http", "--registry-max-layer-bytes", "500")
    assert code == 1 and f"claims {len(hostile.blobs[blob])} bytes, more than 500 (--registry-max-layer-bytes)" in err
    assert len(err.strip().splitlines()) == 1 and nothing_stored(tmp_path / "a"), err
    assert not [asked for asked in hostile.requests if asked.startswith("GET") and blob in asked], hostile.requests
    # A petabyte claimed, within bounds set that high: more than any test machine's disk has free.
    hostile.image(TAG, ENV, [(layer, notes)], claimed=1 << 50)
    huge = ["--registry-max-layer-bytes", str(1 << 60), "--registry-max-bytes", str(1 << 60)]
    code, err = pull(tmp_path / "b", where, "--plain-http", *huge)
    assert code == 1 and "bytes free: not fetched" in err, err
    assert len(err.strip().splitlines()) == 1 and nothing_stored(tmp_path / "b"), err
    assert not [asked for asked in hostile.requests if asked.startswith("GET") and blob in asked], hostile.requests
    # Less claimed than sent: the fetch stops there.
    hostile.image(TAG, ENV, [(layer, notes)], claimed=len(hostile.blobs[blob]) - 10)
    code, err = pull(tmp_path / "c", where, "--plain-http")
    assert code == 1 and "larger than the" in err and nothing_stored(tmp_path / "c"), err


def test_a_trickling_registry_is_given_up_and_a_slow_one_is_not(tmp_path: Path, hostile: HostileRegistry) -> None:
    """A layer sent at 20 bytes a second (each read well within --registry-timeout) fails once a window of it
    averages under --registry-min-rate; one sent slowly but above the rate is stored."""
    hostile.repository = "evil-trickle"
    layer = tar_of(dist)
    hostile.image(TAG, ENV, [(layer, NOTES)])
    blob = digest(gzip.compress(layer, mtime=0))
    hostile.trickle[blob] = 0.05
    try:
        code, err = pull(tmp_path / "a", f"{hostile.host}/evil-trickle", "--plain-http", "--registry-rate-window",
                         "0.3")  # fmt: skip
        assert code == 1 and "bytes/s" in err and "--registry-min-rate" in err, err
        assert len(err.strip().splitlines()) == 1 and nothing_stored(tmp_path / "a"), err
        hostile.trickle[blob] = 0.002
        code, err = pull(tmp_path / "b", f"{hostile.host}/evil-trickle", "--plain-http", "--registry-rate-window",
                         "0.5", "--registry-min-rate", "10")  # fmt: skip
        assert code == 0 and "1 of 1 layers stored" in err, err
    finally:
        hostile.trickle.clear()


@pytest.mark.parametrize("fault", ["500 once", "dropped once"])
def test_a_blob_get_that_fails_once_is_retried(tmp_path: Path, hostile: HostileRegistry, fault: str) -> None:
    hostile.repository = f"flaky-{fault.replace(' ', '-')}"
    layer = tar_of(dist)
    hostile.image(TAG, ENV, [(layer, NOTES)])
    blob = digest(gzip.compress(layer, mtime=0))
    (hostile.fail_once if fault == "500 once" else hostile.drop_once).add(blob)
    del hostile.requests[:]
    code, err = pull(tmp_path / "repo", f"{hostile.host}/{hostile.repository}", "--plain-http")
    assert code == 0 and "1 of 1 layers stored" in err, err
    assert len([asked for asked in hostile.requests if asked.startswith("GET") and blob in asked]) == 2


FORGED = "\nrepoinstall: error: forged second line\x1b[2K"


def forged_name() -> tuple[bytes, dict[str, str]]:
    def add(tar: tarfile.TarFile) -> None:
        dist(tar)
        regular(tar, f"evil_pkg/x{FORGED}.py", b"")  # not in its RECORD

    return tar_of(add), NOTES


VERSION, SHA256 = "org.repoinstall.dist.version", "org.repoinstall.dist.sha256"
LINES: dict[str, Callable[[HostileRegistry], object]] = {
    "config os": lambda h: h.image(TAG, ENV, [(tar_of(dist), NOTES)], config={"os": "linux" + FORGED}),
    "annotation": lambda h: h.image(TAG, ENV, [(tar_of(dist), {**NOTES, VERSION: "1" + FORGED})]),
    "annotation end": lambda h: h.image(TAG, ENV, [(tar_of(dist), {**NOTES, SHA256: "a" * 64 + "\n"})]),
    "file name": lambda h: h.image(TAG, ENV, [forged_name()]),
    "digest header": lambda h: h.image(TAG, ENV, [(tar_of(dist), NOTES)]),
}


@pytest.mark.parametrize("case", list(LINES))
def test_a_registry_cannot_forge_a_line(tmp_path: Path, hostile: HostileRegistry, case: str) -> None:
    """What a registry sends reaches stderr escaped: the failure is one line whatever it holds."""
    hostile.repository = f"evil-lines-{case.replace(' ', '-')}"
    LINES[case](hostile)
    if case == "digest header":  # a tag resolving to a "digest" that moves the terminal's cursor
        forged = hostile.head_digest[TAG] + "\x9b2J"
        hostile.manifests[forged] = hostile.manifests[hostile.head_digest[TAG]]
        hostile.head_digest[TAG] = forged
    code, err = pull(tmp_path / "repo", f"{hostile.host}/{hostile.repository}", "--plain-http")
    assert code == 1 and "refused" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.strip().isprintable() and nothing_stored(tmp_path / "repo"), err


@pytest.mark.parametrize("recorded", [False, True], ids=["unrecorded", "recorded-without-hash"])
def test_an_image_without_bytecode_that_holds_compiled_pycs_is_refused(
    tmp_path: Path, hostile: HostileRegistry, recorded: bool
) -> None:
    from packaging.version import Version

    from repoinstall._disk.identity import NO_BYTECODE, TreeId

    pyc = "evil_pkg/__pycache__/__init__.cpython-311.pyc"

    def add(tar: tarfile.TarFile) -> None:
        regular(tar, "evil_pkg-1.0.dist-info/METADATA", METADATA)
        rows = b"evil_pkg-1.0.dist-info/METADATA,,\nevil_pkg-1.0.dist-info/RECORD,,\n"
        regular(tar, "evil_pkg-1.0.dist-info/RECORD", rows + (f"{pyc},,\n".encode() if recorded else b""))
        regular(tar, pyc, b"compiled")

    env = ENV + NO_BYTECODE
    hostile.repository = f"evil-nopyc-{'recorded' if recorded else 'unrecorded'}"
    hostile.image(tag_for(TreeId(env, "evil-pkg", Version("1.0"))), env, [(tar_of(add), NOTES)])
    code, err = pull(tmp_path / "repo", f"{hostile.host}/{hostile.repository}", "--plain-http", "--no-compile")
    assert code == 1 and "compiled bytecode in a tree made without it" in err, err
    assert len([line for line in err.splitlines() if line.startswith("repoinstall: error:")]) == 1, err
    assert nothing_stored(tmp_path / "repo")
