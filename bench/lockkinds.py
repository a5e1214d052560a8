"""Every kind of lock file of one resolution, ensured into one repo: does each land in ONE tree, with pip and uv?

    python bench/lockkinds.py [--quick] [--cold] [--index-url URL] [--find-links DIR] [--set "PKG PKG"]...

For each set (default: requests + pydantic; numpy + pandas; scikit-learn + scipy) it writes each kind of lock
file for this interpreter from this machine's local package sources only (the ``file:`` indexes and find-links
directories its pip configuration names, or those given; every other pip and uv setting switched off; uv
resolving as pip does, the best version over every index):

* ``pip lock``;
* ``uv pip compile --format pylock.toml`` and ``uv pip compile --generate-hashes``;
* ``uv export --format pylock.toml`` and ``uv export --format requirements-txt``, of a small project (the set
  as its dependencies, this Python, this platform) after ``uv lock``;
* ``pip-compile --generate-hashes``, when pip-compile is installed (else a line says it is skipped).

Then, for each installer (pip, uv) and each set, into one new repo with its own empty installer cache,
``repoinstall ensure -r FILE --installer X --json`` of each kind in turn, with the same local sources on the
command line as a user passes them. Per kind: the tree it landed in, what the ensure did (installed: an installer
ran; composed: from stored distributions, no installer; present: the tree was there), its wall seconds, what it
stored (a lock's tree stores its own metapackage too), and "again": the same file ensured once more after
``repoinstall remove`` of its tree (composed, when every distribution is stored). Per repo: the bytes of store +
trees (``du -sb``, hard links once), how many distinct trees, and how many kinds landed in the first kind's tree.
Each tree is then exported once (``repoinstall export``) and the export ensured again: it works when it holds the
tree's distributions (name, version, sha256) and names the same tree, present. With ``--cold``, each kind is also
ensured into a new repo of its own: what it stores and the bytes of store + trees, per kind.

A lock that names local files outside its own directory (``pip lock`` of a ``file:`` index writes
``file:///.../files/...`` URLs) is refused unless that directory is a ``--find-links`` of the run (a documented
rule): the first refusal is printed once, and each such lock is ensured again with those directories added.

Exits 1 after printing everything when a kind failed, a set's kinds landed in more than one tree, a removed tree was
not composed again from the store, or an export did not work. ``--quick`` (for CI): one set of the small fleet
set's wheels, built here, as a ``file:`` index (no pip configuration needed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from common import build as build_wheels
from common import local_sources, machine, pip_env, pod_env, run_together
from helpers import cli
from packaging.utils import canonicalize_name

from repoinstall._install.backends.uv import _binary as uv_binary

SETS = [["requests", "pydantic"], ["numpy", "pandas"], ["scikit-learn", "scipy"]]
QUICK_SET = ["fleet-b", "fleet-c"]  # two adaptors over three shared libraries
INSTALLERS = ("pip", "uv")
#: What `pip lock` and friends write for a wheel outside the lock's directory: repoinstall's refusal says this.
OUTSIDE = "a lock may name local files only there"


class Sources(NamedTuple):
    """The local indexes and find-links directories, as the same command-line options for pip, uv and repoinstall."""

    indexes: list[str]
    links: list[str]

    def args(self) -> list[str]:
        args = ["--index-url", self.indexes[0]] if self.indexes else ["--no-index"]
        args += [arg for url in self.indexes[1:] for arg in ("--extra-index-url", url)]
        return args + [arg for place in self.links for arg in ("--find-links", place)]


def file_index(where: Path) -> str:
    """The small fleet set's wheels, built here, as a ``file:`` simple index with sha256 fragments (as the local
    indexes are: uv locks record no hash for a find-links directory's wheels); its URL."""
    build_wheels(where / "files")
    for wheel in sorted((where / "files").glob("*.whl")):
        page = where / "simple" / canonicalize_name(wheel.name.split("-")[0]) / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        with page.open("a") as out:
            out.write(f'<a href="../../files/{wheel.name}#sha256={digest}">{wheel.name}</a>\n')
    return (where / "simple").as_uri()


class Failed(Exception):
    """A lock file not made, or an ensure that failed: the command and the tail of its error."""


class Kind(NamedTuple):
    label: str
    filename: str
    make: Callable[[list[str], Path, Sources, Path], None]  # (packages, the file, sources, a scratch dir)


