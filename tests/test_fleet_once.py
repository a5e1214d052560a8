"""A fleet on a plain find-links host: each wheel crosses the network once per repo.

The host is the tests' index server as ``python -m http.server`` would be: a find-links page with no hashes, no
``Requires-Python``, no PEP 658 metadata, and whole files for any GET (no ranges). To choose an unpinned spec's
version, repoinstall reads the wheel's own ``Requires-Python``, which on such a host means downloading it whole.
Pods racing on one empty repo, each with no installer cache, must still fetch each wheel once between them: one
pod reads it into the repo's wheel cache while the others wait for what it learnt, and the installer is given that
file instead of fetching it again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import Pod, cli, isolated_env
from indexserver import IndexServer
from wheels import make_wheel

#: Wheel file prefixes, each to be downloaded once: two top-level specs (their metadata read by repoinstall), and
#: a dependency only the installer fetches.
WHEELS = ("fo_top-2.0", "fo_other-1.0", "fo_dep-1.0")


@pytest.fixture
def links(tmp_path: Path) -> Iterator[IndexServer]:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "fo-top", "1.0", requires=("fo-dep>=1",))
    make_wheel(wheels, "fo-top", "2.0", requires=("fo-dep>=1",), payload=200_000, incompressible=True)
    make_wheel(wheels, "fo-other", "1.0")
    make_wheel(wheels, "fo-dep", "1.0")
    server = IndexServer(wheels)
    server.hashes = False
    server.ranges = False
    server.json = False
    server.start()
    yield server
    server.stop()


def _race(repo: Path, links: IndexServer, pods: int, *specs: str) -> list[dict[str, object]]:
    command = cli("ensure", *specs, "--repo", repo, "--no-index", "--find-links", links.url, "--json")
    started = [Pod(command, isolated_env()) for _ in range(pods)]
    results = []
    for pod in started:
        code, out, err = pod.finish(180)
        assert code == 0, err
        results += json.loads(out)["packages"]
    return results


def _downloads(links: IndexServer, wheels: tuple[str, ...]) -> dict[str, int]:
    return {wheel: links.downloads(wheel) for wheel in wheels}


@pytest.mark.parametrize(
    ("specs", "wheels"),
    [(("fo-top", "fo-other"), WHEELS), (("fo-top",), ("fo_top-2.0", "fo_dep-1.0"))],
    ids=["two-trees", "one-tree"],
)
def test_pods_racing_unpinned_specs_download_each_wheel_once(
    tmp_path: Path, links: IndexServer, specs: tuple[str, ...], wheels: tuple[str, ...]
) -> None:
    # Every pod is still choosing versions when the first one's read of fo-top lands (held back a moment).
    links.delays["fo_top-2.0"] = 1.0
    results = _race(tmp_path / "repo", links, 4, *specs)
    assert {(p["name"], p["version"]) for p in results} <= {("fo-top", "2.0"), ("fo-other", "1.0")}
    assert len(results) == 4 * len(specs)
    assert _downloads(links, wheels) == dict.fromkeys(wheels, 1)
    # The record names the file the wheel was downloaded from, not the copy the installer was given.
    record = json.loads(next((tmp_path / "repo" / "records").rglob("fo-top/2.json")).read_text())
    assert {d["name"]: d["url"] for d in record["dists"]}["fo-top"] == links.url + "fo_top-2.0-py3-none-any.whl"
    # A second repo is a second volume: its fleet fetches each wheel once more, and once only.
    _race(tmp_path / "repo2", links, 3, *specs)
    assert _downloads(links, wheels) == dict.fromkeys(wheels, 2)
