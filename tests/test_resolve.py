"""Unpinned specs resolved against real index servers on 127.0.0.1: pypiserver (HTML), devpi-server (JSON),
and the fixture index (faults, yanks, request counts). Offline-first, --refresh, pip's configuration,
credentials, retries and the shared volume cache."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import document, finish, import_version, isolated_env, run, start, while_ticking
from indexserver import IndexServer
from servers import DevpiServer, PypiServer
from wheels import make_wheel

from repoinstall import InstallOptions, Repo, ResolutionError

#: Every file of demo-pkg, and which one each server cannot serve as it should.
YANKED = "demo_pkg-2.1-py3-none-any.whl"
FLEET = [f"fleet-{letter}" for letter in "abcde"]
SECRET = "s3cr3t-pa55"


@pytest.fixture(scope="module")
def demo_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo-pkg: 1.0, 1.5, 2.0 fit; 2.1 is yanked; 2.2 requires Python >= 3.99; 2.3 is a Windows-only wheel;
    3.0b1 is a pre-release. So an unpinned ``demo-pkg`` must resolve to 2.0."""
    directory = tmp_path_factory.mktemp("resolve-wheels")
    for version in ("1.0", "1.5", "2.0", "2.1", "3.0b1"):
        make_wheel(directory, "demo-pkg", version)
    make_wheel(directory, "demo-pkg", "2.2", requires_python=">=3.99")
    make_wheel(directory, "demo-pkg", "2.3", tag="py3-none-win_amd64")
    for name in FLEET:
        for version in ("1.0", "1.1"):
            make_wheel(directory, name, version)
    return directory


