"""Registries as users have them, each a real registry (Debian's docker-registry) on 127.0.0.1: token auth (a
``401`` with ``WWW-Authenticate: Bearer`` sends the client to a token service with its credentials), Docker's
credential helpers (``credHelpers``, ``credsStore``: ``docker-credential-NAME get``), and blobs redirected to
storage on another host, which must never get the registry's credentials. Credentials are never printed."""

from __future__ import annotations

import base64
import json
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from blobredirect import BlobRedirect
from helpers import isolated_env, run
from registry import Registry, registry
from tokenauth import SERVICE, TokenService
from wheels import make_wheel

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("docker-registry", "openssl")),
    reason="needs docker-registry and openssl (bash .ci/run installs them)",
)
STOPPED = "http://127.0.0.1:9/simple"
SECRET = "s3cret-never-shown"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("registry-wheels")
    make_wheel(directory, "private-pkg", "1.0", modules=2)
    return directory


@pytest.fixture(scope="module")
def basic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    """A registry with htpasswd (Basic) auth: alice's password is SECRET."""
    with registry(tmp_path_factory.mktemp("basic-registry"), users={"alice": SECRET}) as found:
        yield found


def auth_file(path: Path, host: str, password: str) -> Path:
    encoded = base64.b64encode(f"alice:{password}".encode()).decode()
    path.write_text(json.dumps({"auths": {host: {"auth": encoded}}}))
    return path


def leaked(*outputs: str) -> bool:
    """Whether a secret shows in any output, as itself or as the Basic header's base64."""
    encoded = base64.b64encode(f"alice:{SECRET}".encode()).decode()
    return any(SECRET in text or encoded in text for text in outputs)