def _run(command: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env, cwd=cwd)
    if done.returncode != 0:
        shown = " ".join(Path(command[0]).name if i == 0 else part for i, part in enumerate(command))
        raise Failed(f"{shown}: exit {done.returncode}: {(done.stderr or done.stdout).strip()[-600:]}")


#: uv's resolver as pip's: the best version over every index (uv's default takes a project from the first index
#: that has it, and puts --extra-index-url first: another numpy than pip's when two local indexes hold numpy).
UV_AS_PIP = ["--no-config", "--offline", "--index-strategy", "unsafe-best-match"]


def _uv(scratch: Path) -> tuple[list[str], dict[str, str]]:
    """uv with no configuration but ours, offline (every source is local), and a cache of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UV_")} | {"UV_CACHE_DIR": str(scratch / "uv")}
    return [uv_binary()], env


def _requirements_in(packages: list[str], scratch: Path) -> Path:
    path = scratch / "requirements.in"
    path.write_text("\n".join(packages) + "\n")
    return path


def pip_lock(packages: list[str], out: Path, sources: Sources, scratch: Path) -> None:
    command = [sys.executable, "-m", "pip", "lock", "--quiet", "--disable-pip-version-check", "-o", str(out)]
    _run([*command, *sources.args(), *packages], pip_env())


def uv_compile(hashes: bool) -> Callable[[list[str], Path, Sources, Path], None]:
    def make(packages: list[str], out: Path, sources: Sources, scratch: Path) -> None:
        uv, env = _uv(scratch)
        form = ["--generate-hashes"] if hashes else ["--format", "pylock.toml"]
        command = [*uv, "pip", "compile", "--quiet", *UV_AS_PIP, "--python", sys.executable]
        _run([*command, *form, *sources.args(), "-o", str(out), str(_requirements_in(packages, scratch))], env)

    return make


def uv_export(form: str) -> Callable[[list[str], Path, Sources, Path], None]:
    def make(packages: list[str], out: Path, sources: Sources, scratch: Path) -> None:
        uv, env = _uv(scratch)
        project = scratch / "project"
        if not (project / "uv.lock").is_file():
            project.mkdir(exist_ok=True)
            python = f"=={sys.version_info.major}.{sys.version_info.minor}.*"
            here = f"sys_platform == '{sys.platform}' and platform_machine == '{platform.machine()}'"
            (project / "pyproject.toml").write_text(
                f'[project]\nname = "lockkinds-set"\nversion = "0"\nrequires-python = "{python}"\n'
                f"dependencies = {json.dumps(packages)}\n\n"
                f'[tool.uv]\npackage = false\nenvironments = ["{here}"]\n'
            )
            common = ["--quiet", *UV_AS_PIP, "--python", sys.executable, *sources.args()]
            _run([*uv, "lock", *common], env, cwd=project)
        command = [*uv, "export", "--quiet", "--no-config", "--offline", "--frozen", "--no-emit-project"]
        _run([*command, "--format", form, "-o", str(out)], env, cwd=project)

    return make


def pip_compile(packages: list[str], out: Path, sources: Sources, scratch: Path) -> None:
    command = [str(shutil.which("pip-compile")), "--quiet", "--generate-hashes", *sources.args(), "-o", str(out)]
    _run([*command, str(_requirements_in(packages, scratch))], pip_env())


KINDS = [
    Kind("pip lock", "pylock.pip-lock.toml", pip_lock),
    Kind("uv pip compile --format pylock.toml", "pylock.uv-compile.toml", uv_compile(hashes=False)),
    Kind("uv export --format pylock.toml", "pylock.uv-export.toml", uv_export("pylock.toml")),
    Kind("uv pip compile --generate-hashes", "requirements.uv-compile.txt", uv_compile(hashes=True)),
    Kind("uv export --format requirements-txt", "requirements.uv-export.txt", uv_export("requirements-txt")),
    Kind("pip-compile --generate-hashes", "requirements.pip-compile.txt", pip_compile),
]


def pinned(path: Path) -> set[str]:
    """The ``name==version`` pins a lock file holds (names normalized), to see that every kind is one resolution."""
    if path.suffix == ".toml":
        packages = tomllib.loads(path.read_text()).get("packages", [])
        return {f"{canonicalize_name(p['name'])}=={p['version']}" for p in packages}
    found = (re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", line) for line in path.read_text().splitlines())
    return {f"{canonicalize_name(m[1])}=={m[2]}" for m in found if m}


def own_directories(path: Path) -> list[str]:
    """The local directories a lock's ``file:`` URLs name (for ``--find-links``, which lets a lock name them)."""
    urls = re.findall(r"file://(/[^\"'\s]+)", path.read_text())
    return sorted({str(Path(url).parent) for url in urls})


