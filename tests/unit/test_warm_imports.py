"""What a warm ``repoinstall ensure`` (everything asked for installed) imports beyond ``import typer``: json for
the records, packaging.version, and the few modules of ours that check a tree. No index client, lock, installer,
progress display or logging; and what it imported is frozen, out of the cyclic collector's way. bench/warm.py
times it; no timing is asserted here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from packaging.version import Version

from repoinstall._disk import manifest
from repoinstall._disk.identity import TreeId, environment_tag
from repoinstall._disk.layout import Layout

#: Every module of ours the warm CLI may import: the command line, the facade, what an ensure decides (the check of
#: what is present among it) and the lock-free check.
WARM = {
    "repoinstall",
    "repoinstall._choose",
    "repoinstall._cli",
    "repoinstall._cli.app",
    "repoinstall._cli.options",
    "repoinstall._ensuring",
    "repoinstall._errors",
    "repoinstall._log",
    "repoinstall._options",
    "repoinstall._redact",
    "repoinstall._repo",
    "repoinstall._requirements",
    "repoinstall._results",
    "repoinstall._disk",
    "repoinstall._disk.check",
    "repoinstall._disk.envtag",
    "repoinstall._disk.fs",
    "repoinstall._disk.identity",
    "repoinstall._disk.layout",
    "repoinstall._disk.manifest",
    "repoinstall._disk.metadata",
    "repoinstall._lock.filelock_rw",
    "repoinstall._disk.repoformat",
    "repoinstall._version",
}
#: Besides typer's own imports (and click's, which it loads as it parses): records are JSON, versions PEP 440,
#: our modules' ``from __future__ import annotations``, and the built-in gc (main() freezes what was loaded).
OTHERS = {
    *("json", "json.decoder", "json.encoder", "json.scanner", "_json"),
    *("packaging", "packaging.version"),
    *("__future__", "gc"),
    # The test's own entry (it counts frozen objects at exit), and the store's statx reader (struct, stdlib): named
    # here because typer, whose imports the comparison subtracts, may or may not load them in a given release.
    *("atexit", "struct", "_struct"),
}


def _run(*argv: str) -> tuple[set[str], str]:
    """The modules a Python run imported, and its output."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, check=True)
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    return {line.rpartition("|")[2].strip() for line in lines[1:]}, done.stdout  # the first is the header


def _installed(root: Path, count: int) -> list[str]:
    """``count`` recorded trees whose METADATA names them: what the warm check reads."""
    layout = Layout(root)
    pins = []
    for index in range(count):
        tid = TreeId(environment_tag(), f"warm-{index}", Version("1.0"))
        dist_info = Path(layout.tree_path(tid), f"warm_{index}-1.0.dist-info")
        dist_info.mkdir(parents=True)
        (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: warm-{index}\nVersion: 1.0\n")
        manifest.write(layout, tid, manifest.TreeEntry.new(tid, tid.pin, dist_info.name, [], "pip", "24.0"))
        pins.append(tid.pin)
    layout.close()
    return pins


def test_a_warm_ensure_imports_little_beyond_typer(tmp_path: Path) -> None:
    pins = _installed(tmp_path / "repo", 3)
    # As the console script runs it (python -m would add runpy and __main__), saying at exit how many objects
    # the collector had been told to leave alone.
    entry = "import atexit, gc; atexit.register(lambda: print(gc.get_freeze_count())); "
    entry += "from repoinstall._cli.app import main; main()"
    cli, said = _run("-c", entry, "ensure", "--repo", str(tmp_path / "repo"), *pins)
    *lines, frozen = said.splitlines()
    assert [line.split()[:2] for line in lines] == [["present", pin] for pin in pins]  # warm indeed
    assert int(frozen) > 10_000  # what was imported is frozen: the collector never scans it again
    typer_alone, _ = _run("-c", "import typer")
    ours = {name for name in cli if name.partition(".")[0] == "repoinstall"}
    assert "repoinstall._cli.app" in ours and ours <= WARM, sorted(ours - WARM)
    # packaging.version's own private helpers differ by release (packaging 25 loads _structures): part of it.
    private = ("typer.", "click.", "packaging._")
    beyond = {name for name in cli - typer_alone - ours if not name.startswith(private)}
    assert beyond <= OTHERS, sorted(beyond - OTHERS)
    for heavy in ("httpx", "httpcore", "filelock", "pip", "rich", "logging", "concurrent", "asyncio", "ctypes"):
        assert heavy not in cli, heavy