def push(repo: Path, wheels: Path, where: str, env: dict[str, str]) -> None:
    done = run("push", where, "private-pkg==1.0", "--repo", repo, "--no-index", "-f", wheels, "--plain-http", "-v",
               env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not leaked(done.stdout, done.stderr)


def pull(repo: Path, where: str, env: dict[str, str]) -> tuple[int, str]:
    """ensure --from with the index stopped: only the registry can give the tree. (exit code, all output)"""
    done = run("ensure", "private-pkg==1.0", "--repo", repo, "--from", where, "--index-url", STOPPED, "--plain-http",
               "-v", env=env)  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def pulled_from_registry(repo: Path) -> bool:
    listed = json.loads(run("list", "--repo", repo, "--json").stdout)
    return [tree["installer"] for tree in listed["trees"]] == ["oci-image"]


def test_token_auth_gets_a_bearer_token_from_the_realm_with_the_credentials(tmp_path: Path, wheels: Path) -> None:
    tokens = TokenService(tmp_path / "tokens", {"alice": SECRET}).start()
    try:
        with registry(tmp_path / "reg", auth=tokens.registry_config()) as found:
            where = f"{found.host}/tokens"
            env = isolated_env(REGISTRY_AUTH_FILE=str(auth_file(tmp_path / "auth.json", found.host, SECRET)))
            push(tmp_path / "one", wheels, where, env)
            # The registry sent the client to the realm; it asked with its credentials, for its repository's scope.
            asked = [a for a in tokens.asked if a.user == "alice"]
            assert asked and all(a.service == SERVICE for a in asked)
            assert any("repository:tokens:pull,push" in a.scopes for a in asked)
            code, said = pull(tmp_path / "two", where, env)
            assert code == 0, said
            assert not leaked(said) and pulled_from_registry(tmp_path / "two")
            assert any(a.scopes == ["repository:tokens:pull"] for a in tokens.asked if a.user == "alice")
            # Refused by the token service: one line, nothing stored, the secret never shown.
            wrong = isolated_env(REGISTRY_AUTH_FILE=str(auth_file(tmp_path / "wrong.json", found.host, "no")))
            code, said = pull(tmp_path / "three", where, wrong)
            assert code == 1 and "token service refused the credentials" in said, said
            assert not (tmp_path / "three" / "trees").exists() or not any((tmp_path / "three" / "trees").rglob("*"))
            # No credentials at all: the token service refuses an anonymous token, said as such.
            anonymous = isolated_env(DOCKER_CONFIG=str(tmp_path / "none"), REGISTRY_AUTH_FILE=str(tmp_path / "x"))
            code, said = pull(tmp_path / "four", where, anonymous)
            assert code == 1 and "asks for credentials (none found)" in said, said
    finally:
        tokens.stop()


def helper(directory: Path, name: str, body: str) -> Path:
    """``docker-credential-NAME`` on a PATH of its own: a shell script that logs what it was asked."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / f"docker-credential-{name}"
    script.write_text(f'#!/bin/sh\nread -r host\necho "$1 $host" >> "{directory}/asked"\n{body}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


def test_docker_credential_helpers_give_the_credentials(tmp_path: Path, wheels: Path, basic: Registry) -> None:
    where = f"{basic.host}/helpers"
    answer = json.dumps({"ServerURL": basic.host, "Username": "alice", "Secret": SECRET})
    bin_dir = helper(tmp_path / "bin", "ritest", f"echo '{answer}'")
    path = f"{bin_dir}:{isolated_env()['PATH']}"
    docker = tmp_path / "docker"
    docker.mkdir()
    # credHelpers: this registry's own helper (checked before auths and credsStore).
    (docker / "config.json").write_text(json.dumps({"credHelpers": {basic.host: "ritest"}, "credsStore": "absent"}))
    env = isolated_env(DOCKER_CONFIG=str(docker), PATH=path)
    push(tmp_path / "one", wheels, where, env)
    assert (bin_dir / "asked").read_text().splitlines()[0] == f"get {basic.host}"  # the host on stdin
    # credsStore: the one helper for every registry.
    (docker / "config.json").write_text(json.dumps({"credsStore": "ritest"}))
    code, said = pull(tmp_path / "two", where, env)
    assert code == 0 and not leaked(said), said
    assert pulled_from_registry(tmp_path / "two")
    # A helper that knows no credentials for the host (exit 1, as docker's do): none found, one line.
    helper(tmp_path / "bin2", "ritest", 'echo "credentials not found in native keychain"; exit 1')
    env = isolated_env(DOCKER_CONFIG=str(docker), PATH=f"{tmp_path / 'bin2'}:{isolated_env()['PATH']}")
    code, said = pull(tmp_path / "three", where, env)
    assert code == 1 and "asks for credentials (none found)" in said, said
    # A helper that is not installed: one line naming it, exit 2 (bad input), no traceback.
    (docker / "config.json").write_text(json.dumps({"credHelpers": {basic.host: "missing"}}))
    code, said = pull(tmp_path / "four", where, isolated_env(DOCKER_CONFIG=str(docker)))
    assert code == 2 and "docker-credential-missing" in said and "Traceback" not in said, said


def test_a_redirect_to_blob_storage_gets_no_credentials(tmp_path: Path, wheels: Path, basic: Registry) -> None:
    env = isolated_env(REGISTRY_AUTH_FILE=str(auth_file(tmp_path / "auth.json", basic.host, SECRET)))
    push(tmp_path / "one", wheels, f"{basic.host}/redirected", env)
    front = BlobRedirect(basic.host, "alice", SECRET)
    try:
        # The same credentials, now for the front's host:port (blob storage is on another port of 127.0.0.1).
        env = isolated_env(REGISTRY_AUTH_FILE=str(auth_file(tmp_path / "front.json", front.host, SECRET)))
        code, said = pull(tmp_path / "two", f"{front.host}/redirected", env)
        assert code == 0, said
        assert front.front_authorized > 0  # the registry itself got the credentials...
        assert len(front.storage_saw) == 2  # ...the config and the layer came from storage...
        assert all("authorization" not in headers for headers in front.storage_saw)  # ...which never got them
        assert not leaked(said) and "X-Signature" not in said
        assert pulled_from_registry(tmp_path / "two")
    finally:
        front.stop()
