"""Trees as OCI images, against a real registry on 127.0.0.1 (Debian's docker-registry), beside their baselines.

    python bench/oci.py [--quick] [--rounds N]

The package set: numpy + pandas (and their dependencies) as one locked tree, when their wheels can be had
offline from this machine's configured local indexes (``pip config list``: file:// index URLs and find-links
directories); else, and with --quick, the benchmarks' own built wheels (fleet-a over two libraries), said so.
Beside it, an app tree (built here) that needs the same libraries.

1. Pushing a second tree that shares libraries uploads only its new distributions: blobs and bytes uploaded,
   beside the tree's whole (what a push without HEAD-before-upload sends).
2. The same distributions pushed from two repos (two clusters installing from the index on their own) have one
   digest each: the second push uploads nothing and gives the same manifest.
3. A second cluster's cold ``ensure APP --from REGISTRY`` (the app's tree: the lock's distributions and the app,
   pulled as layers) and ``ensure -r LOCK --from REGISTRY`` (the lock's wheels, fetched by their hashes) with its
   index stopped, against installing the lock with pip and with uv (``--target``, bytecode compiled, an empty
   cache): wall and CPU seconds, medians.
4. ``import`` of the tree's top module from the unpacked image (umoci) against from the tree on the repo:
   files opened and stat calls (strace), sources read and pycs written (none, for both: hash-based pycs).
5. Hydrating costs what moving the bytes costs: the real numpy + pandas wheels (bench/realwheels.py, served on
   127.0.0.1; with --quick the built app tree) installed as two trees and pushed, then, as alternating pairs
   (``--pairs``, 10 by default), ``ensure numpy pandas --from`` into an empty repo (every layer's digest, bounds,
   RECORDs and closure checked, in private staging) against ``skopeo copy docker://... oci:DIR`` of both images and
   GNU ``tar -xzf`` of each layer blob into one dir: medians, each pair's own ratio (median, min-max), beside the
   1.5x target and the figure before (2.07x).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from common import machine, pod_env, run_together
from helpers import cli
from registry import registry
from wheels import make_wheel

from repoinstall._install.backends.uv import _binary as uv_binary

STOPPED = "http://127.0.0.1:9/simple"
TOOLS = ("docker-registry", "skopeo", "umoci", "strace", "tar")
#: Hydrating: the target, and what the code before this figure was measured at (numpy + pandas, 2026-11-27).
HYDRATE_TARGET = 1.5
HYDRATE_BEFORE = 2.07


class PackageSet(NamedTuple):
    wheels: Path
    lock: Path  #: a requirements file with every distribution pinned and hashed
    module: str  #: what to import
    app: str  #: the app tree's spec: it needs the same libraries
    said: str


def configured_sources() -> list[str]:
    """pip options for this machine's local indexes only (file:// URLs and find-links directories), no network."""
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False)
    options: list[str] = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        for item in value.strip().strip("'\"").split():
            if key.endswith(("index-url", "extra-index-url")) and item.startswith("file://"):
                options += ["--index-url" if not options else "--extra-index-url", item]
            elif key.endswith("find-links") and os.path.isdir(item):
                options += ["--find-links", item]
    if options and options[0] != "--index-url":
        options = ["--no-index", *options]  # find-links only
    return options