#: Each refusal of a lock for naming local files outside its directory (ensured again with --find-links of them).
REFUSED: list[str] = []


class Landed(NamedTuple):
    """What one ``ensure -r FILE`` did in a repo."""

    trees: tuple[str, ...]  # name==version, as `list --json` names them
    action: str  # installed / composed / present (one per tree, joined)
    seconds: float
    stored: int


def ensure(file: Path, repo: Path, installer: str, sources: Sources, cache: Path) -> Landed:
    """``repoinstall ensure -r FILE --json`` with the local sources; once more with the lock's own directories as
    ``--find-links`` if it is refused for naming files outside its directory."""
    extra: list[str] = []
    while True:
        command = cli("ensure", "-r", file, "--repo", repo, "--installer", installer, "--json", *sources.args())
        ran = run_together([[*command, *extra]], [pod_env(cache)])
        try:
            document = json.loads(ran.outputs[0])
        except json.JSONDecodeError:
            document = {"error": ran.errors[0].strip()[-600:]}
        error = str(document.get("error") or "")
        if ran.codes[0] == 2 and OUTSIDE in error and not extra:
            REFUSED.append(error)
            extra = [arg for place in own_directories(file) for arg in ("--find-links", place)]
            continue
        if ran.codes[0] != 0 or error:
            shown = f"repoinstall ensure -r {file.name} --installer {installer} {' '.join(sources.args() + extra)}"
            raise Failed(f"{shown}: exit {ran.codes[0]}: {error or ran.errors[0].strip()[-600:]}")
        break
    trees, actions, stored = [], [], 0
    ran_installer = re.search(r"installing \S+ with (pip|uv)", ran.errors[0]) is not None
    for package in document["packages"]:
        trees.append(f"{package['name']}=={package['version']}")
        action = package["action"]
        if action == "installed" and not ran_installer and not package.get("stored"):
            action = "composed"
        actions.append(action)
        stored += int(package.get("stored") or 0)
    return Landed(tuple(trees), "+".join(actions), ran.seconds, stored)


def repo_bytes(repo: Path) -> int:
    """Bytes of the store and the trees, each hard-linked file once (one ``du`` over both)."""
    done = subprocess.run(
        ["du", "-sbc", str(repo / "store"), str(repo / "trees")], capture_output=True, text=True, check=True
    )
    return int(done.stdout.splitlines()[-1].split()[0])


def discard(place: Path) -> None:
    """Delete a repo and its caches (the store's directories are read-only)."""
    subprocess.run(["chmod", "-R", "u+w", str(place)], check=True)
    shutil.rmtree(place)


def listed(repo: Path) -> dict[str, list[dict[str, str]]]:
    """Each tree (name==version) and its distributions, from ``list --json``."""
    done = subprocess.run(
        cli("list", "--repo", repo, "--json"), capture_output=True, text=True, env=pod_env(repo), check=True
    )
    return {f"{t['name']}=={t['version']}": t["dists"] for t in json.loads(done.stdout)["trees"]}


def export_works(tree: str, dists: list[dict[str, str]], repo: Path, installer: str, sources: Sources) -> str:
    """``ok ...`` when the tree's export holds its distributions and ensures back to the same tree, present."""
    out = repo.parent / f"pylock.export-{len(list(repo.parent.glob('pylock.export-*')))}.toml"
    done = subprocess.run(
        cli("export", tree, "--repo", repo, "-o", out), capture_output=True, text=True, env=pod_env(repo), check=False
    )
    if done.returncode != 0:
        return f"FAILED: repoinstall export {tree}: exit {done.returncode}: {done.stderr.strip()[-400:]}"
    held = {(canonicalize_name(d["name"]), d["version"], d["sha256"]) for d in dists}
    packages = tomllib.loads(out.read_text()).get("packages", [])
    exported = {
        (canonicalize_name(p["name"]), p["version"], artifact["hashes"]["sha256"])
        for p in packages
        for artifact in [*p.get("wheels", []), *([p["sdist"]] if "sdist" in p else [])]
    }
    name, version = tree.split("==")
    own = {(n, v, h) for n, v, h in held if n == canonicalize_name(name) and v == version}
    if exported - held or not held - exported <= own:  # a lock's tree holds its own metapackage, never exported
        return f"FAILED: the export differs: {sorted(exported ^ held)[:4]}"
    held &= exported
    try:
        again = ensure(out, repo, installer, sources, repo.parent / "cache")
    except Failed as error:
        return f"FAILED: {error}"
    if again.trees != (tree,) or again.action != "present":
        return f"FAILED: the export ensures to {', '.join(again.trees)} ({again.action})"
    return f"ok ({len(held)} distributions; ensure -r of it: the same tree, present)"


