from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "support"))

# A suite started in the background of a script (`cmd &`) inherits SIGINT ignored, and so would every process it
# starts: the Ctrl-C tests would then test nothing. Python's own handler here, so children start with the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import helpers
from indexserver import IndexServer
from wheels import make_broken_wheel, make_wheel

from repoinstall._options import INSTALLERS

#: tests/nfs runs inside the qemu guest, started by tests/test_nfs.py, never directly on the host.
collect_ignore = [] if os.environ.get("REPOINSTALL_NFS") else ["nfs"]


@pytest.fixture(scope="session")
def _user_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's own user cache (the environment tags and the lock trees repoinstall remembers per user), so
    that no test reads or leaves anything in this machine's ``~/.cache``."""
    return tmp_path_factory.mktemp("user-cache")


@pytest.fixture(autouse=True)
def _isolated_pip(monkeypatch: pytest.MonkeyPatch, _user_cache: Path) -> Iterator[None]:
    """In-process API calls read pip's configuration too: give them none of this machine's."""
    from repoinstall._pipconfig import forget_settings

    for key in [k for k in os.environ if k.startswith(("PIP_", "UV_", "REPOINSTALL_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    # The tools of this environment first (uv, python): the same ones an activated venv would give.
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    monkeypatch.setenv("NETRC", os.devnull)
    monkeypatch.setenv("XDG_CACHE_HOME", str(_user_cache))
    forget_settings()
    yield
    forget_settings()


@pytest.fixture(params=INSTALLERS)
def installer(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test once per installer backend: the CLI processes it starts get ``REPOINSTALL_INSTALLER``."""
    helpers.INSTALLER = request.param
    yield request.param
    helpers.INSTALLER = None


@pytest.fixture(scope="session")
def wheel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Small real wheels: several versions, a dependency chain, an extra, a slow one and a broken one."""
    directory = tmp_path_factory.mktemp("wheels")
    for version in ("1.0", "1.1", "2.0"):
        make_wheel(directory, "adaptor-a", version)
    make_wheel(directory, "adaptor-b", "1.0", requires=("dep-c>=1.0",))
    make_wheel(directory, "dep-c", "1.0")
    make_wheel(directory, "adaptor-x", "1.0", extras={"fast": ("dep-c>=1.0",)})
    make_wheel(directory, "slow-pkg", "1.0", payload=4096)
    make_wheel(directory, "needs-missing", "1.0", requires=("not-on-the-index>=1",))
    make_broken_wheel(directory, "broken-pkg", "1.0")
    make_wheel(directory, "big-pkg", "1.0", payload=3 << 20, incompressible=True)
    for letter in "defgh":
        make_wheel(directory, f"adaptor-{letter}", "1.0")
    return directory


@pytest.fixture
def index(wheel_dir: Path) -> Iterator[IndexServer]:
    """A real HTTP package server on 127.0.0.1 serving the wheels as a find-links page."""
    server = IndexServer(wheel_dir).start()
    yield server
    server.stop()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return tmp_path / "repo"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from chaos import REPORTS
    from vm import REPORTS as GUESTS

    for table in REPORTS:
        terminalreporter.write_sep("-", "chaos: installs per tree (allowed = 1 + kills and pauses that hit its holder)")
        terminalreporter.write_line(table)
    if GUESTS:
        terminalreporter.write_sep("-", "kernel NFS guests")
        for line in GUESTS:
            terminalreporter.write_line(line)