def write_lock(wheels: Path, path: Path) -> Path:
    lines = []
    for wheel in sorted(wheels.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        if name == "analysis_app":
            continue
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines.append(f"{name.replace('_', '-').lower()}=={version} --hash=sha256:{digest}")
    path.write_text("\n".join(lines) + "\n")
    return path


def package_set(work: Path, quick: bool) -> PackageSet:
    wheels = work / "wheels"
    wheels.mkdir()
    said = ""
    if not quick:
        sources = configured_sources()
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "-d", str(wheels), "-q", *sources,
             "pandas"],
            env={**os.environ, "PIP_CONFIG_FILE": os.devnull}, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode == 0 and sources:
            versions = {w.name.split("-")[0]: w.name.split("-")[1] for w in wheels.glob("*.whl")}
            make_wheel(wheels, "analysis-app", "1.0", requires=(f"pandas=={versions['pandas']}",), modules=3)
            said = f"numpy {versions.get('numpy')} + pandas {versions['pandas']} and {len(versions) - 2} more"
            return PackageSet(wheels, write_lock(wheels, work / "lock.txt"), "pandas", "analysis-app==1.0", said)
        shutil.rmtree(wheels)
        wheels.mkdir()
        said = "no numpy + pandas wheels from the configured local indexes: "
    make_wheel(wheels, "lib-0", "1.0", modules=60)
    make_wheel(wheels, "lib-1", "1.0", modules=60)
    make_wheel(wheels, "fleet-a", "1.0", requires=("lib-0>=1", "lib-1>=1"), modules=60)
    make_wheel(wheels, "analysis-app", "1.0", requires=("fleet-a==1.0",), modules=3)
    said += "built wheels: fleet-a over lib-0 and lib-1 (60 modules each)"
    return PackageSet(wheels, write_lock(wheels, work / "lock.txt"), "fleet_a", "analysis-app==1.0", said)


