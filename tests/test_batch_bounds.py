"""A batch's work is bounded: ``--jobs`` is held to what the host can run, and pinned specs that no index has cost
one listing each, not one installer each.

Counted, not timed: installers started (the ``-v`` log names each run) and downloads in flight at once (the
index server counts them).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import document, ensure_args, run
from indexserver import IndexServer
from wheels import make_wheel

from repoinstall._options import max_jobs

RUNS = re.compile(r"^repoinstall: .*: running ", re.MULTILINE)


#: More failing specs than this host may install at once.
FAILING = max_jobs() + 8


@pytest.fixture
def served(tmp_path: Path) -> Iterator[IndexServer]:
    """lib 1.0, and projects whose only wheel is junk: every installer of one fails after downloading it."""
    directory = tmp_path / "wheels"
    directory.mkdir()
    make_wheel(directory, "lib", "1.0", modules=1)
    for number in range(FAILING):
        (directory / f"broken{number}-1.0-py3-none-any.whl").write_bytes(b"not a zip file\n" * 64)
    server = IndexServer(directory).start()
    yield server
    server.stop()


def test_jobs_is_held_to_what_the_host_can_run(served: IndexServer, repo: Path) -> None:
    served.delays["broken"] = 2.0  # each installer holds its download open: those at once overlap
    specs = [f"broken{number}==1.0" for number in range(FAILING)]
    done = run(*ensure_args(repo, served.url, *specs), "--jobs", str(FAILING))
    assert done.returncode == 1, done.stderr
    # The batch's one installer run first (all of them, one download at a time), then one per spec, at most the cap.
    assert 1 < served.peak_sending <= max_jobs() < FAILING, served.peak_sending


def test_pinned_specs_no_index_has_cost_no_installer_each(served: IndexServer, repo: Path, tmp_path: Path) -> None:
    missing = [f"nowhere{number}==1.0" for number in range(300)]
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("".join(f"{spec}\n" for spec in [*missing, "lib==1.0", "broken0==1.0"]))
    done = run(*ensure_args(repo, served.url, "-r", str(requirements)), "-v")
    assert done.returncode == 1
    runs = len(RUNS.findall(done.stderr))
    # The batch together (it fails), then lib and broken0 each on their own: never one per missing spec.
    assert runs <= 4, runs
    report = document(done.stdout)
    assert [p["action"] for p in report["packages"]] == ["installed"]
    errors = {e["requirement"]: e["error"] for e in report["errors"]}
    for spec in missing:
        assert errors[spec] == f"no version of {spec} for this Python on {served.url} (the project is not there)"
