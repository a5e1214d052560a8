"""The documentation: the site builds strict, the committed CLI reference is the code's, and every shell and Python
block in docs/ and README.md is run here or marked as an illustration with a reason (docs/project/testing.md).

The pages' run blocks run as a reader would type them, in a sandbox of their own: a temporary HOME and working
directory, and an index on 127.0.0.1 (``PIP_INDEX_URL``) serving the real wheels of the packages they name
(.ci/requirements-docwheels.txt) beside wheels of this environment's own dependencies, so getting started installs
repoinstall from a checkout into a fresh venv with nothing but that index; their output blocks must be what they
print."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from indexserver import IndexServer
from registry import registry
from wheels import wheels_of_installed

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
#: The one command that rewrites the CLI reference from the typer app.
CLI_COMMAND = "python -m typer repoinstall._cli.app utils docs --name repoinstall --output docs/reference/cli.md"
#: Blocks of these languages are examples a reader may run.
RUNNABLE = {"sh", "bash", "shell", "console", "python", "py", "pycon"}
MARK = re.compile(r"<!-- docs-test: (run|illustration: (?P<reason>.*\S.*)|covered by (?P<test>\S+)) -->")
#: The real wheels of the packages the run examples name (six, attrs, python-dateutil), pinned with their hashes in
#: .ci/requirements-docwheels.txt; .ci/run downloads them, hash-checked, to REPOINSTALL_DOC_WHEELS.
DOC_WHEELS = Path(os.environ.get("REPOINSTALL_DOC_WHEELS", "/var/tmp/repoinstall-docwheels"))
DOC_PINS = dict(
    re.findall(r"^([a-z][a-z0-9-]*)==(\S+)", (ROOT / ".ci" / "requirements-docwheels.txt").read_text(), re.M)
)
#: CI: missing wheels fail the examples instead of skipping them (a skip would hide a missing download step).
REQUIRED = os.environ.get("REPOINSTALL_REQUIRE_FUSE") == "1"
#: The registry a page names, a placeholder: its run blocks talk to a registry on 127.0.0.1 instead (plain HTTP).
REGISTRY = "registry.example.com"
#: Marks a ``text`` block on a run page as what its run blocks print: each of its lines is a line they print.
OUTPUT = "<!-- docs-test: output -->"
#: What differs between the reader's machine and the test's in an output block's line, and what it may be there:
#: the home and working directory, the environment tag, the registry's host, digests (an image's config names its
#: environment), the Python and pip versions, timings and dates. doctor's findings differ too: an ``ok`` line of
#: doctor's is checked up to its check's name.
VOLATILE = {
    r"/home/me(?:/job)?": r"/\S+",
    r"cp3\d+-cp3\d+(?:-[a-z0-9_]+)?": r"cp3\d+-cp3\d+(?:-[a-z0-9_]+)?",
    re.escape(REGISTRY): r"127\.0\.0\.1:\d+",
    r"sha256:[0-9a-f]{64}": r"sha256:[0-9a-f]{64}",
    r"python ?3\.\d+": r"python ?3\.\d+",
    r"(?<=^pip )\d+(?:\.\d+)+": r"\d+(?:\.\d+)+",
    r"\(\d+\.\ds, \d+\.\d MB": r"\(\d+\.\ds, \d+\.\d MB",
    r"waited \d+\.\ds": r"waited \d+\.\ds",
    r"bytes, \d+\.\ds\)": r"bytes, \d+\.\ds\)",
    r"\d{4}-\d\d-\d\d \d\d:\d\d(?!:)": r"\d{4}-\d\d-\d\d \d\d:\d\d",
}
#: The pages whose run blocks this file runs; getting started first: it makes the venv the others use.
RUN_PAGES = [
    "getting-started.md", "how-to/lock-files.md", "how-to/operating.md", "how-to/worker.md", "how-to/oci.md",
]  # fmt: skip


class Block(NamedTuple):
    page: str
    line: int
    language: str
    code: str
    mark: str | None


def _pages() -> list[Path]:
    """The Markdown a reader reads; not the generated CLI reference, whose blocks are usage synopses."""
    generated = DOCS / "reference" / "cli.md"
    return [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if p != generated and "_build" not in p.parts)]


def _name(page: Path) -> str:
    return page.relative_to(DOCS).as_posix() if page.is_relative_to(DOCS) else page.name


def blocks(page: Path) -> Iterator[Block]:
    """Each fenced block of a Markdown page, with the docs-test mark on the line before it, if any."""
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = re.match(r"^(\s*)(`{3,}|~{3,})\s*([\w{}-]*)", lines[index])
        if not opening:
            index += 1
            continue
        fence, language = opening.group(2), opening.group(3)
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip().startswith(fence))
        before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        mark = MARK.search(before)
        code = "\n".join(line.removeprefix(opening.group(1)) for line in lines[index + 1 : end])
        shown = OUTPUT if before.strip() == OUTPUT else None
        yield Block(_name(page), index + 1, language, code + "\n", mark.group(0) if mark else shown)
        index = end + 1


def test_every_example_is_run_or_an_illustration() -> None:
    wrong = []
    for page in _pages():
        for block in blocks(page):
            where = f"{block.page}:{block.line}"
            if block.mark == OUTPUT and block.page not in RUN_PAGES:
                wrong.append(f"{where}: an output block on {block.page}, which tests/test_docs.py does not run")
            if block.language not in RUNNABLE:
                continue
            found = MARK.search(block.mark or "")
            if found is None:
                wrong.append(f"{where}: no <!-- docs-test: run|illustration: REASON|covered by TEST --> mark")
            elif found.group(1) == "run" and block.page not in RUN_PAGES:
                wrong.append(f"{where}: marked run, but {block.page} is not among the pages tests/test_docs.py runs")
            elif found.group("test"):
                test = ROOT / found.group("test")
                named = re.findall(r"[\w/.-]+\.py\b", block.code)
                if not test.is_file() or any(n not in test.read_text() for n in named):
                    wrong.append(f"{where}: {found.group('test')} does not run what the block names ({named})")
    assert not wrong, "\n".join(wrong)


#: Real releases the illustrations name beyond the run examples' pins (checked by hand on PyPI).
ILLUSTRATED = {"pandas": "2.2.3"}
#: Names that are plainly not packages: a spec that must fail, a lock's or a set's tree.
PLACEHOLDER = re.compile(r"nope|locked-|together-")


def test_the_examples_name_real_releases() -> None:
    """Every ``name==version`` in a block names a real release: a run block's is pinned with its hash in
    .ci/requirements-docwheels.txt, which is what the examples get from the index on 127.0.0.1 (and a reader from
    PyPI); another block's is pinned there too, or in ILLUSTRATED, or is plainly a placeholder."""
    wrong = []
    for page in _pages():
        for block in blocks(page):
            run = block.mark is not None and "docs-test: run" in block.mark
            for name, version in re.findall(r"(?<![\w.-])([A-Za-z][\w.-]*)==([\w.]+)", block.code):
                pinned = DOC_PINS.get(name.lower()) == version
                if pinned or (not run and (ILLUSTRATED.get(name.lower()) == version or PLACEHOLDER.match(name))):
                    continue
                where = f"{block.page}:{block.line}: {name}=={version}"
                wrong.append(
                    f"{where} is not pinned in .ci/requirements-docwheels.txt" + ("" if run else " or ILLUSTRATED")
                )
    assert not wrong, "\n".join(wrong)