@pytest.fixture(scope="module")
def pypi(demo_wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PypiServer]:
    # pypiserver cannot mark a file yanked, so it does not serve the yanked one at all.
    packages = tmp_path_factory.mktemp("pypiserver-packages")
    for wheel in demo_wheels.glob("*.whl"):
        if wheel.name != YANKED:
            shutil.copy(wheel, packages)
    server = PypiServer(packages, tmp_path_factory.mktemp("pypiserver"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fixture_index(demo_wheels: Path) -> Iterator[IndexServer]:
    server = IndexServer(demo_wheels).start()
    server.yanked.add(YANKED)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def devpi(
    demo_wheels: Path, fixture_index: IndexServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """devpi-server: ``dev`` holds uploads (Requires-Python from upload metadata), ``mirror`` mirrors the
    fixture index (devpi keeps PEP 592 yanks only for mirrors)."""
    server = DevpiServer(tmp_path_factory.mktemp("devpi"))
    dev = server.index("dev", type="stage", bases=[], volatile=True)
    for wheel in sorted(demo_wheels.glob("demo_pkg-*.whl")):
        if wheel.name != YANKED:
            server.upload("dev", wheel, ">=3.99" if "-2.2-" in wheel.name else None)
    mirror = server.index("mirror", type="mirror", mirror_url=fixture_index.simple + "/")
    yield {"dev": dev, "mirror": mirror}
    server.stop()


def ensure(repo: Path, index_url: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    done = run("ensure", "--repo", repo, "--index-url", index_url, "--json", *args, env=env)
    return done.returncode, (document(done.stdout) if done.stdout.strip() else {}), done.stderr


def versions(doc: dict) -> list[str]:
    return [p["version"] for p in doc["packages"]]


# ---- choosing as pip would --------------------------------------------------------------------------------


def test_pypiserver_html_resolves_and_skips_what_cannot_install_here(repo: Path, pypi: PypiServer) -> None:
    code, doc, err = ensure(repo, pypi.simple, "demo-pkg", "demo-pkg>=1,<2", "demo-pkg~=1.0")
    assert code == 0, err
    # 2.2 is excluded by its wheel's METADATA (pypiserver's pages carry no Requires-Python), 2.3 by its tag.
    assert versions(doc) == ["2.0", "1.5", "1.5"]
    # The two ranges resolve to one tree: one thread installs it, the other waits for that install.
    assert doc["packages"][0]["action"] == "installed"
    assert sorted(p["action"] for p in doc["packages"][1:]) == ["installed", "waited"]
    assert import_version(doc["packages"][0]["path"], "demo_pkg") == "2.0"


def test_pre_releases_only_when_asked(repo: Path, pypi: PypiServer) -> None:
    code, doc, err = ensure(repo, pypi.simple, "demo-pkg>=3.0b1")
    assert code == 0, err
    assert versions(doc) == ["3.0b1"]  # the spec names a pre-release
    code, doc, err = ensure(repo, pypi.simple, "demo-pkg>=2.5", "--refresh")
    assert code == 0, err
    assert versions(doc) == ["3.0b1"]  # nothing final matches: pip takes the pre-release too
    code, doc, err = ensure(repo, pypi.simple, "demo-pkg", "--pre")
    assert code == 0, err
    assert versions(doc) == ["3.0b1"]


def test_devpi_json_honours_requires_python_and_yanks(repo: Path, devpi: dict[str, str]) -> None:
    code, doc, err = ensure(repo, devpi["dev"], "demo-pkg")
    assert code == 0, err
    assert versions(doc) == ["2.0"]  # 2.2's Requires-Python comes in devpi's JSON
    code, doc, err = ensure(repo, devpi["mirror"], "demo-pkg>2.0,<3")
    assert code == 1
    assert "yanked (only for == pins): 2.1" in err and "2.2" in err and "2.3" in err
    code, doc, err = ensure(repo, devpi["mirror"], "demo-pkg==2.1")
    assert code == 0, err  # a pin may name a yanked version
    assert versions(doc) == ["2.1"]


def test_json_and_html_pages_give_the_same_answer(repo: Path, fixture_index: IndexServer) -> None:
    answers = []
    for as_json in (True, False):
        fixture_index.json = as_json
        try:
            with Repo(repo / str(as_json), install=InstallOptions(index_url=fixture_index.simple), index_ttl=0) as r:
                answers.append(r.resolve("demo-pkg").version)  # type: ignore[union-attr]
        finally:
            fixture_index.json = True
    assert [str(v) for v in answers] == ["2.0", "2.0"]


def test_async_resolution_on_httpx_async_client(repo: Path, fixture_index: IndexServer) -> None:
    fixture_index.page_faults = ["slow"] * 2
    fixture_index.slow_seconds = 1.0

    async def scenario() -> tuple[list[str], int]:
        with Repo(repo, install=InstallOptions(index_url=fixture_index.simple), index_ttl=0) as r:
            both = asyncio.gather(r.aresolve("demo-pkg"), r.aresolve("demo-pkg<2"))
            found, ticks = await while_ticking(both, during=lambda: fixture_index.slow_in_flight > 0)
        return [str(t.version) for t in found if t is not None], ticks

    found, ticks = asyncio.run(scenario())
    assert found == ["2.0", "1.5"]
    assert ticks >= 1  # the loop kept running while a slow answer was awaited


# ---- offline-first and --refresh --------------------------------------------------------------------------


def test_offline_first_needs_no_index_and_refresh_finds_newer(tmp_path: Path, demo_wheels: Path) -> None:
    packages = tmp_path / "packages"
    packages.mkdir()
    for wheel in demo_wheels.glob("demo_pkg-1.*.whl"):
        shutil.copy(wheel, packages)
    server = PypiServer(packages, tmp_path)
    repo = tmp_path / "repo"
    try:
        code, doc, err = ensure(repo, server.simple, "demo-pkg>=1")
        assert code == 0 and versions(doc) == ["1.5"], err
        shutil.copy(demo_wheels / "demo_pkg-2.0-py3-none-any.whl", packages)
        code, doc, err = ensure(repo, server.simple, "demo-pkg>=1")
        assert code == 0 and versions(doc) == ["1.5"] and doc["packages"][0]["action"] == "present", err
        env = isolated_env(REPOINSTALL_REFRESH="1")
        code, doc, err = ensure(repo, server.simple, "demo-pkg>=1", "--index-ttl", "0", env=env)
        assert code == 0 and versions(doc) == ["2.0"] and doc["packages"][0]["action"] == "installed", err
    finally:
        server.stop()
    # The index is gone: an installed range is still ensured, with no network at all.
    env = isolated_env(PIP_RETRIES="0")
    code, doc, err = ensure(repo, server.simple, "demo-pkg>=1,<2", "demo-pkg", env=env)
    assert code == 0, err
    assert versions(doc) == ["1.5", "2.0"] and {p["action"] for p in doc["packages"]} == {"present"}
    code, doc, err = ensure(repo, server.simple, "demo-pkg", "--refresh", "--index-ttl", "0", env=env)
    assert code == 0 and versions(doc) == ["2.0"], err
    assert "cannot connect" in err and "keeping installed" in err
    code, doc, err = ensure(repo, server.simple, "demo-pkg>=3", "--index-ttl", "0", env=env)
    assert code == 1 and err.count("\n") == 1 and "cannot connect" in err, err


# ---- a misbehaving index ----------------------------------------------------------------------------------


def test_index_down_is_one_clear_error_with_credentials_redacted(repo: Path) -> None:
    from servers import free_port

    url = f"http://deploy:{SECRET}@127.0.0.1:{free_port()}/simple"
    code, doc, err = ensure(repo, url, "demo-pkg", "-v", env=isolated_env(PIP_RETRIES="1"))
    assert code == 1
    assert f"index http://****@127.0.0.1:{url.rsplit(':', 1)[1]}" in err
    assert "(demo-pkg): cannot connect (2 attempts)" in err
    assert SECRET not in err and SECRET not in json.dumps(doc)
    assert doc["errors"][0]["exit_code"] == 1
    assert not (repo / "trees").exists()


def test_slow_index_times_out(repo: Path, fixture_index: IndexServer) -> None:
    fixture_index.always = "slow"
    fixture_index.slow_seconds = 3.0
    try:
        env = isolated_env(PIP_TIMEOUT="0.5", PIP_RETRIES="1")
        code, _, err = ensure(repo, fixture_index.simple, "demo-pkg", env=env)
    finally:
        fixture_index.always = None
    assert code == 1 and "timed out waiting for an answer (2 attempts)" in err, err


def test_server_errors_are_retried_then_succeed(repo: Path, fixture_index: IndexServer) -> None:
    fixture_index.pages.clear()
    fixture_index.page_faults = ["500", "500"]
    code, doc, err = ensure(repo, fixture_index.simple, "demo-pkg")
    assert code == 0 and versions(doc) == ["2.0"], err
    assert fixture_index.pages["demo-pkg"] == 3


def test_a_429_is_retried_after_the_servers_retry_after(repo: Path, fixture_index: IndexServer) -> None:
    fixture_index.pages.clear()
    fixture_index.page_faults = ["429"]  # "Retry-After: 1"
    code, doc, err = ensure(repo, fixture_index.simple, "demo-pkg", "-v")
    assert code == 0 and versions(doc) == ["2.0"], err
    assert "HTTP 429; retrying in 1.0s" in err, err
    assert fixture_index.pages["demo-pkg"] == 2


def test_resolution_goes_through_pips_proxy_as_the_installer_does(repo: Path, fixture_index: IndexServer) -> None:
    from proxy import Proxy

    proxy = Proxy().start()
    try:
        code, doc, err = ensure(repo, fixture_index.simple, "demo-pkg<2", env=isolated_env(PIP_PROXY=proxy.url))
    finally:
        proxy.stop()
    assert code == 0 and versions(doc) == ["1.5"], err
    resolved = [url for agent, url in proxy.seen if agent.startswith("repoinstall")]
    installed = [url for agent, url in proxy.seen if agent.startswith("pip/")]
    assert resolved and resolved[0].endswith("/simple/demo-pkg/"), proxy.seen  # we asked through the proxy
    assert any(url.endswith(".whl") for url in installed), proxy.seen  # and so did pip


def test_resolution_presents_pips_client_certificate_as_the_installer_does(
    repo: Path, demo_wheels: Path, tmp_path: Path
) -> None:
    """An index on 127.0.0.1 that asks every client for a certificate signed by its authority (mutual TLS)."""
    from certs import make_certificates

    certificates = make_certificates(tmp_path / "tls")
    server = IndexServer(demo_wheels, tls=certificates.server_context(require_client=True)).start()
    try:
        trusting = isolated_env(PIP_CERT=str(certificates.ca))
        for variable in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # in pip's requests these override its cert
            trusting.pop(variable, None)
        # Not trusting the index's authority: one line, at once (a certificate does not change between tries).
        code, _, err = ensure(repo, server.simple, "demo-pkg<2", env=isolated_env())
        assert code == 1 and "the index's certificate is not trusted" in err and "retrying" not in err, err
        # Without pip's client-cert the index refuses the handshake: one line naming the index, nothing written.
        code, _, err = ensure(repo, server.simple, "demo-pkg<2", env=trusting)
        assert code == 1 and f"index {server.simple}" in err and len(err.strip().splitlines()) == 1, err
        assert "refused our client certificate" in err, err
        assert server.pages["demo-pkg"] == 0 and not list(repo.glob("trees/*/*"))
        # With it (PIP_CLIENT_CERT, as pip.conf's client-cert), repoinstall resolves and pip downloads there.
        with_cert = {**trusting, "PIP_CLIENT_CERT": str(certificates.client)}
        code, doc, err = ensure(repo, server.simple, "demo-pkg<2", env=with_cert)
    finally:
        server.stop()
    assert code == 0 and versions(doc) == ["1.5"], err
    assert server.pages["demo-pkg"] >= 1  # resolved there, through the handshake that refused us before
    assert server.downloads("demo_pkg-1.5") == 1  # and pip downloaded there with the same certificate


def test_retries_are_bounded(repo: Path, fixture_index: IndexServer) -> None:
    fixture_index.pages.clear()
    fixture_index.always = "500"
    try:
        code, _, err = ensure(repo, fixture_index.simple, "demo-pkg", env=isolated_env(PIP_RETRIES="2"))
    finally:
        fixture_index.always = None
    assert code == 1 and "HTTP 500 (3 attempts)" in err, err
    assert fixture_index.pages["demo-pkg"] == 3


@pytest.mark.parametrize("fault", ["garbage", "binary"])
def test_garbage_answer_is_one_clear_error(repo: Path, fixture_index: IndexServer, fault: str) -> None:
    fixture_index.page_faults = [fault]
    code, _, err = ensure(repo, fixture_index.simple, "demo-pkg")
    assert code == 1, err
    assert f"index {fixture_index.simple}: unreadable answer for demo-pkg" in err, err
    assert len(err.strip().splitlines()) == 1


def test_unknown_project_names_the_index(repo: Path, pypi: PypiServer) -> None:
    code, _, err = ensure(repo, pypi.simple, "no-such-project>=1")
    assert code == 1 and f"no version of no-such-project>=1 for this Python on {pypi.simple}" in err, err


# ---- configuration as pip reads it ------------------------------------------------------------------------


def test_pip_configuration_chooses_the_index(repo: Path, tmp_path: Path, pypi: PypiServer, devpi: dict) -> None:
    config = tmp_path / "pip.conf"
    # The config's index has no demo-pkg >= 1.5 via the constraint; an extra index adds the devpi stage.
    (tmp_path / "constraints.txt").write_text("demo-pkg<1.5\nother==1\n")
    config.write_text(
        f"[global]\nindex-url = {pypi.simple}\nconstraint = {tmp_path / 'constraints.txt'}\n"
        f"[install]\nextra-index-url = {devpi['dev']}\n"
    )
    code, doc, err = ensure_default(repo, "demo-pkg", env=isolated_env(PIP_CONFIG_FILE=str(config)))
    assert code == 0 and versions(doc) == ["1.0"], err
    # A PIP_* variable beats the file, as it does for pip.
    env = isolated_env(PIP_CONFIG_FILE=str(config), PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_RETRIES="0")
    code, _, err = ensure_default(repo, "demo-pkg>1", env=env)
    assert code == 1 and "index http://127.0.0.1:9/simple (demo-pkg): cannot connect" in err, err


def ensure_default(repo: Path, *args: str, env: dict[str, str]) -> tuple[int, dict, str]:
    done = run("ensure", "--repo", repo, "--json", *args, env=env)
    return done.returncode, (document(done.stdout) if done.stdout.strip() else {}), done.stderr


def test_parse_pip_listing_precedence() -> None:
    from repoinstall._pipconfig import parse_listing

    listing = (
        "global.index-url='http://global/simple'\n"
        "install.index-url='http://install/simple'\n"
        "global.extra-index-url='http://a http://b'\n"
        ":env:.index-url='http://env/simple'\n"
        "global.timeout='5'\nnonsense line\nfreeze.index-url='http://freeze'\n"
    )
    settings = parse_listing(listing)
    assert settings["index-url"] == "http://env/simple"
    assert settings["extra-index-url"] == "http://a http://b"
    assert settings["timeout"] == "5"


# ---- credentials ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def private_pypi(demo_wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PypiServer]:
    from passlib.apache import HtpasswdFile

    workdir = tmp_path_factory.mktemp("private")
    htpasswd = HtpasswdFile(str(workdir / "htpasswd"), new=True)
    htpasswd.set_password("deploy", SECRET)
    htpasswd.save()
    packages = workdir / "packages"
    packages.mkdir()
    for wheel in demo_wheels.glob("demo_pkg-1.*.whl"):
        shutil.copy(wheel, packages)
    server = PypiServer(packages, workdir, htpasswd=workdir / "htpasswd")
    yield server
    server.stop()


def test_credentials_from_url_and_netrc_never_shown(tmp_path: Path, private_pypi: PypiServer) -> None:
    with_userinfo = private_pypi.simple.replace("http://", f"http://deploy:{SECRET}@")
    code, doc, err = ensure(tmp_path / "a", with_userinfo, "demo-pkg", "-v")
    assert code == 0 and versions(doc) == ["1.5"], err
    assert SECRET not in err + json.dumps(doc)

    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login deploy password {SECRET}\n")
    netrc.chmod(0o600)
    code, doc, err = ensure(tmp_path / "b", private_pypi.simple, "demo-pkg<1.5", env=isolated_env(NETRC=str(netrc)))
    assert code == 0 and versions(doc) == ["1.0"], err

    code, _, err = ensure(tmp_path / "c", private_pypi.simple, "demo-pkg")
    assert code == 1 and "HTTP 401 for demo-pkg: credentials missing or refused" in err, err
    wrong = private_pypi.simple.replace("http://", "http://deploy:wrong-one@")
    code, _, err = ensure(tmp_path / "c", wrong, "demo-pkg")
    assert code == 1 and "http://****@127.0.0.1" in err and "wrong-one" not in err, err


def test_redaction() -> None:
    from repoinstall._redact import redact, redact_all

    assert redact("https://u:p@h:1/s") == "https://****@h:1/s"
    assert redact("https://token@h/s") == "https://****@h/s"
    assert redact("https://h/s") == "https://h/s"
    text = "asked https://u:p@h:1/s, https://token@h/s and https://h/s"
    assert redact_all(text) == "asked https://****@h:1/s, https://****@h/s and https://h/s"
    # A token as the user (alone, or with an empty password, or as pip shows it), a user holding an unencoded "@",
    # an encoded one, a URL shown twice on a line, and a hidden URL hidden again.
    for shown in ("TOKEN", "TOKEN:", "TOKEN:****", "me@corp:pw", "me%40corp:pw", "u:p@x"):
        assert redact_all(f"Collecting a @ https://{shown}@h/a.whl from https://{shown}@h/a.whl") == (
            "Collecting a @ https://****@h/a.whl from https://****@h/a.whl"
        )
    assert redact_all("https://****@h/s") == "https://****@h/s"


# ---- one request per package per cache period -------------------------------------------------------------


def test_fleet_asks_the_index_once_per_package(repo: Path, fixture_index: IndexServer) -> None:
    fixture_index.pages.clear()
    fixture_index.page_faults = ["slow"] * len(FLEET)  # every first answer is slow: the fleet piles up on it
    fixture_index.slow_seconds = 1.0
    pods = [
        start("ensure", *FLEET, "--repo", repo, "--index-url", fixture_index.simple, "--json", env=isolated_env())
        for _ in range(8)
    ]
    results = [finish(pod) for pod in pods]
    for code, out, err in results:
        assert code == 0, err
        assert versions(document(out)) == ["1.1"] * len(FLEET)
    assert {name: fixture_index.pages[name] for name in FLEET} == dict.fromkeys(FLEET, 1)
    entries = [json.loads(e.read_text()) for e in (repo / "cache" / "index").glob("*.json")]
    assert sorted(e["project"] for e in entries if "found" in e) == FLEET
    # Files whose index page gives no Requires-Python: the wheel's METADATA, read once and kept.
    assert [e["requires_python"] for e in entries if "found" not in e] == [None] * len(FLEET)
    assert not [p for p in (repo / "cache" / "index").iterdir() if p.name.startswith(".")]

    # Within the cache period nobody asks again; --index-ttl 0 asks at once.
    code, _, err = ensure(repo, fixture_index.simple, *[f"{n}>1.1" for n in FLEET[:1]])
    assert code == 1 and fixture_index.pages[FLEET[0]] == 1, err
    code, _, err = ensure(repo, fixture_index.simple, f"{FLEET[0]}>1.1", "--index-ttl", "0")
    assert code == 1 and fixture_index.pages[FLEET[0]] == 2, err


def test_wheel_metadata_by_range_requests(pypi: PypiServer) -> None:
    import httpx

    from repoinstall._index import http as _http
    from repoinstall._index.simple import Link
    from repoinstall._index.wheelmeta import requires_python

    link = Link("demo_pkg-2.2-py3-none-any.whl", f"{pypi.url}/packages/demo_pkg-2.2-py3-none-any.whl")
    with httpx.Client() as client:
        assert _http.run(requires_python(link, 0), lambda: client) == ">=3.99"
        assert _http.run(requires_python(link._replace(url=link.url.replace("2.2", "2.0")), 0), lambda: client) is None


@pytest.mark.skipif(sys.platform != "linux", reason="uses Linux paths")
def test_find_links_directory_and_file_index(repo: Path, demo_wheels: Path, tmp_path: Path) -> None:
    simple = tmp_path / "simple" / "demo-pkg"
    simple.mkdir(parents=True)
    (simple / "index.html").write_text(f'<a href="{(demo_wheels / "demo_pkg-1.0-py3-none-any.whl").as_uri()}">x</a>')
    code, doc, err = ensure(repo, (tmp_path / "simple").as_uri(), "demo-pkg")
    assert code == 0 and versions(doc) == ["1.0"], err
    done = run("ensure", "--repo", repo, "--no-index", "--find-links", demo_wheels, "--json", "demo-pkg>1.0,<2")
    assert done.returncode == 0 and versions(document(done.stdout)) == ["1.5"], done.stderr


def test_no_index_and_nothing_installed(repo: Path) -> None:
    with Repo(repo, install=InstallOptions(no_index=True)) as r, pytest.raises(ResolutionError) as caught:
        r.ensure("demo-pkg>=1")
    assert "no index to ask" in str(caught.value)
    assert not repo.exists()


def test_gc_removes_expired_index_answers_and_keeps_file_facts(repo: Path, fixture_index: IndexServer) -> None:
    code, _, err = ensure(repo, fixture_index.simple, "fleet-a", "--index-ttl", "0")
    assert code == 0, err
    cache = repo / "cache" / "index"
    kinds = sorted("found" in json.loads(p.read_text()) for p in cache.glob("*.json"))
    assert kinds == [False, True]  # one fact (Requires-Python of the chosen wheel), one answer
    done = run("gc", "--repo", repo, "--older-than", "0", "--json")
    assert done.returncode == 0, done.stderr
    removed = {(r["kind"], Path(r["path"]).suffix) for r in document(done.stdout)["removed"]}
    assert ("cache", ".json") in removed and ("lock", ".rw") in removed
    left = [json.loads(p.read_text()) for p in cache.glob("*.json")]
    assert ["found" in e for e in left] == [False]
    assert not list(cache.glob("*.lock.rw"))
    code, doc, err = ensure(repo, fixture_index.simple, "fleet-a")
    assert code == 0 and doc["packages"][0]["action"] == "present", err


PARITY = [
    ("demo-pkg",),
    ("demo-pkg>=1,<2",),
    ("demo-pkg~=1.0",),
    ("demo-pkg!=2.0",),
    ("demo-pkg>=3.0b1",),
    ("demo-pkg>=2.5",),
    ("demo-pkg", "--pre"),
]


def pip_choice(index_url: str, spec: str, *options: str, workdir: Path) -> str:
    """The version pip itself picks (``pip install --dry-run --report``), for the same index and options."""
    import subprocess

    report = workdir / "report.json"
    dry_run = ["install", "--dry-run", "--ignore-installed", "--no-deps", "-q", "--report", str(report)]
    subprocess.run(
        [sys.executable, "-m", "pip", *dry_run, "--index-url", index_url, *options, spec],
        env=isolated_env(),
        check=True,
        capture_output=True,
        timeout=120,
    )
    return str(json.loads(report.read_text())["install"][0]["metadata"]["version"])


@pytest.mark.parametrize("case", PARITY, ids=[" ".join(c) for c in PARITY])
def test_same_choice_as_pip(tmp_path: Path, pypi: PypiServer, devpi: dict[str, str], case: tuple[str, ...]) -> None:
    spec, *options = case
    for label, url in (("pypiserver", pypi.simple), ("devpi", devpi["dev"])):
        with Repo(tmp_path / label, install=InstallOptions(index_url=url), pre="--pre" in options) as r:
            ours = r.resolve(spec)
        assert ours is not None
        assert ours.version_text == pip_choice(url, spec, *options, workdir=tmp_path), (label, spec)


def test_an_oversized_answer_is_not_retried(fixture_index: IndexServer) -> None:
    import httpx

    from repoinstall._index import http as _http

    fixture_index.pages.clear()
    with httpx.Client() as client:
        plan = _http.get(fixture_index.simple + "/demo-pkg/", 5, what="index", limit=10)
        reply = _http.run(plan, lambda: client)
    assert reply.error == "answer larger than 10 bytes" and not reply.transient
    assert fixture_index.pages["demo-pkg"] == 1
