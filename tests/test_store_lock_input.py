"""Bad input around lock files and the store that used to end in an internal error, a traceback's tail or exit 1:
each is one line now, exit 2 where it is the user's input, and nothing is created.

Lock files nested past any real one, a ``-r`` chain 1,500 files deep, a dotted key that made tomllib take
gigabytes, ``export -o`` into a missing directory, an index answering junk to a pinned spec, and another UID's
private store directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import otheruid
import pytest
from helpers import cli, document, ensure_args, isolated_env, run, snapshot
from indexserver import IndexServer

from repoinstall._disk.identity import environment_tag

HEAD = 'lock-version = "1.0"\ncreated-by = "hand"\n'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    server = otheruid.serve_app_other_lib(tmp_path_factory.mktemp("lock-input-wheels"))
    yield server
    server.stop()


def _one_line(done: subprocess.CompletedProcess[str], code: int = 2) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == code, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("repoinstall: error: "), lines[-5:]
    assert "internal error" not in lines[0] and "Traceback" not in done.stderr
    return lines[0]


def _refused(repo: Path, *args: str | Path) -> str:
    done = run("ensure", "--repo", repo, "--no-index", *args)
    line = _one_line(done)
    assert not repo.exists(), "nothing created"
    return line


@pytest.mark.parametrize(
    ("case", "value"),
    [("array", "[" * 5000 + "]" * 5000), ("inline table", "{a = " * 5000 + "1" + "}" * 5000)],
)
def test_a_lock_nested_thousands_deep_is_one_line(tmp_path: Path, repo: Path, case: str, value: str) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(f"{HEAD}x = {value}\n")
    assert _refused(repo, "-r", lock) == (
        f"repoinstall: error: {lock}:3: arrays or inline tables nested more than 64 deep"
    ), case


def test_a_dotted_key_of_20000_parts_is_refused_before_tomllib_reads_it(tmp_path: Path, repo: Path) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(HEAD + ".".join(["a"] * 20_000) + " = 1\n")  # 40 KB: tomllib took 19 s and 1.6 GB on it
    # The CLI's peak memory, from a process of its own (this one's children include every earlier test's).
    probe = (
        "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
        "sys.stderr.write(done.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *cli("ensure", "--repo", repo, "--no-index", "-r", lock)],
        env=isolated_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    code, peak_kib = map(int, done.stdout.split())
    assert code == 2 and done.stderr.strip() == f"repoinstall: error: {lock}:3: a key of more than 65 dotted parts"
    assert peak_kib < 200 * 1024, f"{peak_kib} KiB"
    assert not repo.exists()


def test_a_real_shaped_lock_passes_the_shape_check(tmp_path: Path, served: IndexServer, repo: Path) -> None:
    """Strings and comments holding brackets and dots, multi-line strings, dotted table headers: read as before."""
    wheel = served.files("lib")[0]
    lock = tmp_path / "pylock.toml"
    lock.write_text(
        f"{HEAD}# a comment with [[ brackets {{ and a.b.c.d dots\n"
        'requires-python = ">=3.8"\n'
        "[[packages]]\n"
        'name = "lib"\nversion = "1.0"\n'
        f'wheels = [{{ url = "{served.url}{wheel.name}", hashes = {{ sha256 = "{served.sha256(wheel)}" }} }}]\n'
        '[tool.x.y]\nnote = """ a ""quoted"" [[ {{ multi-line\nstring """\nraw = \'\'\'[ { . . . \'\'\'\n'
    )
    done = run("ensure", "--repo", repo, "--json", "-r", lock)
    assert done.returncode == 0, done.stderr
    assert document(done.stdout)["packages"][0]["action"] == "installed"


def test_a_chain_of_1500_requirements_files_is_one_line(tmp_path: Path, repo: Path) -> None:
    for number in range(1500):
        text = f"-r r{number + 1}.txt\n" if number < 1499 else "lib==1.0\n"
        (tmp_path / f"r{number}.txt").write_text(text)
    assert _refused(repo, "-r", tmp_path / "r0.txt") == (
        f"repoinstall: error: {tmp_path / 'r63.txt'}:1: -r files nested more than 64 deep"
    )


def test_a_chain_within_the_bound_is_read_in_order(tmp_path: Path, served: IndexServer, repo: Path) -> None:
    for number in range(40):
        (tmp_path / f"r{number}.txt").write_text(f"-r r{number + 1}.txt\n")
    (tmp_path / "r40.txt").write_text("lib==1.0\n")
    done = run(*ensure_args(repo, served.url, "-r", str(tmp_path / "r0.txt")))
    assert done.returncode == 0, done.stderr


def test_export_into_a_missing_directory_is_one_line_exit_2(served: IndexServer, repo: Path, tmp_path: Path) -> None:
    assert run(*ensure_args(repo, served.url, "app==1.0")).returncode == 0
    before = snapshot(repo)
    target = tmp_path / "nowhere" / "pylock.toml"
    done = run("export", "app==1.0", "--repo", repo, "-o", target)
    assert _one_line(done) == f"repoinstall: error: {target}: its directory {target.parent} does not exist"
    assert not target.parent.exists() and snapshot(repo) == before


@pytest.fixture
def junk_index() -> Iterator[str]:
    """An index whose every page is bytes that are not UTF-8, behind a URL with a password."""
    import http.server
    import threading

    class Junk(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"\xff\xfe\x80junk\x00\xc3(" * 64
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Junk)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://deploy:s3cr3tPW@127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()
    server.server_close()


def test_an_index_answering_junk_to_a_pinned_spec_is_named_in_one_line(junk_index: str, repo: Path) -> None:
    done = run("ensure", "--repo", repo, "--index-url", junk_index, "lib==1.0", "-q")
    line = _one_line(done, code=1)
    shown = junk_index.replace("deploy:s3cr3tPW", "****")
    assert line.startswith(f"repoinstall: error: lib==1.0: pip crashed on what the index answered ({shown}): ")
    assert "UnicodeDecodeError" in line and "s3cr3tPW" not in done.stderr + done.stdout


# ---- another UID ---------------------------------------------------------------------------------------------

GROUP = 2000


@pytest.fixture
def shared() -> Iterator[Path]:
    if not otheruid.available():
        pytest.skip("needs root, unshare and setpriv")
    with otheruid.shared_repo(GROUP) as repo:
        yield repo


@pytest.mark.parametrize("depth", [1, 2, 3], ids=["store", "env", "name"])
def test_another_uids_private_store_dir_is_named_with_its_owner_and_mode(
    shared: Path, served: IndexServer, depth: int
) -> None:
    assert run(*ensure_args(shared, served.url, "app==1.0")).returncode == 0
    private = shared.joinpath(*("store", environment_tag(), "lib")[:depth])
    private.chmod(0o700)  # root's, as a pod of another runAsUser with umask 077 would leave it
    before = snapshot(shared)

    done = otheruid.run_as(1001, GROUP, *ensure_args(shared, served.url, "other==1.0"), groups=(GROUP,))
    assert _one_line(done) == (
        f"repoinstall: error: {private}: permission denied: uid 1001 cannot read it (owner uid 0 (root), gid {GROUP}, "
        "mode 0700); pods sharing a repo need group read access to it (one fsGroup, umask 002) or one runAsUser"
    )
    verify = otheruid.run_as(1001, GROUP, "verify", "--repo", shared, "--json", groups=(GROUP,))
    assert verify.returncode == 1, verify.stderr
    assert "internal error" not in verify.stderr
    named = [o for o in json.loads(verify.stdout)["obstacles"] if o["path"] == str(private)]
    assert [o["problem"] for o in named] == [
        f"uid 1001 may not read it (owner uid 0 (root), gid {GROUP}, mode 0700): nothing below it can be checked"
    ]
    assert snapshot(shared).keys() == before.keys(), "nothing left behind"
