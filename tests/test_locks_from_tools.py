"""Lock files made by the real tools: ``pip lock`` (pip 26) and ``uv pip compile`` (``--format pylock.toml``, and
``--generate-hashes``) against pypiserver on 127.0.0.1, read for this interpreter. Hand-written and malformed
files: tests/unit/test_lockfile.py."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import isolated_env, run
from indexserver import IndexServer
from packaging.tags import sys_tags
from servers import PypiServer
from wheels import make_wheel

from repoinstall._lockfile.environment import Environment
from repoinstall._lockfile.hashed import hash_mode, is_hashed_requirements
from repoinstall._lockfile.read import forget, is_lock_file, read_lock
from repoinstall._requirements import read_requirements_file

#: This interpreter's best wheel tag: lk-dep has a wheel for it beside its py3-none-any one.
BEST = str(next(iter(sys_tags())))


@pytest.fixture(scope="module")
def pypi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PypiServer]:
    packages = tmp_path_factory.mktemp("lock-packages")
    make_wheel(packages, "lk-top", "1.0", requires=("lk-dep>=1", 'lk-win; sys_platform == "win32"'))
    make_wheel(packages, "lk-dep", "1.0")
    make_wheel(packages, "lk-dep", "1.0", tag=BEST)
    make_wheel(packages, "lk-win", "1.0")
    server = PypiServer(packages, tmp_path_factory.mktemp("lock-pypiserver"))
    yield server
    server.stop()


def _uv() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


def _made(tmp_path: Path, command: list[str]) -> None:
    done = subprocess.run(
        command, cwd=tmp_path, env=isolated_env(), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


def _sha256(pypi: PypiServer, filename: str) -> str:
    return "sha256:" + hashlib.sha256((pypi.packages / filename).read_bytes()).hexdigest()


@pytest.fixture
def locks(tmp_path: Path, pypi: PypiServer) -> Path:
    """pip's and uv's locks of ``lk-top`` in ``tmp_path``."""
    forget()
    (tmp_path / "in.txt").write_text("lk-top\n")
    index = ["--index-url", pypi.simple]
    pip_lock = [sys.executable, "-m", "pip", "lock", "--no-cache-dir", *index, "-r", "in.txt", "-o", "pylock.toml"]
    _made(tmp_path, pip_lock)
    compile_ = [_uv(), "pip", "compile", "--no-cache", "--quiet", *index, "in.txt"]
    _made(tmp_path, [*compile_, "--format", "pylock.toml", "-o", "pylock.uv.toml"])
    _made(tmp_path, [*compile_, "--universal", "--format", "pylock.toml", "-o", "pylock.universal.toml"])
    _made(tmp_path, [*compile_, "--generate-hashes", "-o", "requirements.txt"])
    _made(tmp_path, [*compile_, "--universal", "--generate-hashes", "-o", "universal.txt"])
    return tmp_path


def test_pip_and_uv_locks_install_the_same_here(locks: Path, pypi: PypiServer) -> None:
    best = f"lk_dep-1.0-{BEST}.whl"
    expected = [("lk-dep", "1.0", best, (_sha256(pypi, best),)), ("lk-top", "1.0", "lk_top-1.0-py3-none-any.whl", None)]
    keys = set()
    for name in ("pylock.toml", "pylock.uv.toml", "pylock.universal.toml"):
        path = str(locks / name)
        assert is_lock_file(path)
        lock = read_lock(path)
        assert lock.kind == "pylock" and lock.source == path
        found = [(p.name, p.version, p.filename, p.hashes) for p in lock.packages]
        assert [row[:3] for row in found] == [row[:3] for row in expected], name
        assert found[0][3] == expected[0][3]
        assert found[1][3] == (_sha256(pypi, "lk_top-1.0-py3-none-any.whl"),)
        assert all(p.url is not None and p.url.startswith(pypi.url) for p in lock.packages)
        keys.add(lock.key())
    assert len(keys) == 1  # pip's single-wheel lock, uv's and uv's universal one: one tree here


def test_the_universal_lock_installs_the_windows_only_dependency_on_windows(locks: Path) -> None:
    universal = str(locks / "pylock.universal.toml")
    windows = Environment.of({"sys_platform": "win32", "platform_system": "Windows"}, ["py3-none-any"])
    lock = read_lock(universal, environment=windows)
    assert [(p.name, p.filename) for p in lock.packages] == [
        ("lk-dep", "lk_dep-1.0-py3-none-any.whl"),
        ("lk-top", "lk_top-1.0-py3-none-any.whl"),
        ("lk-win", "lk_win-1.0-py3-none-any.whl"),
    ]
    assert lock.key() != read_lock(universal).key()


def test_uv_hashed_requirements_are_a_lock(locks: Path, pypi: PypiServer) -> None:
    requirements = str(locks / "requirements.txt")
    assert not is_lock_file(requirements)
    requested = read_requirements_file(requirements)
    assert is_hashed_requirements(requested) and hash_mode(requested)
    lock = read_lock(requirements)
    assert lock.kind == "hashed-requirements"
    assert [(p.name, p.version, p.filename, p.url) for p in lock.packages] == [
        ("lk-dep", "1.0", None, None),
        ("lk-top", "1.0", None, None),
    ]
    both = sorted(_sha256(pypi, f) for f in (f"lk_dep-1.0-{BEST}.whl", "lk_dep-1.0-py3-none-any.whl"))
    assert lock.packages[0].hashes == tuple(both)
    # The universal file's Windows-only line (a marker, and hashed) is skipped here, as pip skips it.
    universal = read_lock(str(locks / "universal.txt"))
    assert universal.key() == lock.key()
    assert "lk-win" in (locks / "universal.txt").read_text()


# ---- index lines in requirements files, as the tools write them ------------------------------------------------------
#
# Two index servers: A serves ix-shared 1.0 and ix-only-a, B serves ix-shared 2.0 and ix-only-b. pip.conf (a real file,
# PIP_CONFIG_FILE) names A as its index, or A and B as index and extra index. A file's --index-url replaces every
# index (pip.conf's extra one included), its --extra-index-url adds, and only for that file's trees: what pip does
# (each case is checked against pip itself), and what repoinstall did not do (it refused the lines, exit 2).
#
# Writers: uv 0.13.9 (`uv pip compile --emit-index-url`), pip 26.3 (its own reading of the same files), and
# pip-compile (pip-tools 7.6.2, in a venv of its own that .ci/run makes; a file as it writes them is also written by
# hand here, to test the lines one at a time).


@pytest.fixture(scope="module")
def two_indexes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IndexServer, IndexServer]]:
    a, b = tmp_path_factory.mktemp("index-a"), tmp_path_factory.mktemp("index-b")
    make_wheel(a, "ix-shared", "1.0")
    make_wheel(a, "ix-only-a", "1.0")
    make_wheel(b, "ix-shared", "2.0")
    make_wheel(b, "ix-only-b", "1.0")
    servers = IndexServer(a).start(), IndexServer(b).start()
    yield servers
    for server in servers:
        server.stop()


def _pip_conf(tmp_path: Path, index: str, extra: str | None = None) -> dict[str, str]:
    """An environment whose pip.conf (a real file) names ``index`` and, if given, ``extra``."""
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nindex-url = {index}\n" + (f"extra-index-url = {extra}\n" if extra else ""))
    return isolated_env(PIP_CONFIG_FILE=str(conf))


def _pip_installs(requirements: Path, env: dict[str, str]) -> bool:
    """Whether pip itself finds everything ``requirements`` asks for, reading the file and pip.conf as it does."""
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps", "-r"]
    done = subprocess.run(
        [*command, str(requirements)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    return done.returncode == 0


def _ensure(repo: Path, env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return run("ensure", "--repo", repo, "--json", *args, env=env)


def _installed(done: subprocess.CompletedProcess[str]) -> list[tuple[str, str]]:
    assert done.returncode == 0, done.stderr
    return sorted((p["name"], p["version"]) for p in json.loads(done.stdout)["packages"])


def test_a_files_index_url_replaces_pip_conf_and_its_extra_index_adds(
    tmp_path: Path, two_indexes: tuple[IndexServer, IndexServer], installer: str
) -> None:
    a, b = two_indexes
    repo = tmp_path / "repo"
    env = _pip_conf(tmp_path, a.simple)
    # A plain requirements file's unpinned spec: repoinstall's own resolution asks B, not pip.conf's A.
    replacing = tmp_path / "replacing.txt"
    replacing.write_text(f"--index-url {b.simple}\nix-shared>=1\n")
    assert _pip_installs(replacing, env)
    assert _installed(_ensure(repo, env, "-r", replacing)) == [("ix-shared", "2.0")]
    # ... for that file's trees only: in one run, the same spec on the command line is pip.conf's (A: 1.0).
    both = _ensure(tmp_path / "other", env, "ix-shared>=1", "-r", replacing)
    assert _installed(both) == [("ix-shared", "1.0"), ("ix-shared", "2.0")]
    # --extra-index-url adds B to pip.conf's A: what either one alone lacks is found.
    adding = tmp_path / "adding.txt"
    adding.write_text(f"--extra-index-url {b.simple}\nix-only-a==1.0\nix-only-b==1.0\n")
    assert _pip_installs(adding, env)
    assert _installed(_ensure(repo, env, "-r", adding)) == [("ix-only-a", "1.0"), ("ix-only-b", "1.0")]


def test_a_files_index_url_drops_pip_confs_extra_index_too(
    tmp_path: Path, two_indexes: tuple[IndexServer, IndexServer], installer: str
) -> None:
    a, b = two_indexes
    repo = tmp_path / "repo"
    env = _pip_conf(tmp_path, a.simple, extra=b.simple)
    merged, replaced = tmp_path / "merged.txt", tmp_path / "replaced.txt"
    merged.write_text("ix-only-b==1.0\n")
    replaced.write_text(f"--index-url {a.simple}\nix-only-b==1.0\n")
    assert _pip_installs(merged, env) and not _pip_installs(replaced, env)  # pip replaces: B is gone
    done = _ensure(repo, env, "-r", replaced)
    assert done.returncode == 1, done.stderr
    assert "ix-only-b" in json.loads(done.stdout)["errors"][0]["error"]
    assert _installed(_ensure(repo, env, "-r", merged)) == [("ix-only-b", "1.0")]


def test_pip_lock_and_repoinstall_read_a_files_index_url_alike(
    tmp_path: Path, two_indexes: tuple[IndexServer, IndexServer]
) -> None:
    """pip lock (pip 26.3) resolves the same file, with the same pip.conf, to the version repoinstall chooses."""
    a, b = two_indexes
    env = _pip_conf(tmp_path, a.simple)
    (tmp_path / "in.txt").write_text(f"--index-url {b.simple}\nix-shared>=1\n")
    pip_lock = [sys.executable, "-m", "pip", "lock", "--no-cache-dir", "-r", "in.txt", "-o", "pylock.toml"]
    done = subprocess.run(pip_lock, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    forget()
    (locked,) = read_lock(str(tmp_path / "pylock.toml")).packages
    assert (locked.name, locked.version) == ("ix-shared", "2.0") and (locked.url or "").startswith(b.url)
    assert _installed(_ensure(tmp_path / "repo", env, "-r", tmp_path / "in.txt")) == [("ix-shared", "2.0")]
    # And the lock pip wrote installs as its one tree, from B, whatever pip.conf names.
    tree = _ensure(tmp_path / "repo", env, "-r", tmp_path / "pylock.toml")
    assert tree.returncode == 0, tree.stderr


def test_uv_pip_compile_emit_index_url_output_installs_from_its_index(
    tmp_path: Path, two_indexes: tuple[IndexServer, IndexServer], installer: str
) -> None:
    a, b = two_indexes
    (tmp_path / "in.txt").write_text("ix-only-b\n")
    compile_ = [_uv(), "pip", "compile", "--no-cache", "--quiet", "--index-url", b.simple, "in.txt"]
    _made(tmp_path, [*compile_, "--emit-index-url", "-o", "requirements.txt"])
    _made(tmp_path, [*compile_, "--emit-index-url", "--generate-hashes", "-o", "hashed.txt"])
    for name in ("requirements.txt", "hashed.txt"):
        assert f"--index-url {b.simple}" in (tmp_path / name).read_text()
    env = _pip_conf(tmp_path, a.simple)
    repo = tmp_path / "repo"
    assert _installed(_ensure(repo, env, "-r", tmp_path / "requirements.txt")) == [("ix-only-b", "1.0")]
    locked = _ensure(repo, env, "-r", tmp_path / "hashed.txt")
    assert locked.returncode == 0, locked.stderr
    (tree,) = json.loads(locked.stdout)["packages"]
    assert tree["name"].startswith("locked-ix-only-b-") and tree["action"] == "installed"


def _sha256_of(server: IndexServer, project: str) -> str:
    (path,) = server.files(project)
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _pip_compile_output(a: IndexServer, b: IndexServer, host: str) -> str:
    """What pip-compile (pip-tools 7.4) writes for ``ix-only-a`` and ``ix-only-b`` with ``--generate-hashes``, its
    pip.conf naming B as the index and A as an extra one: pip's index options copied into its output (the
    ``--index-url``, ``--extra-index-url`` and ``--trusted-host`` lines), then the pins."""
    return (
        "#\n"
        "# This file is autogenerated by pip-compile with Python 3.11\n"
        "# by the following command:\n"
        "#\n"
        "#    pip-compile --generate-hashes --output-file=requirements.txt requirements.in\n"
        "#\n"
        f"--index-url {b.simple}\n"
        f"--extra-index-url {a.simple}\n"
        f"--trusted-host {host}\n"
        "\n"
        "ix-only-a==1.0 \\\n"
        f"    --hash={_sha256_of(a, 'ix_only_a')}\n"
        "    # via -r requirements.in\n"
        "ix-only-b==1.0 \\\n"
        f"    --hash={_sha256_of(b, 'ix_only_b')}\n"
        "    # via -r requirements.in\n"
    )


def test_pip_compile_output_with_pip_conf_indexes_installs_where_pip_installs_it(
    tmp_path: Path, two_indexes: tuple[IndexServer, IndexServer], installer: str
) -> None:
    a, b = two_indexes
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(_pip_compile_output(a, b, "127.0.0.1"))
    env = _pip_conf(tmp_path, "http://127.0.0.1:9/simple")  # this pod's pip.conf: an index that is not there
    assert _pip_installs(requirements, env)
    repo = tmp_path / "repo"
    done = _ensure(repo, env, "-r", requirements)
    assert done.returncode == 0, done.stderr
    (tree,) = json.loads(done.stdout)["packages"]
    assert tree["name"].startswith("locked-ix-only-a-ix-only-b-")
    # Hashed: its --trusted-host line is honoured as pip honours it (every artifact's hash is checked).


#: pip-tools' pip-compile, in the venv of its own .ci/run makes (.ci/requirements-piptools.txt).
PIP_COMPILE = Path(os.environ.get("REPOINSTALL_PIP_TOOLS", "/var/tmp/repoinstall-piptools")) / "bin" / "pip-compile"


def test_real_pip_compile_output_with_pip_conf_indexes_installs_where_pip_installs_it(
    tmp_path: Path, two_indexes: tuple[IndexServer, IndexServer]
) -> None:
    """pip-compile itself (pip-tools 7.6.2), its pip.conf naming B as the index and A as an extra one and trusting
    127.0.0.1, writes those index options into its hashed output; a pod whose own pip.conf names an index that is
    not there installs that file's tree from B and A, as pip does."""
    if not PIP_COMPILE.exists():
        if os.environ.get("REPOINSTALL_REQUIRE_FUSE") == "1":
            pytest.fail(f"{PIP_COMPILE} is missing: .ci/run installs pip-tools there")
        pytest.skip(f"needs pip-tools at {PIP_COMPILE} (.ci/run installs it)")
    a, b = two_indexes
    conf = tmp_path / "writer.conf"
    conf.write_text(f"[global]\nindex-url = {b.simple}\nextra-index-url = {a.simple}\ntrusted-host = 127.0.0.1\n")
    (tmp_path / "requirements.in").write_text("ix-only-a\nix-only-b\n")
    written = subprocess.run(
        [str(PIP_COMPILE), "--generate-hashes", "--quiet", "--no-strip-extras", "--output-file=requirements.txt",
         "requirements.in"],
        cwd=tmp_path, env=isolated_env(PIP_CONFIG_FILE=str(conf)), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    requirements = tmp_path / "requirements.txt"
    text = requirements.read_text()
    assert f"--index-url {b.simple}" in text and f"--extra-index-url {a.simple}" in text, text
    assert "--trusted-host 127.0.0.1" in text and "--hash=sha256:" in text, text
    env = _pip_conf(tmp_path, "http://127.0.0.1:9/simple")  # this pod's pip.conf: an index that is not there
    assert _pip_installs(requirements, env)
    done = _ensure(tmp_path / "repo", env, "-r", requirements)
    assert done.returncode == 0, done.stderr
    (tree,) = json.loads(done.stdout)["packages"]
    assert tree["name"].startswith("locked-ix-only-a-ix-only-b-"), tree
    # The hand-written file of the test above names the same tree: pip-compile's output is what it says it is.
    hand = tmp_path / "hand.txt"
    hand.write_text(_pip_compile_output(a, b, "127.0.0.1"))
    again = _ensure(tmp_path / "repo", env, "-r", hand)
    assert again.returncode == 0 and json.loads(again.stdout)["packages"][0]["name"] == tree["name"], again.stdout


def test_a_trusted_host_line_in_an_unhashed_file_needs_the_command_line(
    tmp_path: Path, two_indexes: tuple[IndexServer, IndexServer]
) -> None:
    a, b = two_indexes
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"--index-url {b.simple}\n--trusted-host 127.0.0.1\nix-only-b==1.0\n")
    env = _pip_conf(tmp_path, a.simple)
    repo = tmp_path / "repo"
    refused = _ensure(repo, env, "-r", requirements)
    assert refused.returncode == 2 and not repo.exists(), refused.stderr
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith("repoinstall: error:")]
    assert "--trusted-host 127.0.0.1" in line and "on the command line" in line, line
    assert _installed(_ensure(repo, env, "-r", requirements, "--trusted-host", "127.0.0.1")) == [("ix-only-b", "1.0")]
    allowed = _ensure(repo, {**env, "REPOINSTALL_TRUSTED_HOST": "127.0.0.1"}, "-r", requirements)
    assert _installed(allowed) == [("ix-only-b", "1.0")]


