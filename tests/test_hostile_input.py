"""Hostile input: secrets that must stay off command lines, names too long for a file system, URLs that cannot be
read, requirement files that are pipes or devices, repo paths that are not repos, installer temporaries, and the
last-resort net for a bug. Every case is one line on stderr with its documented exit code, and nothing is written."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import (
    actions,
    cli,
    document,
    ensure_args,
    finish,
    isolated_env,
    run,
    signal_group,
    start,
    wait_until,
)
from indexserver import IndexServer

SECRET = "s3cret-Pa55word"
LOCK = ["--stale-after", "2", "--heartbeat", "0.4"]


def _one_error(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The single ``repoinstall: error:`` line of a run that must fail with ``code``."""
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("repoinstall: error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


# ---- no secret on a command line ------------------------------------------------------------------------------------


def _command_lines() -> dict[int, str]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                found[int(entry)] = (
                    Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
                )
            except OSError:
                continue
    return found


class _Watcher(threading.Thread):
    """Reads every process's command line (and an installer's environment) until stopped."""

    def __init__(self, repo: Path, server: str) -> None:
        super().__init__(daemon=True)
        # Only this test's processes: other suites on this machine run installers and quote the secret too.
        self.repo = str(repo)
        self.server = server
        self.leaks: list[str] = []
        self.installer_env: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for pid, line in _command_lines().items():
                if SECRET in line and (self.repo in line or self.server in line):
                    self.leaks.append(line)
                if "--target" in line and self.repo in line and not self.installer_env:
                    try:
                        self.installer_env.append(Path(f"/proc/{pid}/environ").read_bytes().decode("utf-8", "replace"))
                    except OSError:
                        continue
            self.stop.wait(0.005)


@pytest.mark.parametrize("how", ["uv, PIP_INDEX_URL", "pip, API index_url", "uv, API extra_index_urls"])
def test_index_credentials_never_appear_on_a_command_line(
    how: str, repo: Path, index: IndexServer, tmp_path: Path
) -> None:
    index.delays["adaptor_a-1.0"] = 1.5  # the installer runs long enough to be seen
    with_password = index.simple.replace("http://", f"http://deploy:{SECRET}@")
    installer = how.split(",", maxsplit=1)[0]
    script = tmp_path / "api.py"
    script.write_text(
        "import os, sys\n"
        "from repoinstall import InstallOptions, Repo\n"
        "url = os.environ['TEST_INDEX']\n"
        "options = InstallOptions(index_url=url, installer=sys.argv[2]) if 'extra' not in sys.argv[3] else "
        "InstallOptions(no_index=False, extra_index_urls=(url,), installer=sys.argv[2])\n"
        "with Repo(sys.argv[1], install=options) as repo:\n"
        "    print(repo.ensure('adaptor-a==1.0').action)\n"
    )
    watcher = _Watcher(repo, index.url.split("//", 1)[1].split("/", 1)[0])
    watcher.start()
    try:
        if how.endswith("PIP_INDEX_URL"):
            done = run(
                "ensure",
                "adaptor-a==1.0",
                "--repo",
                repo,
                "--installer",
                installer,
                env=isolated_env(PIP_INDEX_URL=with_password),
            )
            assert done.returncode == 0, done.stderr
        else:
            done = subprocess.run(
                [sys.executable, str(script), str(repo), installer, how],
                env=isolated_env(TEST_INDEX=with_password, PIP_INDEX_URL=index.simple),
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            assert done.returncode == 0 and done.stdout.strip() == "installed", done.stderr
    finally:
        watcher.stop.set()
        watcher.join()
    assert watcher.installer_env, "the installer was never seen running"
    assert SECRET in watcher.installer_env[0]  # it got the credentials, in its environment
    assert watcher.leaks == []
    assert SECRET not in done.stdout + done.stderr


# ---- names, versions and URLs that cannot be used -------------------------------------------------------------------

LONG_NAME = "a" + "b" * 249
LONG_LOCAL = "adaptor-a==1.0+" + "x" * 240


@pytest.mark.parametrize(
    "spec", [f"{LONG_NAME}==1.0", LONG_NAME, f"{LONG_NAME}>=1", LONG_LOCAL, "adaptor-a[" + "e" * 200 + "]==1.0"]
)
def test_names_and_versions_too_long_for_a_file_name_are_refused_before_anything_is_written(
    spec: str, repo: Path, index: IndexServer
) -> None:
    line = _one_error(run(*ensure_args(repo, index.simple, spec), "--no-lock"), 2)
    assert "fit in a file name" in line and len(line) < 400, line
    assert not repo.exists()
    assert index.pages == {} and sum(index.started.values()) == 0  # nobody asked the index either


def test_a_long_name_is_refused_by_the_api_too(tmp_path: Path) -> None:
    from repoinstall import InvalidRequirement, Repo

    with Repo(tmp_path / "repo") as store, pytest.raises(InvalidRequirement, match="fit in a file name"):
        store.ensure(LONG_LOCAL)
    assert not (tmp_path / "repo").exists()


@pytest.mark.parametrize("password", ["se/cret", "se#cret", "se?cret", "s/e#c?r"])
@pytest.mark.parametrize("spec", ["adaptor-a==1.0", "adaptor-a"])
@pytest.mark.parametrize("where", ["--index-url", "PIP_INDEX_URL", "--extra-index-url"])
def test_an_index_url_with_an_unencoded_password_is_one_line_without_the_password(
    password: str, spec: str, where: str, repo: Path, index: IndexServer
) -> None:
    url = index.simple.replace("http://", f"http://deploy:{SECRET}{password}@")
    if where == "PIP_INDEX_URL":
        done = run("ensure", spec, "--repo", repo, env=isolated_env(PIP_INDEX_URL=url))
    else:
        done = run("ensure", spec, "--repo", repo, where, url)
    line = _one_error(done, 2)
    assert "must be percent-encoded" in line and "****@127.0.0.1" in line, line
    assert SECRET not in done.stderr + done.stdout and "cret" not in done.stderr
    assert not (repo / "trees").exists()


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://deploy:pw@127.0.0.1/simple", "not an http, https or file URL"),
        ("http://127.0.0.1:99999/simple", "Port out of range"),
        ("http://127.0.0.1:x1/simple", "port is not a number"),
        ("http:///simple", "has no host"),
        ("http://deploy:pw@[::1/simple", "Invalid IPv6 URL"),
    ],
)
def test_an_unreadable_index_url_is_one_line(url: str, reason: str, repo: Path) -> None:
    done = run("ensure", "adaptor-a", "--repo", repo, "--index-url", url)
    line = _one_error(done, 2)
    assert reason in line and ":pw@" not in line, line


