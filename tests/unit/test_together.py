"""A set installed together: its identity is the set, and only that exact name shape counts as a set."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest
from packaging.version import Version

from repoinstall import InvalidInput
from repoinstall._disk.dists import record_hash
from repoinstall._disk.identity import TreeId, TreeKind, kind_of
from repoinstall._install.together import combined, wheel
from repoinstall._requirements import Requested, parse_spec

ENV = "cp311-cp311-linux_x86_64"


def members(*specs: str) -> list[tuple[Requested, TreeId]]:
    chosen = [parse_spec(spec) for spec in specs]
    return [(one, TreeId(ENV, one.name, one.pinned or Version("0"), one.extras)) for one in chosen]


def test_the_tree_is_keyed_by_the_set_in_any_order() -> None:
    one, tid = combined(ENV, members("app-pkg==1.0", "lib-pkg==1.0"))
    _, same = combined(ENV, members("lib_pkg==1.0.0", "App.Pkg==1.0"))
    _, other = combined(ENV, members("app-pkg==1.0", "lib-pkg==2.0"))
    assert tid == same != other and tid.version == Version("1") and tid.kind is other.kind is TreeKind.SET
    assert one.members == ("app-pkg==1.0", "lib-pkg==1.0") and one.text == "app-pkg==1.0 lib-pkg==1.0"


@pytest.mark.parametrize("name", ["together", "together-ai", "together-0123456789abcdeg", "together-0123456789abcdef0"])
def test_a_real_project_named_together_is_not_a_set(name: str) -> None:
    assert kind_of(name) is TreeKind.REQUIREMENT  # so repair and list treat it as the project it is


def test_hashes_and_a_project_twice_are_refused() -> None:
    with pytest.raises(InvalidInput, match="--hash"):
        combined(ENV, [(parse_spec("a==1", hashes=["sha256:" + "0" * 64]), TreeId(ENV, "a", Version("1")))])
    with pytest.raises(InvalidInput, match="twice"):
        combined(ENV, members("a==1", "a==2"))


def test_the_metapackage_wheel_is_what_its_record_says() -> None:
    _, tid = combined(ENV, members("app-pkg==1.0", "lib-pkg==1.0"))
    name, data = wheel(tid, ("app-pkg==1.0", "lib-pkg==1.0"))
    assert name == f"{tid.name.replace('-', '_')}-1-py3-none-any.whl"
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        (record,) = [n for n in archive.namelist() if n.endswith("/RECORD")]
        rows = [line.split(",") for line in archive.read(record).decode().splitlines()]
        for path, digest, size in rows:
            if path != record:
                content = archive.read(path)
                assert digest == f"sha256={record_hash(hashlib.sha256(content).digest())}" and size == str(len(content))
        metadata = archive.read(record.replace("RECORD", "METADATA")).decode()
    assert "Requires-Dist: app-pkg==1.0\nRequires-Dist: lib-pkg==1.0\n" in metadata


def test_a_set_keeps_its_files_index_lines_and_refuses_two_different_ones() -> None:
    """One installer run resolves a set: its members' requirements files must name the same indexes."""
    from repoinstall._options import FileIndex

    private = FileIndex("https://private.example/simple")
    same = [(one._replace(file_index=private), tid) for one, tid in members("app-pkg==1.0", "lib-pkg==1.0")]
    request, _ = combined(ENV, same)
    assert request.file_index == private
    mixed = [same[0], members("lib-pkg==1.0")[0]]
    with pytest.raises(InvalidInput, match="different index lines"):
        combined(ENV, mixed)