# ---- a packaged project's own entry in uv export's pylock.toml -----------------------------------------------------


def test_uv_export_of_a_packaged_project_is_refused_naming_the_flag_that_leaves_it_out(
    tmp_path: Path, pypi: PypiServer
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "lk-app"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = ["lk-dep"]\n\n'
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
    )
    _made(tmp_path, [_uv(), "lock", "--no-cache", "--quiet", "--default-index", pypi.simple])
    _made(tmp_path, [_uv(), "export", "--no-cache", "--quiet", "--format", "pylock.toml", "-o", "pylock.toml"])
    assert "editable = true" in (tmp_path / "pylock.toml").read_text()
    repo = tmp_path / "repo"
    refused = run("ensure", "--repo", repo, "-r", tmp_path / "pylock.toml")
    assert refused.returncode == 2 and not repo.exists(), refused.stderr
    assert "uv export --format pylock.toml --no-emit-project" in refused.stderr, refused.stderr
    # uv.lock's own hint names the command that makes a lock this reads: run exactly it.
    hint = run("ensure", "--repo", repo, "-r", tmp_path / "uv.lock")
    assert hint.returncode == 2
    command = hint.stderr.split("`")[1]
    assert command == "uv export --format pylock.toml --no-emit-project -o pylock.toml", hint.stderr
    _made(tmp_path, [_uv(), *command.split()[1:], "--no-cache", "--quiet"])
    forget()
    lock = read_lock(str(tmp_path / "pylock.toml"))
    assert [p.name for p in lock.packages] == ["lk-dep"]


