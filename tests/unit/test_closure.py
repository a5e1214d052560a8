"""The closure a record holds: rows with each artifact's sha256 and URL, from pip's report or uv's lock."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from repoinstall._disk import manifest
from repoinstall._disk.dists import Dist
from repoinstall._disk.identity import TreeId
from repoinstall._install.backends import pip as pip_backend
from repoinstall._install.backends import uv as uv_backend
from repoinstall._options import InstallOptions
from repoinstall._requirements import parse_spec
from repoinstall._urls import without_credentials


def _tid() -> TreeId:
    from packaging.version import Version

    return TreeId("cp311-cp311-linux_x86_64", "app", Version("1.0"))


def test_rows_carry_the_artifact_and_leave_out_what_is_not_known() -> None:
    dists = [Dist("app-1.0.dist-info", "App", "1.0"), Dist("dep-2.dist-info", "dep", "2")]
    artifacts = [manifest.Artifact("app", "1.0", "ab" * 32, "https://host/app-1.0-py3-none-any.whl")]
    entry = manifest.TreeEntry.new(_tid(), "app==1.0", "app-1.0.dist-info", dists, "pip", "26", artifacts)
    assert entry.dists == (
        {"name": "App", "version": "1.0", "dist_info": "app-1.0.dist-info", "sha256": "ab" * 32,
         "url": "https://host/app-1.0-py3-none-any.whl"},
        {"name": "dep", "version": "2", "dist_info": "dep-2.dist-info"},
    )  # fmt: skip
    # The record parses back, its rows are strings only (what older readers accept), and verify reads them.
    parsed = manifest.parse(entry.to_json(), _tid())
    assert parsed is not None and manifest.recorded_dists(parsed) == entry.dists
    # An artifact of another version of that name is not this dist's.
    other = manifest.TreeEntry.new(
        _tid(), "app==1.0", "app-1.0.dist-info", dists, "pip", "26", [manifest.Artifact("dep", "3", "cd" * 32)]
    )
    assert "sha256" not in other.dists[1]


def test_old_records_without_the_new_keys_still_parse() -> None:
    old = manifest.TreeEntry.new(_tid(), "app==1.0", "app-1.0.dist-info", [Dist("app-1.0.dist-info", "app", "1.0")],
                                 "pip", "26")  # fmt: skip
    parsed = manifest.parse(old.to_json(), _tid())
    assert parsed is not None and manifest.recorded_dists(parsed) == ({"name": "app", "version": "1.0",
                                                                      "dist_info": "app-1.0.dist-info"},)  # fmt: skip


def test_urls_lose_credentials_and_fragments() -> None:
    assert without_credentials("https://user:s3cret@host:8443/p/a.whl#sha256=00") == "https://host:8443/p/a.whl"
    assert without_credentials("https://token@host/a.whl") == "https://host/a.whl"
    assert without_credentials("file:///tmp/a.whl") == "file:///tmp/a.whl"
    assert without_credentials("http://[::1/a") == ""


def test_pip_report_hashes_and_a_local_file_without_one(tmp_path: Path) -> None:
    wheel = tmp_path / "dep-2-py3-none-any.whl"
    wheel.write_bytes(b"wheel bytes")
    report = {
        "install": [
            {"metadata": {"name": "app", "version": "1.0"},
             "download_info": {"url": "https://u:p@host/app.whl", "archive_info": {"hashes": {"sha256": "AB" * 32}}}},
            {"metadata": {"name": "dep", "version": "2"},
             "download_info": {"url": wheel.as_uri(), "archive_info": {}}},  # pip < 23.1 left it out
            {"metadata": {"name": "old", "version": "3"},
             "download_info": {"url": "https://host/old.whl", "archive_info": {"hash": "sha256=" + "ef" * 32}}},
            {"metadata": {"name": "md5", "version": "4"},
             "download_info": {"url": "https://host/md5.whl", "archive_info": {"hashes": {"md5": "00"}}}},
            {"metadata": {"name": "tree", "version": "5"}, "download_info": {"url": "file:///src", "dir_info": {}}},
            {"metadata": {"name": "broken"}},
        ]
    }  # fmt: skip
    assert pip_backend.artifacts(report) == (
        manifest.Artifact("app", "1.0", "ab" * 32, "https://host/app.whl"),
        manifest.Artifact("dep", "2", hashlib.sha256(b"wheel bytes").hexdigest(), wheel.as_uri()),
        manifest.Artifact("old", "3", "ef" * 32, "https://host/old.whl"),
        manifest.Artifact("md5", "4", "", "https://host/md5.whl"),
        manifest.Artifact("tree", "5", "", "file:///src"),
    )
    assert pip_backend.artifacts("garbage") == ()


def test_an_old_pip_installs_without_a_report(tmp_path: Path) -> None:
    """pip < 22.2 has no --report: the install goes on without it, and the record has no hashes."""
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 22.1.2\n")
    python.chmod(0o755)
    options = InstallOptions(python=str(python))
    requested = parse_spec("app==1.0")
    command = pip_backend.PIP.command(options, str(tmp_path / "t"), requested, "app==1.0", str(tmp_path))
    assert "--report" not in command
    assert pip_backend.PIP.closure(str(tmp_path / "t"), requested, str(tmp_path)) == ()
    python.write_text("#!/bin/sh\necho 22.2\n")
    pip_backend._reports.cache_clear()
    assert "--report" in pip_backend.PIP.command(options, str(tmp_path / "t"), requested, "app==1.0", str(tmp_path))
    pip_backend._reports.cache_clear()


def _write_lock(scratch: Path, text: str) -> None:
    (scratch / uv_backend.LOCK).write_text(text)


LOCK = """
lock-version = "1.0"
[[packages]]
name = "app"
version = "1.0"
wheels = [{ url = "http://h/app-1.0-py3-none-any.whl", hashes = { sha256 = "aa" } }]
[[packages]]
name = "dep"
version = "2"
sdist = { url = "http://h/dep-2.tar.gz", hashes = { sha256 = "bb" } }
wheels = [
  { url = "http://h/dep-2-cp311-cp311-linux_x86_64.whl", hashes = { sha256 = "cc" } },
  { url = "http://h/dep-2-py3-none-any.whl", hashes = { sha256 = "dd" } },
]
"""


def _tree(target: Path, tags: dict[str, str]) -> None:
    for name, tag in tags.items():
        dist_info = target / f"{name}-x.dist-info"
        dist_info.mkdir(parents=True)
        (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1\n\n")
        (dist_info / "WHEEL").write_text(f"Wheel-Version: 1.0\nTag: {tag}\n")


@pytest.mark.parametrize(
    ("dep_tag", "expected"),
    [("cp311-cp311-linux_x86_64", "cc"), ("py3-none-any", "dd"), ("cp311-abi3-linux_x86_64", "bb")],
)
def test_uv_pins_the_lock_and_names_the_file_installed(tmp_path: Path, dep_tag: str, expected: str) -> None:
    _write_lock(tmp_path, LOCK)
    requested = parse_spec("app==1.0")
    lines = uv_backend._pins(uv_backend._lock(str(tmp_path)), requested, "app==1.0", str(tmp_path))
    assert lines == ["app==1.0 --hash=sha256:aa", "dep==2 --hash=sha256:bb --hash=sha256:cc --hash=sha256:dd"]
    (tmp_path / uv_backend.PINNED).write_text("\n".join(lines))
    _tree(tmp_path / "t", {"app": "py3-none-any", "dep": dep_tag})  # a tag no wheel has: built from the sdist
    found = {a.name: a.sha256 for a in uv_backend.UV.closure(str(tmp_path / "t"), requested, str(tmp_path))}
    assert found == {"app": "aa", "dep": expected}


def test_uv_records_nothing_it_did_not_make_uv_check(tmp_path: Path) -> None:
    _write_lock(tmp_path, LOCK)
    _tree(tmp_path / "t", {"app": "py3-none-any", "dep": "py3-none-any"})
    requested = parse_spec("app==1.0")
    # Installed without the pinned lock (it could not be pinned): nothing is known.
    assert uv_backend.UV.closure(str(tmp_path / "t"), requested, str(tmp_path)) == ()
    # With the spec's own --hash, only a file with one of those hashes.
    hashed = parse_spec("app==1.0", hashes=["sha256:aa"])
    assert [a.name for a in uv_backend.UV.closure(str(tmp_path / "t"), hashed, str(tmp_path))] == ["app"]
    # A lock with a directory dependency, or a file without a hash, is not pinned: uv installs as before.
    _write_lock(tmp_path, LOCK + '[[packages]]\nname = "src"\ndirectory = { path = "/src" }\n')
    assert uv_backend._pins(uv_backend._lock(str(tmp_path)), requested, "app==1.0", str(tmp_path)) is None
    _write_lock(tmp_path, LOCK.replace('hashes = { sha256 = "aa" }', "hashes = {}"))
    assert uv_backend._pins(uv_backend._lock(str(tmp_path)), requested, "app==1.0", str(tmp_path)) is None
    (tmp_path / uv_backend.LOCK).write_text("not toml [")
    assert uv_backend._lock(str(tmp_path)) is None