def make_files(sets: list[list[str]], kinds: list[Kind], sources: Sources, tmp: Path) -> dict[str, dict[str, Path]]:
    """Each kind's file of each set (by set and kind label); a line when the kinds of a set pin different sets."""
    files: dict[str, dict[str, Path]] = {}
    for packages in sets:
        what = " + ".join(packages)
        scratch = tmp / what.replace(" + ", "-")
        scratch.mkdir()
        files[what] = {}
        for kind in kinds:
            try:
                kind.make(packages, scratch / kind.filename, sources, scratch)
                files[what][kind.label] = scratch / kind.filename
            except Failed as error:
                FINDINGS.append(f"{what}: {kind.label}: not made: {error}")
        pins = {label: pinned(path) for label, path in files[what].items()}
        first = next(iter(pins.values()), set())
        if all(found == first for found in pins.values()):
            listing = ", ".join(sorted(first))
            print(f"{what}: the {len(pins)} files pin the same {len(first)} distributions: {listing}")
        else:
            for label, found in pins.items():
                print(f"{what}: {label}: {', '.join(sorted(found))}")
            FINDINGS.append(f"{what}: the files pin different sets (one resolution expected)")
    return files


#: What went wrong, printed at the end (and the exit status 1).
FINDINGS: list[str] = []
#: Each tree id (name==version) as T1, T2, ...: the same label in every table.
LABELS: dict[str, str] = {}


def label(trees: tuple[str, ...]) -> str:
    return ",".join(LABELS.setdefault(tree, f"T{len(LABELS) + 1}") for tree in trees)


def one_repo(installer: str, what: str, kinds: list[Kind], files: dict[str, Path], work: Path, sources: Sources) -> str:
    """Each kind of one set ensured in turn into one new repo, then once more after its tree is removed (composed
    from the store, no installer, when every distribution is stored); prints a row per kind, returns the summary."""
    repo, cache = work / "repo", work / "cache"
    landed: list[tuple[str, Landed]] = []
    for kind in kinds:
        row = f"{(what if not landed else ''):<22} | {kind.label:<36} | "
        if kind.label not in files:
            print(f"{row}{'-':<5} | {'not made':<9} |")
            continue
        try:
            one = ensure(files[kind.label], repo, installer, sources, cache)
            _run(cli("remove", *one.trees, "--repo", repo), pod_env(cache))
            again = ensure(files[kind.label], repo, installer, sources, cache)
        except Failed as error:
            print(f"{row}{'-':<5} | {'FAILED':<9} |")
            FINDINGS.append(f"{installer}: {what}: {kind.label}: {error}")
            continue
        landed.append((kind.label, one))
        print(f"{row}{label(one.trees):<5} | {one.action:<9} | {one.seconds:>7.2f} | {one.stored:>6} | ", end="")
        print(
            f"{again.action} {again.seconds:.2f}" + (f" into {label(again.trees)}" if again.trees != one.trees else "")
        )
        if again.action != "composed" or again.trees != one.trees:
            FINDINGS.append(f"{installer}: {what}: {kind.label}: after remove, {again.action} {label(again.trees)}")
    trees = {tree for _, one in landed for tree in one.trees}
    reused = sum(1 for _, one in landed if one.trees == landed[0][1].trees)
    size = repo_bytes(repo) if repo.is_dir() else 0
    summary = (
        f"{what}: {len(trees)} distinct tree(s); {reused} of {len(landed)} kinds in the first tree"
        f" ({label(landed[0][1].trees) if landed else '-'}); store + trees {size / 1e6:.1f} MB ({size} bytes)"
    )
    if len(trees) > 1:
        summary += " -- MORE THAN ONE TREE: " + "; ".join(f"{kind} -> {label(one.trees)}" for kind, one in landed)
        FINDINGS.append(f"{installer}: {what}: {len(trees)} trees for one resolution")
    dists = listed(repo) if repo.is_dir() else {}
    for tree in sorted(trees, key=lambda t: LABELS[t]):
        works = export_works(tree, dists.get(tree, []), repo, installer, sources)
        summary += f"\n  export {LABELS[tree]} ({what}): {works}"
        if not works.startswith("ok"):
            FINDINGS.append(f"{installer}: {what}: export {LABELS[tree]}: {works}")
    return summary


