"""Bytes pulled and pushed, as an operator's log query reads them: ``--log-format json`` gives one ``push.layer``
event per layer uploaded and one ``pull.layer`` per layer fetched, each with its bytes and seconds, against a real
registry on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import run
from indexserver import IndexServer
from registry import registry
from wheels import make_wheel

pytestmark = pytest.mark.skipif(not shutil.which("docker-registry"), reason="needs docker-registry")
STOPPED = "http://127.0.0.1:9/simple"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    directory = tmp_path_factory.mktemp("progress-wheels")
    make_wheel(directory, "base-lib", "1.0", modules=3)
    make_wheel(directory, "app-one", "1.0", requires=("base-lib>=1.0",), modules=2)
    server = IndexServer(directory).start()
    yield server
    server.stop()


def events(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.strip()]


def test_layers_pushed_and_pulled_are_events_with_their_bytes(tmp_path: Path, served: IndexServer) -> None:
    with registry(tmp_path / "registry") as oci:
        where = f"{oci.host}/progress"
        pushed = run("push", where, "app-one==1.0", "--repo", tmp_path / "one", "--no-index", "-f", served.url,
                     "--plain-http", "--json", "--log-format", "json")  # fmt: skip
        assert pushed.returncode == 0, pushed.stderr
        layers = [one for one in events(pushed.stderr) if one["event"] == "push.layer"]
        assert len(layers) >= 2, pushed.stderr  # a layer per distribution at least: app-one, base-lib
        assert all(one["bytes"] > 0 and one["seconds"] >= 0 and one["registry"] == oci.host for one in layers)
        assert events(pushed.stderr)[-1]["event"] == "push.done" and events(pushed.stderr)[-1]["exit_code"] == 0
        pulled = run("ensure", "app-one==1.0", "--repo", tmp_path / "two", "--index-url", STOPPED, "--from", where,
                     "--plain-http", "--json", "--log-format", "json", "-v")  # fmt: skip
        assert pulled.returncode == 0, pulled.stderr
        done = [one for one in events(pulled.stderr) if one["event"] == "pull.done"]
        assert len(done) == 1 and done[0]["bytes"] > 0 and done[0]["seconds"] >= 0, pulled.stderr
        fetched = [one for one in events(pulled.stderr) if one["event"] == "pull.layer"]
        assert sum(one["bytes"] for one in fetched) == done[0]["bytes"], pulled.stderr
        assert len(fetched) >= 2, pulled.stderr
        assert {one["bytes"] for one in fetched} <= {one["bytes"] for one in layers}, pulled.stderr
        assert all(one["seconds"] >= 0 and one["registry"] == oci.host for one in fetched), fetched
        assert [one["event"] for one in events(pulled.stderr)][-1] == "ensure.done"
