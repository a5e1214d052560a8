"""The pieces of a locked install that read and write text: lines, the metapackage, the installers' messages."""

from __future__ import annotations

import io
import json
import zipfile

from packaging.version import Version

from repoinstall._disk.identity import TreeId
from repoinstall._disk.pin import Pin
from repoinstall._install.backends.run import hash_mismatch, unavailable
from repoinstall._install.locked import _metapackage, artifacts_of
from repoinstall._lockfile.model import PYLOCK, Lock, LockedPackage
from repoinstall._lockfile.request import request

SHA = "a" * 64


def _lock(url: str) -> Lock:
    return Lock(
        "pylock.toml", PYLOCK, (LockedPackage("dep", "1.0", "dep-1.0-py3-none-any.whl", url, (f"sha256:{SHA}",)),)
    )


def test_a_lock_tree_keeps_no_credentials_in_its_metapackage() -> None:
    requested = request(_lock("https://user:s3cret@files.example/dep-1.0-py3-none-any.whl"))
    assert [pin.line() for pin in requested.locked] == [
        f"dep @ https://user:s3cret@files.example/dep-1.0-py3-none-any.whl --hash=sha256:{SHA}"
    ]
    tid = TreeId("env", requested.name, Version("1"))
    _, data = _metapackage(tid, requested)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        kept = json.loads(archive.read(f"{tid.name.replace('-', '_')}-1.dist-info/lock.json"))
    # Of the closure alone: the same bytes whatever URL the lock gives (the record says where it came from).
    assert kept["lines"] == [f"dep==1.0 --hash=sha256:{SHA}"]
    assert _metapackage(tid, request(_lock("file:///elsewhere/dep-1.0-py3-none-any.whl")))[1] == data
    assert b"s3cret" not in data
    # The same lock makes the same bytes: its hash does not change from one install to the next.
    assert _metapackage(tid, requested)[1] == data


def test_artifacts_of_a_pinned_install() -> None:
    requested = request(_lock("https://user:pw@files.example/dep-1.0-py3-none-any.whl"))
    [artifact] = artifacts_of(requested.locked)
    assert (artifact.name, artifact.version, artifact.sha256) == ("dep", "1.0", SHA)
    assert artifact.url == "https://files.example/dep-1.0-py3-none-any.whl"
    several = Pin("dep", "1.0", "", (f"sha256:{SHA}", f"sha256:{'b' * 64}"))
    assert artifacts_of([several]) == ()  # which of the two was taken, only the installer knows


PIP_MISMATCH = f"""ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated ...
    dep @ http://h/dep-1.0-py3-none-any.whl from http://h/dep-1.0-py3-none-any.whl (from -r r.txt (line 2)):
        Expected sha256 {SHA}
             Got        {"b" * 64}
"""
UV_MISMATCH = f"""error: Failed to download `dep @ http://h/dep-1.0-py3-none-any.whl`
  Caused by: Hash mismatch for `dep @ http://h/dep-1.0-py3-none-any.whl`

Expected:
  sha256:{SHA}

Computed:
  sha256:{"b" * 64}
"""


def test_a_hash_mismatch_in_one_line_from_either_installer() -> None:
    for output in (PIP_MISMATCH, UV_MISMATCH):
        assert hash_mismatch(output) == (
            f"hash mismatch for dep @ http://h/dep-1.0-py3-none-any.whl: expected sha256:{SHA}, "
            f"downloaded sha256:{'b' * 64}"
        )
    assert hash_mismatch("ERROR: No matching distribution found for x==1") is None


def test_an_artifact_gone_in_one_line_from_either_installer() -> None:
    assert unavailable("  ERROR: HTTP error 404 while getting http://h/dep-1.0-py3-none-any.whl\n") == (
        "artifact no longer available: http://h/dep-1.0-py3-none-any.whl (HTTP 404)"
    )
    uv = "error: Failed to fetch: http://h/dep-1.0-py3-none-any.whl\n  cause: HTTP status client error (404 Not Found)"
    assert unavailable(uv) == "artifact no longer available: http://h/dep-1.0-py3-none-any.whl (HTTP 404)"
    assert unavailable("ERROR: No matching distribution found for dep==1.0") == (
        "artifact no longer available: dep==1.0"
    )
    assert unavailable("error: something else entirely") is None
