"""More hostile cases around lock files and the store (issue 30's widened sweep): each plants or writes one hostile
thing and asserts the contract: one line and exit 2 for bad input, nothing created, no internal error, no hang;
an install never failed by something in the way of what is only a check's aid (``store-digests/``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import otheruid
import pytest
from helpers import ensure_args, run
from indexserver import IndexServer

from repoinstall._disk.identity import environment_tag
from repoinstall._disk.pin import Pin
from repoinstall._errors import RequirementsFileError
from repoinstall._install.localcopy import private_copies

HEAD = 'lock-version = "1.0"\ncreated-by = "hand"\n'
WHEEL = 'wheels = [{{ url = "http://127.0.0.1:9/x-1.0-py3-none-any.whl", hashes = {{ sha256 = "{}" }} }}]\n'.format(
    "a" * 64
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    server = otheruid.serve_app_other_lib(tmp_path_factory.mktemp("sweep-wheels"))
    yield server
    server.stop()


def _refused(repo: Path, *args: str | Path) -> str:
    done = run("ensure", "--repo", repo, "--no-index", *args, timeout=60)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr[-1000:]
    assert len(lines) == 1 and "internal error" not in lines[0] and "Traceback" not in done.stderr, lines
    assert not repo.exists(), "nothing created"
    return lines[0]


def test_a_fifo_given_as_a_requirements_file_is_refused_without_blocking(tmp_path: Path, repo: Path) -> None:
    os.mkfifo(tmp_path / "requirements.txt")
    assert _refused(repo, "-r", tmp_path / "requirements.txt").endswith(
        "is not a regular file (a pipe, socket or device), not a requirements file"
    )


def test_requirements_files_that_include_each_other_through_a_symlink_are_a_loop(tmp_path: Path, repo: Path) -> None:
    (tmp_path / "a.txt").write_text("-r b.txt\n")
    (tmp_path / "b.txt").symlink_to("a.txt")
    assert _refused(repo, "-r", tmp_path / "a.txt").endswith("requirements files include each other in a loop")


def test_a_lock_naming_one_package_5000_times_is_one_line(tmp_path: Path, repo: Path) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(HEAD + '[[packages]]\nname = "x"\nversion = "1.0"\n'.join(["", *[WHEEL] * 5000]))
    assert _refused(repo, "-r", lock).endswith(
        "packages[1] (x): selected twice for this environment, also at packages[0]"
    )


def test_a_nul_in_a_locked_package_name_is_one_line(tmp_path: Path, repo: Path) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(HEAD + '[[packages]]\nname = "a\\u0000b"\nversion = "1.0"\n' + WHEEL)
    assert "is not a file of 'a\\x00b'" in _refused(repo, "-r", lock)


@pytest.mark.parametrize(
    ("case", "text"),
    [
        ("version", '[[packages]]\nname = "ab"\nversion = "1.' + "0" * 100_000 + '"\n' + WHEEL),
        ("integer", "x = " + "1" * 5000 + "\n"),
    ],
)
def test_a_number_of_thousands_of_digits_in_a_lock_is_one_line(
    tmp_path: Path, repo: Path, case: str, text: str
) -> None:
    # Was "internal error: ValueError: Exceeds the limit (4300 digits) for integer string conversion", exit 1.
    lock = tmp_path / "pylock.toml"
    lock.write_text(HEAD + text)
    assert _refused(repo, "-r", lock).endswith(
        f"{lock}:{5 if case == 'version' else 3}: a number of more than 1000 digits"
    )


def test_a_file_where_store_digests_belongs_never_fails_an_install(served: IndexServer, repo: Path) -> None:
    repo.mkdir()
    (repo / "store-digests").write_text("in the way\n")  # was: exit 2 after the installer ran and stored
    done = run(*ensure_args(repo, served.url, "app==1.0"))
    assert done.returncode == 0, done.stderr
    assert "its RECORD digest is not kept" in done.stderr
    verify = run("verify", "--repo", repo, "--json")
    assert verify.returncode == 0, verify.stdout
    notes = [n for d in json.loads(verify.stdout)["store"] for n in d["notes"]]
    assert any(n.startswith("no RECORD digest kept") for n in notes), notes


@pytest.mark.parametrize("plant", ["fifo", "symlink", "garbage"])
def test_what_is_planted_at_a_digest_is_never_followed_nor_read_as_one(
    served: IndexServer, repo: Path, tmp_path: Path, plant: str
) -> None:
    assert run(*ensure_args(repo, served.url, "app==1.0")).returncode == 0
    (digest,) = (repo / "store-digests" / environment_tag() / "lib").iterdir()
    digest.unlink()
    if plant == "fifo":
        os.mkfifo(digest)
    elif plant == "symlink":
        (tmp_path / "forged.json").write_text(json.dumps({"record": "0" * 64}))
        digest.symlink_to(tmp_path / "forged.json")
    else:
        digest.write_bytes(b"\xff{not json")
    verify = run("verify", "--repo", repo, "--json", timeout=60)
    assert verify.returncode == 0, verify.stdout  # no digest: checked less, never hung or misled
    (lib,) = [d for d in json.loads(verify.stdout)["store"] if d["dist"] == "lib==1.0"]
    assert lib["status"] == "ok" and any(n.startswith("no RECORD digest kept") for n in lib["notes"]), lib


def test_export_onto_a_directory_named_like_a_lock_is_one_line_exit_2(
    served: IndexServer, repo: Path, tmp_path: Path
) -> None:
    assert run(*ensure_args(repo, served.url, "app==1.0")).returncode == 0
    (tmp_path / "pylock.toml").mkdir()
    done = run("export", "app==1.0", "--repo", repo, "-o", tmp_path / "pylock.toml")
    assert done.returncode == 2  # was 1: a path that cannot be a file is the user's input
    assert done.stderr.strip() == f"repoinstall: error: {tmp_path / 'pylock.toml'}: cannot write it: Is a directory"


def test_a_local_artifact_that_is_a_fifo_when_it_is_copied_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "x-1.0-py3-none-any.whl"
    os.mkfifo(fifo)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    pin = Pin("x", "1.0", fifo.as_uri(), (f"sha256:{'a' * 64}",))
    with pytest.raises(RequirementsFileError, match="no longer a regular file"):
        private_copies([pin], str(scratch))