# ---- requirement and constraint files -------------------------------------------------------------------------------


@pytest.fixture
def specials(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    big = tmp_path / "big.txt"
    with big.open("wb") as handle:
        handle.truncate(17 * 1024 * 1024)  # sparse: 17 MiB of nothing, past the cap
    nested = tmp_path / "nested.txt"
    nested.write_text("adaptor-a==1.0\n-r /dev/zero\n")
    directory = tmp_path / "a-directory"
    directory.mkdir()
    return {"fifo": fifo, "device": Path("/dev/zero"), "big": big, "nested": nested, "directory": directory}


@pytest.mark.parametrize(
    ("which", "reason"),
    [
        ("fifo", "not a regular file"),
        ("device", "not a regular file"),
        ("big", "larger than 16 MiB"),
        ("nested", "not a regular file"),
        ("directory", "is a directory"),
    ],
)
@pytest.mark.parametrize("option", ["-r", "-c"])
def test_requirement_and_constraint_files_must_be_bounded_regular_files(
    which: str, reason: str, option: str, specials: dict[str, Path], repo: Path, index: IndexServer
) -> None:
    if option == "-c" and which == "nested":
        pytest.skip("constraints files are not followed into -r (pip reads them)")
    args = ["-r", str(specials[which])] if option == "-r" else ["adaptor-a==1.0", "-c", str(specials[which])]
    done = run("ensure", *args, "--repo", repo, "--no-index", "-f", index.url, timeout=60)  # a hang fails here
    line = _one_error(done, 2)
    assert reason in line, line
    assert not repo.exists()


def test_a_requirements_file_with_a_utf8_bom_is_read_as_pip_reads_it(
    repo: Path, index: IndexServer, tmp_path: Path
) -> None:
    listing = tmp_path / "requirements.txt"
    listing.write_bytes(b"\xef\xbb\xbfadaptor-a==1.0\nadaptor-d==1.0\n")
    done = run("ensure", "-r", listing, "--repo", repo, "--no-index", "-f", index.url, "--json")
    assert done.returncode == 0, done.stderr
    assert [p["name"] for p in document(done.stdout)["packages"]] == ["adaptor-a", "adaptor-d"]


# ---- installer temporaries ------------------------------------------------------------------------------------------


def test_installer_temporary_files_stay_in_the_staging_dir(
    installer: str, repo: Path, index: IndexServer, tmp_path: Path
) -> None:
    """A killed installer leaves its temporaries in the staging dir, where gc finds them, never in $TMPDIR."""
    ours = tmp_path / "tmpdir"
    ours.mkdir()
    env = isolated_env(TMPDIR=str(ours), REPOINSTALL_INSTALLER=installer)
    index.delays["slow_pkg"] = 30.0
    pod = start(*ensure_args(repo, index.url, "slow-pkg==1.0"), env=env)
    try:
        wait_until(
            lambda: any(p.name == "tmp" and any(p.iterdir()) for p in (repo / "staging").rglob("tmp")),
            timeout=60,
            what="the installer writing its temporaries into the staging dir",
        )
        wait_until(lambda: index.started["slow_pkg-1.0-py3-none-any.whl"] > 0, timeout=60, what="the download")
    finally:
        signal_group(pod, signal.SIGKILL)
        finish(pod)
    assert list(ours.iterdir()) == []
    staged = next((repo / "staging").rglob("owner.json")).parent
    assert any((staged / "tmp").iterdir())
    gone = run("gc", "--repo", repo, "--older-than", "0", *LOCK)
    assert gone.returncode == 0 and not staged.exists(), gone.stdout

    index.delays.clear()
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0"), env=env)
    assert done.returncode == 0, done.stderr
    tree = Path(document(done.stdout)["packages"][0]["path"])
    assert not (tree / "tmp").exists() and not (tree / "requirements.txt").exists()
    assert list(ours.iterdir()) == []
    assert not any((repo / "staging").rglob("owner.json"))


# ---- repo paths ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["ensure", "verify", "list", "locks", "gc", "doctor", "path"])
def test_an_empty_or_root_repo_path_is_refused(command: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    args = [command, *(["adaptor-a==1.0"] if command in ("ensure", "path") else [])]
    env = isolated_env(HOME=str(home), XDG_DATA_HOME=str(home / "data"))
    assert "path is empty" in _one_error(run(*args, "--repo", "", env=env), 2)
    assert "path is empty" in _one_error(run(*args, env={**env, "REPOINSTALL_REPO": ""}), 2)
    assert "filesystem root" in _one_error(run(*args, "--repo", "/", env=env), 2)
    assert not home.exists()  # the per-user default repo was not used instead


@pytest.mark.parametrize("command", ["verify", "list", "locks", "gc", "doctor"])
def test_reading_commands_on_a_path_that_is_not_a_repo_say_so_and_create_nothing(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    assert "does not exist" in _one_error(run(command, "--repo", missing), 2)
    assert not missing.exists()
    other = tmp_path / "someone-elses"
    other.mkdir()
    (other / "data.csv").write_text("1,2\n")
    assert "is not a repoinstall repo" in _one_error(run(command, "--repo", other), 2)
    assert sorted(p.name for p in other.iterdir()) == ["data.csv"]


def test_an_empty_directory_is_an_empty_repo(tmp_path: Path) -> None:
    empty = tmp_path / "fresh-volume"
    empty.mkdir()
    done = run("list", "--repo", empty, "--json")
    assert done.returncode == 0 and document(done.stdout)["trees"] == [], done.stderr


def test_list_leaves_out_a_tree_whose_directory_is_gone(repo: Path, index: IndexServer) -> None:
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0", "adaptor-d==1.0"))
    assert done.returncode == 0, done.stderr
    gone = Path(document(done.stdout)["packages"][0]["path"])
    os.rename(gone, repo / "elsewhere")
    listed = run("list", "--repo", repo, "--json")
    assert [t["name"] for t in document(listed.stdout)["trees"]] == ["adaptor-d"]


def test_a_repo_root_created_by_repoinstall_is_group_shared_like_everything_below(
    repo: Path, index: IndexServer
) -> None:
    done = subprocess.run(
        cli(*ensure_args(repo, index.url, "adaptor-a==1.0")),
        env=isolated_env(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        preexec_fn=lambda: os.umask(0o022),  # a container's usual umask
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(repo.stat().st_mode) == 0o2775
    assert stat.S_IMODE((repo / "trees").stat().st_mode) == 0o2775
    doctor = run("doctor", "--repo", repo, "--json")
    findings = json.loads(doctor.stdout)["findings"]
    assert not [f for f in findings if "group-writable" in f["consequence"]], findings


# ---- the last net ---------------------------------------------------------------------------------------------------


def test_a_bug_is_one_line_with_credentials_hidden_and_its_traceback_only_with_v(tmp_path: Path) -> None:
    """A fault planted in the running command (there is no other way to have a bug on purpose)."""
    planted = (
        "import sys, repoinstall._repo as r\n"
        "def broken(self, **kwargs):\n"
        "    raise RuntimeError('asked http://deploy:" + SECRET + "@127.0.0.1/simple and failed\\nsecond line')\n"
        "r.Repo.gc = broken\n"
        "from repoinstall._cli.app import main\n"
        "sys.argv = ['repoinstall', *sys.argv[1:]]\n"
        "main()\n"
    )
    (tmp_path / "repo" / "trees").mkdir(parents=True)

    def planted_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", planted, *args, "--repo", str(tmp_path / "repo")],
            env=isolated_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    done = planted_run("gc")
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "repoinstall: error: internal error: RuntimeError: asked http://****@127.0.0.1/simple and failed"
        " (run with -v for details)"
    ], done.stderr
    done = planted_run("gc", "-v")
    assert done.returncode == 1 and "Traceback" in done.stderr and SECRET not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("repoinstall: error: internal error: RuntimeError")


def test_an_unreadable_index_url_does_not_stop_a_present_tree(repo: Path, index: IndexServer) -> None:
    """The warm path asks no index, so a bad URL only matters once something must be installed."""
    done = run(*ensure_args(repo, index.url, "adaptor-a==1.0"))
    assert done.returncode == 0, done.stderr
    again = run("ensure", "adaptor-a==1.0", "--repo", repo, "--json", "--index-url", f"http://u:{SECRET}/x@h/simple")
    assert again.returncode == 0 and actions(again.stdout) == ["present"], again.stderr  # never asked: no error
