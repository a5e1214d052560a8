"""A layer unpacked as its compressed bytes arrive (:func:`repoinstall._oci.layer.unpack` over chunks): one pass
that gives the diff_id, writes each file and hashes it as written, reads gzip members in turn as gzip does, and
refuses a stream cut short, with what it charged to its image's budget given back."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from repoinstall._disk.dists import Hashed, record_hash
from repoinstall._oci.layer import Budget, Refused, unpack

FILES = {"pkg/__init__.py": b"x = 1\n" * 1000, "pkg/data/blob.bin": os.urandom(300_000), "top.py": b""}


def _tar() -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data in FILES.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.mark.parametrize("members", [1, 2])
def test_a_layer_is_unpacked_as_it_arrives_and_each_file_hashed_as_written(tmp_path: Path, members: int) -> None:
    plain = _tar()
    cut = len(plain) // 2
    parts = [plain] if members == 1 else [plain[:cut], plain[cut:]]
    blob = b"".join(gzip.compress(part, mtime=0) for part in parts)
    hashed = Hashed(fresh=True)
    diff_id = f"sha256:{hashlib.sha256(plain).hexdigest()}"
    assert unpack(_chunks(blob, 4096), len(blob), diff_id, str(tmp_path), "layer", hashed=hashed) == len(plain)
    for path, data in FILES.items():
        written = tmp_path / path
        assert written.read_bytes() == data
        known = hashed.get(os.stat(written), "sha256")
        assert known == (record_hash(hashlib.sha256(data).digest()), len(data))


def test_a_stream_cut_short_is_refused_and_its_charge_given_back(tmp_path: Path) -> None:
    plain = _tar()
    blob = gzip.compress(plain, mtime=0)
    diff_id = f"sha256:{hashlib.sha256(plain).hexdigest()}"
    budget = Budget()
    os.mkdir(tmp_path / "a")
    with pytest.raises(Refused, match="not a gzip tar layer: compressed data ended"):
        unpack(_chunks(blob[:-20], 4096), len(blob), diff_id, str(tmp_path / "a"), "layer", budget)
    assert (budget.bytes, budget.files) == (0, 0)
    # And the whole of it, again, into a new dir: charged once.
    os.mkdir(tmp_path / "b")
    unpack(_chunks(blob, 4096), len(blob), diff_id, str(tmp_path / "b"), "layer", budget)
    assert (budget.bytes, budget.files) == (sum(map(len, FILES.values())), len(FILES) + 2)
