"""Credentials for a registry, found where container tools keep them; never printed.

In order: the auth file ``REGISTRY_AUTH_FILE`` names (podman, skopeo, buildah), ``$XDG_RUNTIME_DIR/containers/
auth.json``, Docker's ``config.json`` (in ``$DOCKER_CONFIG`` or ``~/.docker``) with its per-registry
``credHelpers`` and its ``credsStore``, then a netrc (``$NETRC`` or ``~/.netrc``) entry for the host. The first
that names the host wins.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import subprocess
from typing import Any, NamedTuple

from .._errors import InvalidInput

_HELPER_TIMEOUT = 30.0


class Credentials(NamedTuple):
    """A user and a password or token. Its ``repr`` hides the secret, so no log line or traceback shows it."""

    user: str
    secret: str

    def __repr__(self) -> str:
        return f"Credentials(user={self.user!r}, secret='****')"

    def __str__(self) -> str:
        return repr(self)


def lookup(host: str) -> Credentials | None:
    """The credentials for ``host`` (``name[:port]``), or ``None`` where none are kept."""
    for path in _auth_files():
        document = _read(path)
        if document is None:
            continue
        found = _from_document(document, host, path)
        if found is not None:
            return found
    return _from_netrc(host)


def _auth_files() -> list[str]:
    files = []
    if named := os.environ.get("REGISTRY_AUTH_FILE"):
        files.append(named)
    if runtime := os.environ.get("XDG_RUNTIME_DIR"):
        files.append(os.path.join(runtime, "containers", "auth.json"))
    docker = os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    files.append(os.path.join(docker, "config.json"))
    return files


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise InvalidInput(f"{path}: cannot be read as an auth file: {type(error).__name__}") from None
    return document if isinstance(document, dict) else None


def _host_of(key: str) -> str:
    """An ``auths`` key as a host: Docker writes ``https://index.docker.io/v1/`` as well as ``host:port``."""
    key = key.split("://", 1)[-1]
    return key.split("/", 1)[0].lower()


def _from_document(document: dict[str, Any], host: str, path: str) -> Credentials | None:
    helpers = document.get("credHelpers")
    if isinstance(helpers, dict) and isinstance(helper := helpers.get(host), str):
        return _from_helper(helper, host)
    auths = document.get("auths")
    for key, value in auths.items() if isinstance(auths, dict) else ():
        if _host_of(str(key)) != host.lower() or not isinstance(value, dict):
            continue
        encoded = value.get("auth")
        if isinstance(encoded, str) and encoded:
            try:
                user, colon, secret = base64.b64decode(encoded, validate=True).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                raise InvalidInput(f"{path}: the entry for {host} is not base64 of user:password") from None
            if colon:
                return Credentials(user, secret)
        if isinstance(token := value.get("identitytoken"), str) and token:
            return Credentials("<token>", token)
    store = document.get("credsStore")
    if isinstance(store, str) and store:
        return _from_helper(store, host)
    return None


def _from_helper(helper: str, host: str) -> Credentials | None:
    """``docker-credential-<helper> get``, given the host on stdin: ``{"Username": ..., "Secret": ...}``."""
    program = f"docker-credential-{helper}"
    try:
        done = subprocess.run(
            [program, "get"], input=host.encode(), capture_output=True, timeout=_HELPER_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InvalidInput(
            f"{program}: the credential helper for {host} cannot be run: {type(error).__name__}"
        ) from None
    if done.returncode != 0:
        return None  # "credentials not found in native keychain": no credentials for this host
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        answer = json.loads(done.stdout)
        if isinstance(answer, dict) and isinstance(answer.get("Secret"), str):
            return Credentials(str(answer.get("Username") or ""), answer["Secret"])
    raise InvalidInput(f"{program}: the credential helper's answer for {host} is not its JSON")


def _from_netrc(host: str) -> Credentials | None:
    import netrc

    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    if not os.path.isfile(path):
        return None
    try:
        found = netrc.netrc(path).authenticators(host) or netrc.netrc(path).authenticators(host.rsplit(":", 1)[0])
    except (OSError, netrc.NetrcParseError) as error:
        raise InvalidInput(f"{path}: cannot be read as a netrc: {type(error).__name__}") from None
    if found is None:
        return None
    login, _, password = found
    return Credentials(login or "", password or "")