def test_the_site_builds_strict(tmp_path: Path) -> None:
    """Warnings are errors (-W), references must resolve (-n): a broken link or anchor, a page outside the table of
    contents, a docstring reference to nothing fails here."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html", DOCS, tmp_path / "html"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    assert (tmp_path / "html" / "reference" / "api.html").is_file()
    print(f"strict build: {time.monotonic() - started:.1f} s")


def test_the_cli_reference_is_the_codes(tmp_path: Path) -> None:
    generated = tmp_path / "cli.md"
    command = [sys.executable, *CLI_COMMAND.split()[1:-1], str(generated)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    committed = (DOCS / "reference" / "cli.md").read_text()
    assert generated.read_text() == committed, f"docs/reference/cli.md is not what the code says; run: {CLI_COMMAND}"


# The examples, run.


def doc_wheels() -> list[Path]:
    """The pinned wheels in the cache, one per pin, by the exact name and version pinned; a missing one skips the
    examples with the command that downloads it (fails them in CI)."""
    found, missing = [], []
    for name, version in sorted(DOC_PINS.items()):
        wheel = sorted(DOC_WHEELS.glob(f"{name.replace('-', '_')}-{version}-*.whl"))
        if wheel:
            found.append(wheel[0])
        else:
            missing.append(f"{name}=={version}")
    if missing:
        reason = f"no wheel of {', '.join(missing)} in {DOC_WHEELS} (bash .ci/run downloads them)"
        if REQUIRED:
            pytest.fail(f"the documentation's examples are required here but cannot run: {reason}")
        pytest.skip(reason)
    return found


@pytest.fixture(scope="module")
def docs_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    """The real wheels the examples name, and this environment's own wheels of what installing repoinstall from a
    checkout needs (its dependencies, its build backend, a pip that has ``pip lock``)."""
    wheels = tmp_path_factory.mktemp("docs-wheels")
    built = wheels_of_installed(wheels, "filelock", "packaging", "httpx", "typer", "rich", "hatchling", "pip")
    for wheel in doc_wheels():
        # A wheel of this environment by the same name would be a second, rebuilt candidate for the examples.
        assert not any(b.name.split("-")[0] == wheel.name.split("-")[0] for b in built), wheel.name
        shutil.copy2(wheel, wheels / wheel.name)
    server = IndexServer(wheels)
    server.json = False  # the pip a new venv starts with (23) misreads PEP 714 metadata in JSON pages
    server.start()
    yield server
    server.stop()


def shown_lines(page: str) -> list[tuple[str, re.Pattern[str]]]:
    """Each line of the page's output blocks, with the pattern a line its run blocks print must match."""
    volatile = [(re.compile(found), allowed) for found, allowed in VOLATILE.items()]
    shown = []
    for block in blocks(DOCS / page):
        if block.mark != OUTPUT:
            continue
        for line in block.code.splitlines():
            doctor = re.match(r"ok {4}[^:]+: ", line)
            text, rest = (doctor.group(0), ".*") if doctor else (line, "")
            parts, at = [], 0
            spans = sorted((m.start(), -m.end(), allowed) for found, allowed in volatile for m in found.finditer(text))
            for start, negative_end, allowed in spans:
                if start < at:
                    continue  # inside a part already replaced (the longest match at a place is taken)
                parts += [re.escape(text[at:start]), allowed]
                at = -negative_end
            shown.append((line, re.compile("^" + "".join(parts) + re.escape(text[at:]) + rest + "$", re.M)))
    return shown