def repoinstall(*args: str | Path, env: dict[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run(cli(*args, "--json"), env=env or pod_env(Path(tempfile.mkdtemp())), capture_output=True,
                          text=True, check=False, timeout=1800)  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"repoinstall {args[0]} failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def pushed(result: dict[str, object]) -> dict[str, object]:
    (image,) = result["images"]  # type: ignore[index]
    return image  # type: ignore[no-any-return]


def tree_bytes(where: str, manifest: str) -> tuple[int, int]:
    """(layers, their bytes) of a pushed manifest, as skopeo reads it."""
    raw = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{where}@{manifest}"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    layers = json.loads(raw)["layers"]
    return len(layers), sum(layer["size"] for layer in layers)


def cold_pull(where: str, asked: list[str | Path], work: Path) -> tuple[float, float, str]:
    """A cold ``ensure ASKED --from`` in a new repo, its index stopped: wall and CPU seconds, the tree's path."""
    repo = work / "repo"
    command = cli("ensure", *asked, "--repo", repo, "--from", where, "--index-url", STOPPED, "--plain-http",
                  "--json")  # fmt: skip
    ran = run_together([command], [pod_env(work / "cache")])
    if ran.codes != [0]:
        sys.exit(f"ensure --from failed: {ran.errors[0].strip()[-800:]}")
    listed = json.loads(ran.outputs[0])["packages"]
    return ran.seconds, ran.cpu, str(listed[0]["path"])


def bare(installer: str, package: PackageSet, work: Path) -> tuple[float, float]:
    target = str(work / "target")
    if installer == "pip":
        command = [sys.executable, "-m", "pip", "install", "--target", target, "--no-index", "-f", str(package.wheels),
                   "--no-deps", "--require-hashes", "-r", str(package.lock), "--compile", "--no-input",
                   "--disable-pip-version-check"]  # fmt: skip
    else:
        command = [uv_binary(), "pip", "install", "--target", target, "--python", sys.executable, "--no-index",
                   "-f", str(package.wheels), "--no-deps", "--require-hashes", "-r", str(package.lock),
                   "--compile-bytecode", "--link-mode", "copy", "--no-config"]  # fmt: skip
    ran = run_together([command], [pod_env(work / "cache")])
    if ran.codes != [0]:
        sys.exit(f"{installer} failed: {ran.errors[0].strip()[-800:]}")
    return ran.seconds, ran.cpu


class Traced(NamedTuple):
    opened: int  #: open/openat calls, all
    stats: int  #: stat, lstat, newfstatat, statx, fstat calls, all
    in_tree: int  #: of both, those naming a path in the tree
    sources: int  #: .py files opened in the tree (compiled again)
    written: int  #: files opened for writing, or dirs made, in the tree


def traced_import(tree: str, module: str, work: Path) -> Traced:
    trace = work / f"trace-{hashlib.sha256(tree.encode()).hexdigest()[:8]}.txt"
    code = f"import sys; sys.path.insert(0, {tree!r}); import {module}"
    calls = "trace=open,openat,stat,lstat,newfstatat,statx,fstat,mkdir"
    subprocess.run(["strace", "-f", "-qq", "-e", calls, "-o", str(trace), sys.executable, "-c", code],
                   env=pod_env(work / "cache"), check=True, capture_output=True, timeout=600)  # fmt: skip
    kinds: collections.Counter[str] = collections.Counter()
    in_tree = sources = written = 0
    for line in trace.read_text().splitlines():
        found = re.search(r"\b(open|openat|stat|lstat|newfstatat|statx|fstat|mkdir)\(", line)
        if found is None:
            continue
        kinds["open" if found[1].startswith("open") else "mkdir" if found[1] == "mkdir" else "stat"] += 1
        if tree in line:
            in_tree += 1
            sources += found[1].startswith("open") and bool(re.search(r'\.py"', line))
            written += bool(re.search(r"O_WRONLY|O_RDWR|O_CREAT|mkdir\(", line))
    return Traced(kinds["open"], kinds["stat"], in_tree, sources, written)


def unpacked(where: str, tag: str, work: Path) -> str:
    layout = work / "layout"
    subprocess.run(["skopeo", "copy", "-q", "--src-tls-verify=false", f"docker://{where}:{tag}", f"oci:{layout}:t"],
                   check=True, capture_output=True, timeout=600)  # fmt: skip
    subprocess.run(["umoci", "unpack", "--rootless", "--image", f"{layout}:t", str(work / "bundle")], check=True,
                   capture_output=True, timeout=600)  # fmt: skip
    return str(work / "bundle" / "rootfs")


class Timed(NamedTuple):
    seconds: float
    cpu: float


@contextlib.contextmanager
def timed() -> Iterator[list[Timed]]:
    """Wall and CPU seconds (of the children waited for) of the block: the one item of the list it yields."""
    got: list[Timed] = []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    yield got
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    got.append(Timed(time.perf_counter() - started, cpu))


def hydrate_source(work: Path, quick: bool, package: PackageSet) -> Iterator[tuple[list[str], list[str], str]]:
    """Yield (the specs of the trees, the options that install them from an index, what they are)."""
    if quick:
        yield [package.app], ["--no-index", "-f", str(package.wheels)], "the built app tree (--quick)"
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import realwheels

    with realwheels.serve("pep658") as index:
        said = ", ".join(w.name.split("-")[0] + " " + w.name.split("-")[1] for w in realwheels.wheels())
        yield realwheels.SPECS, ["--index-url", index.url + "simple"], f"real wheels: {said}"


def hydrate(found_host: str, work: Path, quick: bool, package: PackageSet, pairs: int) -> None:
    """Section 5: ``ensure --from`` into an empty repo against ``skopeo copy`` + ``tar -xzf`` of each layer."""
    where = f"{found_host}/hydrate"
    source = hydrate_source(work, quick, package)
    specs, options, said = next(source)
    images = pushed_all(repoinstall("push", where, *specs, "--repo", work / "hydrate-source", *options,
                                    "--plain-http", env=pod_env(work / "cache-hydrate")))  # fmt: skip
    source.close()  # the index is not needed any more
    layers: set[str] = set()
    for image in images:
        raw = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false",
                              f"docker://{where}@{image['manifest']}"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        layers |= {layer["digest"] for layer in json.loads(raw)["layers"]}

    def ours(number: int) -> Timed:
        scratch = work / f"hydrate-ours-{number}"
        command = cli("ensure", *specs, "--repo", scratch / "repo", "--from", where, "--index-url", STOPPED,
                      "--plain-http", "--json")  # fmt: skip
        with timed() as got:
            done = subprocess.run(command, env=pod_env(scratch / "cache"), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"ensure --from failed: {done.stderr.strip()[-800:]}")
        subprocess.run(["chmod", "-R", "u+w", str(scratch)], check=False)  # the store's files are read-only
        shutil.rmtree(scratch, ignore_errors=True)
        return got[0]

    def baseline(number: int) -> Timed:
        scratch = work / f"hydrate-base-{number}"
        layout, out = scratch / "oci", scratch / "rootfs"
        out.mkdir(parents=True)
        with timed() as got:
            for image in images:
                subprocess.run(["skopeo", "copy", "-q", "--src-tls-verify=false", f"docker://{image['tag']}",
                                f"oci:{layout}:{str(image['tag']).rsplit(':', 1)[1]}"], check=True)  # fmt: skip
            for digest in sorted(layers):
                blob = layout / "blobs" / "sha256" / digest.split(":", 1)[1]
                subprocess.run(["tar", "-xzf", str(blob), "-C", str(out)], check=True)
        subprocess.run(["chmod", "-R", "u+w", str(scratch)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)
        return got[0]

    rows: list[tuple[Timed, Timed]] = []
    for number in range(pairs):  # alternating which goes first
        if number % 2 == 0:
            first = ours(number)
            rows.append((first, baseline(number)))
        else:
            second = baseline(number)
            rows.append((ours(number), second))
    ratios = sorted(a.seconds / b.seconds for a, b in rows)
    load = os.getloadavg()[0]
    print(f"\n5. hydrating {len(images)} trees, {len(layers)} layers ({said}), {pairs} alternating pairs, "
          f"load average {load:.1f} on {os.cpu_count()} cores at the end")  # fmt: skip
    print(f"   {'':<34} {'wall s':>7} {'min':>6} {'max':>6} {'cpu s':>7}")
    for label, index in (("ensure --from (checked, staged)", 0), ("skopeo copy + tar -xzf", 1)):
        walls = [row[index].seconds for row in rows]
        cpus = [row[index].cpu for row in rows]
        print(f"   {label:<34} {statistics.median(walls):>7.2f} {min(walls):>6.2f} {max(walls):>6.2f} "
              f"{statistics.median(cpus):>7.2f}")  # fmt: skip
    print(f"   each pair's ratio: median {statistics.median(ratios):.2f}x (min {ratios[0]:.2f}x, "
          f"max {ratios[-1]:.2f}x); target at most {HYDRATE_TARGET}x; before {HYDRATE_BEFORE}x")  # fmt: skip


def pushed_all(result: dict[str, object]) -> list[dict[str, object]]:
    return list(result["images"])  # type: ignore[call-overload]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="built wheels, one round (for CI)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=10, help="alternating pairs of the hydrate figure (5.)")
    parser.add_argument("--only-hydrate", action="store_true", help="only the hydrate figure (5.)")
    args = parser.parse_args()
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        sys.exit(f"needs {', '.join(missing)} (bash .ci/run installs them)")
    rounds = 1 if args.quick else args.rounds
    with tempfile.TemporaryDirectory(prefix="bench-oci-") as tmp:
        work = Path(tmp)
        package = package_set(work, args.quick or args.only_hydrate)  # the hydrate figure's own real wheels
        print(f"{machine()}; {rounds} round(s), medians; {package.said}")
        with registry(work / "registry") as found:
            if args.only_hydrate:
                hydrate(found.host, work, args.quick, package, 1 if args.quick else args.pairs)
                return
            where = f"{found.host}/trees"
            common = ["--no-index", "-f", str(package.wheels), "--plain-http"]
            env = pod_env(work / "cache-one")

            # 1. A second tree that shares the libraries uploads only its own distributions.
            first = pushed(repoinstall("push", where, "-r", package.lock, "--repo", work / "one", *common, env=env))
            second = pushed(repoinstall("push", where, package.app, "--repo", work / "one", *common, env=env))
            layers, size = tree_bytes(where, str(second["manifest"]))
            print("\n1. pushing a second tree that shares the libraries (HEAD before upload)")
            print(f"   first tree:  {first['uploaded']} of {first['layers']} layers uploaded, "
                  f"{int(first['uploaded_bytes']) / 1e6:.1f} MB")  # type: ignore[call-overload]  # fmt: skip
            print(f"   second tree: {second['uploaded']} of {layers} layers uploaded, "
                  f"{int(second['uploaded_bytes']) / 1e3:.1f} kB of {size / 1e6:.1f} MB "  # type: ignore[call-overload]
                  f"(baseline, no HEAD: {layers} layers, {size / 1e6:.1f} MB)")  # fmt: skip

            # 2. The same distributions pushed from another repo (installed there on its own): the same digests.
            other = pushed(repoinstall("push", where, "-r", package.lock, "--repo", work / "two", *common,
                                       env=pod_env(work / "cache-two")))  # fmt: skip
            same = other["manifest"] == first["manifest"]
            print("\n2. the same distributions pushed from a second repo (its own install from the index)")
            print(f"   uploaded {other['uploaded']} of {other['layers']} layers; manifest "
                  f"{'the same' if same else 'DIFFERENT'}: {str(other['manifest'])[:19]}... "
                  f"(baseline, non-reproducible layers: {other['layers']} new blobs)")  # fmt: skip

            # 3. A second cluster's cold ensure from the registry, against pip and uv installing the lock: the app's
            # tree (the lock's distributions and the app) pulled as its image's layers; the lock itself, which with
            # --from installs the lock's wheels, fetched from the registry by their hashes.
            figures: dict[str, list[tuple[float, float]]] = {
                "repoinstall --from": [], "-r LOCK --from": [], "pip": [], "uv": []
            }  # fmt: skip
            tree = ""
            for number in range(rounds):
                seconds, cpu, tree = cold_pull(where, [package.app], work / f"pull-{number}")
                figures["repoinstall --from"].append((seconds, cpu))
                seconds, cpu, _ = cold_pull(where, ["-r", package.lock], work / f"wheels-{number}")
                figures["-r LOCK --from"].append((seconds, cpu))
                for installer in ("pip", "uv"):
                    figures[installer].append(bare(installer, package, work / f"{installer}-{number}"))
            print("\n3. a second cluster's cold install (index stopped for --from; empty caches): the app's tree from "
                  "its image's layers (repoinstall --from), the lock from its wheels in the registry (-r LOCK --from), "
                  "the lock with pip and uv")  # fmt: skip
            print(f"   {'':<20} {'wall s':>7} {'cpu s':>7}")
            medians = {k: (statistics.median(s for s, _ in v), statistics.median(c for _, c in v))
                       for k, v in figures.items()}  # fmt: skip
            for name, (seconds, cpu) in medians.items():
                print(f"   {name:<20} {seconds:>7.2f} {cpu:>7.2f}")
            pulled = medians["repoinstall --from"]
            for installer in ("pip", "uv"):
                print(f"   {installer} / --from: {medians[installer][0] / pulled[0]:.2f}x the wall seconds, "
                      f"{medians[installer][1] / pulled[1]:.2f}x the CPU seconds")  # fmt: skip

            # 4. Importing from the unpacked image against from the tree on the repo.
            rootfs = unpacked(where, str(first["tag"]).rsplit(":", 1)[1], work)
            print(
                f"\n4. import {package.module}: strace of one interpreter (all its calls; in the tree: those naming it)"
            )
            print(f"   {'from':<22} {'opened':>7} {'stats':>7} {'in tree':>8} {'.py read':>9} {'written':>8}")
            for label, path in (("the unpacked image", rootfs), ("the tree on the repo", tree)):
                row = traced_import(path, package.module, work)
                print(
                    f"   {label:<22} {row.opened:>7} {row.stats:>7} {row.in_tree:>8} {row.sources:>9} {row.written:>8}"
                )

            # 5. Hydrating against moving the bytes.
            hydrate(found.host, work, args.quick, package, 1 if args.quick else args.pairs)


if __name__ == "__main__":
    main()