def cold(installer: str, kinds: list[Kind], files: dict[str, dict[str, Path]], work: Path, sources: Sources) -> None:
    """Each kind of each set into a new repo of its own: what each stores, and the bytes of store + trees."""
    print(f"\nwith {installer}, each kind into a new repo of its own")
    head = f"{'set':<22} | {'kind':<36} | {'tree':<5} | {'action':<9} | {'seconds':>7} | {'stored':>6} | {'MB':>6}"
    print(f"{head}\n{'-' * len(head)}")
    for what, made in files.items():
        for number, kind in enumerate(k for k in kinds if k.label in made):
            row = f"{(what if not number else ''):<22} | {kind.label:<36} | "
            place = work / f"{what.replace(' + ', '-')}-{number}"
            try:
                one = ensure(made[kind.label], place / "repo", installer, sources, place / "cache")
            except Failed as error:
                print(f"{row}{'-':<5} | {'FAILED':<9} |")
                FINDINGS.append(f"{installer}: {what}: {kind.label} (cold): {error}")
                continue
            size = repo_bytes(place / "repo") / 1e6
            discard(place)  # 30 repos and their installer caches would take gigabytes
            print(
                f"{row}{label(one.trees):<5} | {one.action:<9} | {one.seconds:>7.2f} | {one.stored:>6} | {size:>6.1f}"
            )
            if one.stored < len(pinned(made[kind.label])):
                FINDINGS.append(f"{installer}: {what}: {kind.label} (cold): stored {one.stored} distributions only")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="one set of the small fleet set's wheels, a file: index (for CI)"
    )
    parser.add_argument("--cold", action="store_true", help="also each kind into a new repo of its own")
    parser.add_argument("--index-url", action="append", default=[], help="a local index (repeatable)")
    parser.add_argument("--find-links", action="append", default=[], help="a local directory (repeatable)")
    parser.add_argument("--set", action="append", default=[], help='packages of one set: "numpy pandas"')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.quick:
            sources, sets = Sources([file_index(Path(tmp, "index"))], []), [QUICK_SET]
        else:
            given = (args.index_url, args.find_links) if args.index_url or args.find_links else local_sources()
            sources, sets = Sources(*given), [s.split() for s in args.set] or SETS
            if not sources.indexes and not sources.links:
                sys.exit("no local index or find-links directory: give --index-url file:///... or --find-links DIR")
        print(f"{machine()}; sources: {' '.join(sources.args())}")
        kinds = [k for k in KINDS if k.make is not pip_compile or shutil.which("pip-compile")]
        if len(kinds) < len(KINDS):
            print("pip-compile --generate-hashes: skipped, pip-compile is not installed (pip-tools)")
        files = make_files(sets, kinds, sources, Path(tmp))
        for installer in INSTALLERS:
            print(f"\nwith {installer}, each set's kinds in turn into one new repo")
            head = f"{'set':<22} | {'kind':<36} | {'tree':<5} | {'action':<9} | {'seconds':>7} | {'stored':>6} | again"
            print(f"{head}\n{'-' * (len(head) + 20)}")
            summaries = [
                one_repo(installer, what, kinds, made, Path(tmp, f"{installer}-{what.replace(' + ', '-')}"), sources)
                for what, made in files.items()
            ]
            print("\n".join(summaries))
            if args.cold:
                cold(installer, kinds, files, Path(tmp, f"{installer}-cold"), sources)
        if REFUSED:
            print(f"\nnote: with the index options alone, a lock naming the index's files is refused: {REFUSED[0]}")
            print("      (each such lock was ensured again with its own directories as --find-links, as the docs say)")
        print("\ntrees:")
        for tree, name in LABELS.items():
            print(f"  {name} = {tree}")
    if FINDINGS:
        print("\nfindings:\n" + "\n".join(f"- {finding}" for finding in FINDINGS))
        sys.exit(1)


if __name__ == "__main__":
    main()