def check_shown(page: str, done: subprocess.CompletedProcess[str]) -> None:
    """The page's output blocks show what its run blocks printed (on stdout or stderr), line by line."""
    printed = done.stdout + "\n" + done.stderr
    missing = [line for line, pattern in shown_lines(page) if not pattern.search(printed)]
    assert not missing, f"{page} shows lines its examples did not print:\n" + "\n".join(missing) + "\n---\n" + printed


def _script(page: str, registry_host: str | None = None) -> str:
    """The page's run blocks as one bash script: shell verbatim, Python through the venv's interpreter; the
    placeholder registry's name replaced by ``registry_host``."""
    parts = []
    for block in blocks(DOCS / page):
        if block.mark is None or "docs-test: run" not in block.mark:
            continue
        parts.append(f"echo '### {page}:{block.line}' >&2")
        if block.language.startswith("py"):
            parts.append(f"python - <<'PYTHON_BLOCK'\n{block.code}PYTHON_BLOCK")
        else:
            parts.append(block.code)
    script = "\n".join(parts)
    return script.replace(REGISTRY, registry_host) if registry_host else script


def _run(
    page: str, home: Path, cwd: Path, index: IndexServer, path: str, registry_host: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "REPOINSTALL_", "VIRTUAL_ENV"))}
    if registry_host:
        env["REPOINSTALL_PLAIN_HTTP"] = "1"
    env.update(
        HOME=str(home), PATH=path, PIP_INDEX_URL=index.simple, UV_INDEX_URL=index.simple, UV_NO_CONFIG="1",
        PIP_CONFIG_FILE=os.devnull, NETRC=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1", XDG_CACHE_HOME=str(home / ".cache"),
    )  # fmt: skip
    env.pop("XDG_DATA_HOME", None)
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _script(page, registry_host)], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=600, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory, docs_index: IndexServer) -> Path:
    """Getting started, run from a checkout into a fresh venv: the venv's bin directory, for the other pages."""
    home = tmp_path_factory.mktemp("home")
    checkout = tmp_path_factory.mktemp("checkout")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, checkout / name)
    shutil.copytree(ROOT / "repoinstall", checkout / "repoinstall", ignore=shutil.ignore_patterns("__pycache__"))
    python = Path(shutil.which("python3") or sys.executable).resolve().parent
    done = _run("getting-started.md", home, checkout, docs_index, f"{python}{os.pathsep}/usr/bin:/bin")
    assert done.returncode == 0, done.stderr[-4000:]
    check_shown("getting-started.md", done)
    assert "present    six==1.17.0" in done.stdout, done.stdout
    assert f"{home}/.local/share/repoinstall/repo/trees/" in done.stdout, done.stdout
    bin_dir = home / ".venvs" / "repoinstall" / "bin"
    assert (bin_dir / "repoinstall").is_file()
    return bin_dir


def test_getting_started_from_a_fresh_venv(started: Path) -> None:
    installed = subprocess.run([started / "python", "-m", "pip", "list"], capture_output=True, text=True, check=True)
    assert re.search(r"^repoinstall\s", installed.stdout, re.M), installed.stdout


@pytest.mark.parametrize("page", RUN_PAGES[1:])
def test_a_page_runs(page: str, started: Path, docs_index: IndexServer, tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()
    tools = Path(sys.executable).parent  # uv, for the lock-files page
    path = os.pathsep.join([str(started), str(tools), "/usr/bin", "/bin"])
    with contextlib.ExitStack() as stack:
        host = None
        if REGISTRY in _script(page):  # the OCI page: a real registry on 127.0.0.1
            if not shutil.which("docker-registry"):
                reason = "no docker-registry (bash .ci/run installs it)"
                if REQUIRED:
                    pytest.fail(f"{page} is required here but cannot run: {reason}")
                pytest.skip(reason)
            host = stack.enter_context(registry(tmp_path / "registry")).host
        done = _run(page, home, cwd, docs_index, path, host)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    check_shown(page, done)
