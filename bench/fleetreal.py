"""The fleet on real wheels (``python bench/fleet.py --real``): numpy + pandas, each wheel fetched once per repo.

For each kind of host (bench/realwheels.py: ``pep658``, a PEP 503/658 index answering ranges; ``links``, a plain
find-links page serving whole files only), for unpinned (``numpy pandas``) and pinned specs, and N pods: N real
processes, each with its own empty installer cache, ``repoinstall ensure`` the specs into one new repo at once. The
host counts whole-file downloads per wheel (not ranges, not PEP 658 metadata). Beside it, the naive baseline: N pods
of ``pip install --target --compile`` of the same specs into one shared directory, each with its own empty cache.

With ``--registry``: the pinned trees pushed to a registry on 127.0.0.1 (docker-registry), then N pods of a second
cluster (a new repo, the index stopped) ``ensure --from`` it; its access log says how many times each layer's blob
was fetched (GET, not HEAD).
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from common import machine, pod_env, run_together
from helpers import cli
from realwheels import NUMPY_PANDAS, SPECS, serve, wheels

KINDS = ("pep658", "links")
UNPINNED = ["numpy", "pandas"]
#: An index nobody answers: the second cluster's pods have only the registry.
STOPPED = "http://127.0.0.1:9/simple"


class Row(NamedTuple):
    seconds: float
    cpu: float
    #: Whole-file downloads of each wheel (numpy, pandas, python-dateutil, six), summed over the pods.
    fetched: tuple[int, ...]
    failed: int


def _source(server: object, kind: str) -> list[str]:
    url = str(server.url)  # type: ignore[attr-defined]
    return ["--index-url", url + "simple"] if kind == "pep658" else ["--no-index", "--find-links", url]


def _fetched(server: object, names: list[str]) -> tuple[int, ...]:
    return tuple(server.downloads(name) for name in names)  # type: ignore[attr-defined]


def _reset(server: object) -> None:
    server.started.clear()  # type: ignore[attr-defined]
    server.completed.clear()  # type: ignore[attr-defined]


def ours(server: object, kind: str, specs: list[str], pods: int, work: Path, installer: str, names: list[str]) -> Row:
    _reset(server)
    command = cli("ensure", *specs, "--repo", work / "repo", *_source(server, kind), "--installer", installer, "--json")
    ran = run_together([command] * pods, [pod_env(work / f"cache-{n}") for n in range(pods)])
    for code, err in zip(ran.codes, ran.errors, strict=True):
        if code != 0:
            print(f"  a pod failed ({code}): {err.strip().splitlines()[-1:]}", file=sys.stderr)
    return Row(ran.seconds, ran.cpu, _fetched(server, names), sum(code != 0 for code in ran.codes))


def baseline(server: object, kind: str, specs: list[str], pods: int, work: Path, names: list[str]) -> Row:
    _reset(server)
    command = [
        sys.executable, "-m", "pip", "install", "--target", str(work / "shared-target"), *_source(server, kind),
        "--no-input", "--disable-pip-version-check", "--no-warn-script-location", "--compile", *specs,
    ]  # fmt: skip
    ran = run_together([command] * pods, [pod_env(work / f"cache-{n}") for n in range(pods)])
    return Row(ran.seconds, ran.cpu, _fetched(server, names), sum(code != 0 for code in ran.codes))


def _median(rows: list[Row]) -> Row:
    return Row(
        statistics.median(r.seconds for r in rows),
        statistics.median(r.cpu for r in rows),
        tuple(max(r.fetched[i] for r in rows) for i in range(len(rows[0].fetched))),
        sum(r.failed for r in rows),
    )


def blob_gets(log: Path, since: int) -> Counter[str]:
    """GETs of each blob (by digest) in the registry's access log after byte ``since``."""
    text = log.read_bytes()[since:].decode("utf-8", "replace")
    return Counter(re.findall(r'"GET /v2/[^ ]*/blobs/(sha256:[0-9a-f]{64}) HTTP/[0-9.]+" (?:200|307)', text))