def test_a_files_trusted_host_turns_tls_checks_off_only_where_allowed(tmp_path: Path, installer: str) -> None:
    """An index over TLS whose certificate nobody trusts (its own authority): the file's --trusted-host line lets
    repoinstall's resolution and pip or uv reach it, for a hashed file or a host the command line trusts."""
    from certs import make_certificates

    wheels = tmp_path / "tls-wheels"
    wheels.mkdir()
    wheel = make_wheel(wheels, "ix-tls", "1.0")
    server = IndexServer(wheels, tls=make_certificates(tmp_path / "tls").server_context(require_client=False)).start()
    env = {
        k: v for k, v in isolated_env().items() if k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE")
    }
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    try:
        plain, trusting, hashed = tmp_path / "plain.txt", tmp_path / "trusting.txt", tmp_path / "hashed.txt"
        plain.write_text(f"--index-url {server.simple}\nix-tls>=1\n")
        trusting.write_text(f"--index-url {server.simple}\n--trusted-host 127.0.0.1\nix-tls>=1\n")
        hashed.write_text(
            f"--index-url {server.simple}\n--trusted-host 127.0.0.1\nix-tls==1.0 --hash=sha256:{digest}\n"
        )
        untrusted = _ensure(tmp_path / "r1", env, "-r", plain)
        assert untrusted.returncode == 1 and "certificate is not trusted" in untrusted.stderr, untrusted.stderr
        refused = _ensure(tmp_path / "r2", env, "-r", trusting)
        assert refused.returncode == 2 and not (tmp_path / "r2").exists(), refused.stderr
        allowed = _ensure(tmp_path / "r3", env, "-r", trusting, "--trusted-host", "127.0.0.1")
        assert _installed(allowed) == [("ix-tls", "1.0")]
        locked = _ensure(tmp_path / "r4", env, "-r", hashed)
        assert locked.returncode == 0, locked.stderr
        assert json.loads(locked.stdout)["packages"][0]["name"].startswith("locked-ix-tls-")
    finally:
        server.stop()
