"""Never silent, and logs an operator can parse: on a terminal a batch ensure shows each phase live (while its
download is held back, so before its install ends); off a terminal each phase is one line with its duration; -q
silences it and --json's stdout stays one document; ``--log-format json`` writes one JSON object per line on
stderr, with the figures a log query selects on (a lock wait's seconds and holder, the exit code) and no
credential in any field."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pty
import re
import select
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import actions, cli, ensure_args, finish, isolated_env, run, start, wait_for_stderr, wait_until
from indexserver import IndexServer

BATCH = ("adaptor-b==1.0", "adaptor-d==1.0", "adaptor-e==1.0")
#: A phase's duration at the end of its line, as the text log writes it.
DURATION = re.compile(r"\(\d+\.\ds\)$")


def events(stderr: str) -> list[dict[str, Any]]:
    """Every stderr line, each one JSON object (a line that is not fails the test here)."""
    return [json.loads(line) for line in stderr.splitlines() if line.strip()]


def test_off_a_terminal_each_phase_of_a_batch_is_one_line_with_its_duration(repo: Path, index: IndexServer) -> None:
    args = [a for a in ensure_args(repo, index.url, *BATCH) if a != "--json"]
    done = run(*args)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    ran = [line for line in lines if re.search(r": (pip|uv) ran for ", line)]
    stored = [line for line in lines if re.search(r": stored \d+ distribution\(s\) \(", line)]
    compiled = [line for line in lines if ": compiled " in line]
    assert ran and stored and compiled, done.stderr
    assert all(DURATION.search(line) for line in ran + stored + compiled), done.stderr


def test_quiet_silences_progress_and_json_stdout_stays_one_document(repo: Path, index: IndexServer) -> None:
    quiet = run(*[a for a in ensure_args(repo, index.url, *BATCH) if a != "--json"], "-q")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    again = run(*ensure_args(repo, index.url, *BATCH[:2], "adaptor-f==1.0"), "--log-format", "json")
    assert again.returncode == 0, again.stderr
    assert actions(again.stdout) == ["present", "present", "installed"]  # stdout: one JSON document, nothing else
    assert events(again.stderr)[-1]["event"] == "ensure.done"


def test_json_log_lines_carry_each_events_name_tree_and_figures(repo: Path, index: IndexServer) -> None:
    done = run(*ensure_args(repo, index.url, *BATCH), "--log-format", "json")
    assert done.returncode == 0, done.stderr
    logged = events(done.stderr)
    assert all({"time", "level", "event", "tree", "message"} <= set(one) for one in logged), logged
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", one["time"]) for one in logged), logged
    named = {one["event"]: one for one in logged}
    assert {"installer.done", "store.done", "compile.done", "batch.done", "install.done"} <= set(named), logged
    assert isinstance(named["installer.done"]["seconds"], float) and named["installer.done"]["seconds"] >= 0
    assert isinstance(named["compile.done"]["files"], int)
    installed = [one for one in logged if one["event"] == "install.done"]
    assert sorted(one["tree"] for one in installed) == sorted(BATCH), installed
    assert all(one["action"] == "installed" and one["seconds"] >= 0 for one in installed), installed
    assert logged[-1]["event"] == "ensure.done" and logged[-1]["exit_code"] == 0, logged[-1]
    assert "log" not in {one["event"] for one in logged}, logged  # every message has its own event's name
    failed = run(*ensure_args(repo, index.url, "no-such-thing==1.0"), "--log-format", "json")
    assert failed.returncode == 1, failed.stderr
    (error,) = [one for one in events(failed.stderr) if one["event"] == "error"]
    assert error["level"] == "error" and error["exit_code"] == 1 and "no-such-thing" in error["reason"], error
    assert events(failed.stderr)[-1] == {**events(failed.stderr)[-1], "event": "ensure.done", "exit_code": 1}


def test_a_lock_wait_is_an_event_with_its_seconds_and_holder(repo: Path, index: IndexServer) -> None:
    # What the chart's LogQL query selects on (docs/how-to/kubernetes.md): lock.waited, its seconds and holder.
    index.holds["slow_pkg"] = hold = threading.Event()
    holder = start(*ensure_args(repo, index.url, "slow-pkg==1.0"))
    try:
        index.wait_for_download("slow_pkg")
        waiter = start(*ensure_args(repo, index.url, "slow-pkg==1.0"), "--log-format", "json")
        wait_for_stderr(waiter, '"event": "lock.wait"')
    finally:
        hold.set()
    assert finish(holder)[0] == 0
    code, _, err = finish(waiter)
    assert code == 0, err
    (waited,) = [one for one in events(err) if one["event"] == "lock.waited"]
    assert isinstance(waited["seconds"], float) and waited["seconds"] >= 0, waited
    assert f"pid {holder.pid}" in waited["holder"] and waited["outcome"] == "a peer finished", waited
    assert waited["lock"].startswith(str(repo)), waited
    assert events(err)[-1]["event"] == "ensure.done" and events(err)[-1]["exit_code"] == 0


def test_credentials_in_an_index_url_are_in_no_json_field(repo: Path, index: IndexServer) -> None:
    secret = "s3cr3tPW"
    url = index.url.replace("http://", f"http://deploy:{secret}@")
    args = [a for a in ensure_args(repo, url, *BATCH)]
    done = run(*args, "--log-format", "json", "-vv")
    assert done.returncode == 0, done.stderr
    logged = events(done.stderr)
    assert any(one["event"] == "installer.command" for one in logged), logged  # -vv: the URL is in its command
    assert secret not in done.stderr and secret not in json.dumps(logged), done.stderr
    assert any("****@127.0.0.1" in str(value) for one in logged for value in one.values()), logged


class Terminal:
    """A repoinstall process whose stderr is a pseudo-terminal (stdout a pipe): what it drew, escapes dropped."""

    def __init__(self, *args: str | Path) -> None:
        self.main, side = pty.openpty()
        env = isolated_env(TERM="xterm-256color", COLUMNS="200", LINES="40")
        self.proc = subprocess.Popen(
            cli(*args), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=side, text=True
        )
        os.close(side)
        self.seen: list[bytes] = []

    def drawn(self) -> str:
        while select.select([self.main], [], [], 0)[0]:
            try:
                chunk = os.read(self.main, 65536)
            except OSError:  # EIO: the process closed its end
                break
            if not chunk:
                break
            self.seen.append(chunk)
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(self.seen).decode("utf-8", "replace"))

    def finish(self) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=180)
        with contextlib.suppress(OSError):
            self.drawn()
        os.close(self.main)
        return self.proc.returncode, out


def test_a_batch_on_a_terminal_shows_its_phases_live_before_its_install_ends(repo: Path, index: IndexServer) -> None:
    index.holds["adaptor_d"] = hold = threading.Event()
    terminal = Terminal(*[a for a in ensure_args(repo, index.url, *BATCH) if a != "--json"])
    try:
        index.wait_for_download("adaptor_d")
        # Held back: no installer run of the batch can end, yet its phase is drawn, with how long it has run.
        wait_until(
            lambda: re.search(r"(resolving|pip:|uv:) [^\n]*\(\d+s\)", terminal.drawn()),
            what="a phase of the batch drawn on the terminal",
        )
        assert index.downloading("adaptor_d") == 1 and terminal.proc.poll() is None
    finally:
        hold.set()
        code, out = terminal.finish()
    assert code == 0, terminal.drawn()
    assert len(out.splitlines()) == len(BATCH), out


def test_a_lock_wait_on_a_terminal_is_drawn_live_with_its_holder(repo: Path, index: IndexServer) -> None:
    index.holds["slow_pkg"] = hold = threading.Event()
    holder = start(*ensure_args(repo, index.url, "slow-pkg==1.0"))
    try:
        index.wait_for_download("slow_pkg")
        terminal = Terminal(*[a for a in ensure_args(repo, index.url, "slow-pkg==1.0") if a != "--json"])
        # The live line, not the log line above it: that one ends with the holder's note, this one with its own time.
        live = rf"waiting for \S+: held by \S+ pid {holder.pid} for \d+s \(\d+s\)"
        wait_until(lambda: re.search(live, terminal.drawn()), what="the lock wait drawn on the terminal")
    finally:
        hold.set()
    assert finish(holder)[0] == 0
    code, out = terminal.finish()
    assert code == 0 and out.startswith("waited "), (out, terminal.drawn())


def test_a_library_users_logging_sees_each_records_event_tree_and_figures(
    repo: Path, index: IndexServer, caplog: pytest.LogCaptureFixture
) -> None:
    from repoinstall import InstallOptions, Repo

    caplog.set_level(logging.INFO, logger="repoinstall")
    with Repo(repo, install=InstallOptions(find_links=(index.url,), no_index=True)) as opened:
        opened.ensure_all(list(BATCH))
    by_event = {getattr(r, "event", None): r for r in caplog.records}
    assert {"installer.done", "store.done", "install.done"} <= set(by_event), [r.getMessage() for r in caplog.records]
    done = by_event["install.done"]
    assert done.tree in BATCH and done.figures["action"] == "installed", vars(done)  # type: ignore[attr-defined]
    assert isinstance(by_event["installer.done"].figures["seconds"], float)  # type: ignore[attr-defined]