def registry_fleet(server: object, sizes: tuple[int, ...], work: Path, installer: str) -> None:
    from registry import registry

    with registry(work / "registry") as found:
        where = f"{found.host}/trees"
        log = found.root.parent / "registry.log"
        pushed = work / "pushed-repo"
        push = cli("push", where, *SPECS, "--repo", pushed, *_source(server, "links"), "--plain-http",
                   "--installer", installer, "--json")  # fmt: skip
        ran = run_together([push], [pod_env(work / "push-cache")])
        if ran.codes != [0]:
            sys.exit(f"push failed: {ran.errors[0].strip()[-800:]}")
        images = json.loads(ran.outputs[0])["images"]
        layers = sum(int(image.get("layers", 0)) for image in images)
        print(f"\npushed {len(images)} image(s) of {', '.join(SPECS)} to a registry on 127.0.0.1")
        print(f"{'pods':>4} | {'wall s':>7} {'cpu s':>6} | {'layer GETs':>10} {'distinct':>8} {'most of one':>11} "
              f"{'config GETs':>12} | ok")  # fmt: skip
        for pods in sizes:
            since = log.stat().st_size
            command = cli("ensure", *SPECS, "--repo", work / f"second-{pods}", "--from", where, "--index-url",
                          STOPPED, "--plain-http", "--installer", installer, "--json")  # fmt: skip
            ran = run_together([command] * pods, [pod_env(work / f"second-cache-{pods}-{n}") for n in range(pods)])
            every = blob_gets(log, since)
            # A layer is a tar; an image's config is JSON (each pod reads the configs: small, not layers).
            gets = Counter({d: n for d, n in every.items() if not _blob(found.root, d).startswith(b"{")})
            configs = sum(every.values()) - sum(gets.values())
            failed = sum(code != 0 for code in ran.codes)
            for code, err in zip(ran.codes, ran.errors, strict=True):
                if code != 0:
                    print(f"  a pod failed ({code}): {err.strip().splitlines()[-1:]}", file=sys.stderr)
            most = max(gets.values(), default=0)
            verdict = "ok" if most == 1 and not failed else "MISSED"
            print(f"{pods:>4} | {ran.seconds:>7.2f} {ran.cpu:>6.1f} | {sum(gets.values()):>10} {len(gets):>8} "
                  f"{most:>11} {configs:>12} | {verdict}")  # fmt: skip
        print(f"(the pushed images list {layers} layer(s); target: each layer fetched once per repo)")


def _blob(root: Path, digest: str) -> bytes:
    """The first bytes of a blob in the registry's storage."""
    hexed = digest.removeprefix("sha256:")
    path = root / "docker" / "registry" / "v2" / "blobs" / "sha256" / hexed[:2] / hexed / "data"
    with path.open("rb") as handle:
        return handle.read(1)


def main(sizes: tuple[int, ...], rounds: int, installer: str, with_registry: bool) -> None:
    names = [wheel.name for wheel in wheels()]
    print(f"{machine()}; installer {installer}; {rounds} round(s), medians; wheels: {', '.join(names)}")
    print("fetched: whole-file downloads of numpy/pandas/python-dateutil/six, summed over the pods")
    header = (
        f"{'host':>6} {'specs':>8} {'pods':>4} | {'repoinstall ensure':^32} | {'pip install --target (baseline)':^32}\n"
        f"{'':>6} {'':>8} {'':>4} | {'fetched':>12} {'wall s':>7} {'cpu s':>6} {'fail':>4} | "
        f"{'fetched':>12} {'wall s':>7} {'cpu s':>6} {'fail':>4}"
    )
    results: list[tuple[str, str, int, Row, Row]] = []
    with tempfile.TemporaryDirectory(prefix="bench-fleet-real-") as tmp:
        for kind in KINDS:
            with serve(kind, NUMPY_PANDAS) as server:
                for label, specs in (("unpinned", UNPINNED), ("pinned", SPECS)):
                    for pods in sizes:
                        mine, theirs = [], []
                        for round_ in range(rounds):
                            work = Path(tmp, f"{kind}-{label}-{pods}-{round_}")
                            mine.append(ours(server, kind, specs, pods, work / "ours", installer, names))
                            theirs.append(baseline(server, kind, specs, pods, work / "naive", names))
                        results.append((kind, label, pods, _median(mine), _median(theirs)))
                        print(f"  done: {kind} {label} N={pods}", file=sys.stderr)
    print()
    print(header)
    for kind, label, pods, mine_row, base in results:
        print(
            f"{kind:>6} {label:>8} {pods:>4} | {'/'.join(map(str, mine_row.fetched)):>12} {mine_row.seconds:>7.2f} "
            f"{mine_row.cpu:>6.1f} {mine_row.failed:>4} | {'/'.join(map(str, base.fetched)):>12} "
            f"{base.seconds:>7.2f} {base.cpu:>6.1f} {base.failed:>4}"
        )
    once = all(set(row[3].fetched) == {1} and row[3].failed == 0 for row in results)
    print(f"each wheel fetched once per repo at every N, from both hosts, pinned and unpinned: "
          f"{'ok' if once else 'MISSED'}")  # fmt: skip
    if with_registry:
        with tempfile.TemporaryDirectory(prefix="bench-fleet-registry-") as tmp, serve("links", NUMPY_PANDAS) as server:
            registry_fleet(server, sizes, Path(tmp), installer)
    if not once:
        sys.exit(1)
