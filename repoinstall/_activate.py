"""Using installed trees: on this process's ``sys.path`` for a block (activation), or in a fresh interpreter
(isolation, for a second version of something this process already imported). Either way each tree's mount is
checked first (:func:`mount_problem`): one mounted ``noexec`` or holding no distribution fails with one line."""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence

from ._errors import ActivationConflict, IsolatedCallError, RepoUnusable, TreesConflict

#: sys.path is one per process: activations from several threads edit it one at a time.
_path_guard = threading.Lock()


@contextlib.contextmanager
def activated(trees: Sequence[str]) -> Iterator[list[str]]:
    """Put ``trees`` first on ``sys.path`` for the block, then take exactly them off again.

    Modules imported inside the block stay imported (Python cannot unload them); that is why activating a
    tree whose modules were already imported from a different version is refused instead of half-working.
    """
    paths = [os.path.abspath(tree) for tree in trees]
    check_mounts(paths)
    for tree in paths:
        if (problem := conflict(tree)) is not None:
            raise ActivationConflict(problem)
    with _path_guard:
        sys.path[:0] = paths
        importlib.invalidate_caches()
    try:
        yield paths
    finally:
        with _path_guard:
            for path in paths:
                with contextlib.suppress(ValueError):
                    sys.path.remove(path)  # ours only: others may have edited sys.path meanwhile
            importlib.invalidate_caches()


def mount_problem(tree: str) -> str | None:
    """Why the tree at ``tree`` cannot be imported from as it is mounted here, as one line, or ``None``: one
    ``statvfs`` and a directory read up to the first ``*.dist-info``, so cheap enough for every activation.

    Two ways a Kubernetes image volume has been mounted that break a worker far from the cause: ``noexec``
    (CRI-O's first image-volume support, cri-o#8317, until Kubernetes took ``noexec`` out of the API,
    kubernetes/enhancements#5354), which fails every C extension with "failed to map segment"; and empty, with
    no error (k3s#14323), which fails the first import with ModuleNotFoundError."""
    try:
        noexec = bool(os.statvfs(tree).f_flag & os.ST_NOEXEC)
        with os.scandir(tree) as entries:
            holds = any(entry.name.endswith(".dist-info") for entry in entries)
    except OSError as error:
        return f"{tree}: cannot be read ({error.strerror or error}): not a tree to import from"
    if noexec:
        return (
            f"{tree} is mounted noexec: no C extension can load from it ('failed to map segment'); an image "
            "volume mounted noexec is the container runtime's doing (CRI-O's first image-volume support): upgrade "
            "the runtime, or use the trees on the shared volume (imageVolumes.trees: []); a shared volume: mount "
            "it without noexec"
        )
    if not holds:
        return (
            f"{tree} holds no distribution (no *.dist-info): an image volume that mounted empty (k3s#14323)? "
            "check the pod's events and the node's runtime log, that the runtime supports image volumes, and that "
            "the reference is what `repoinstall push` printed; or use the trees on the shared volume"
        )
    return None


def check_mounts(trees: Sequence[str]) -> None:
    """:class:`RepoUnusable` (exit 2), one line, for the first of ``trees`` :func:`mount_problem` refuses."""
    for tree in trees:
        if (problem := mount_problem(tree)) is not None:
            raise RepoUnusable(problem)


def check_together(trees: Sequence[tuple[str, str]]) -> None:
    """Refuse ``trees`` ((label, path) pairs) that cannot share one import path: two of them hold different
    versions of one distribution (a tree holds its project's dependencies too), so the one given first would
    shadow the other in every import. Read from the trees' dist-info METADATA."""
    if len(trees) < 2:
        return
    from ._disk.dists import scan
    from ._disk.identity import canonical_name

    first: dict[str, tuple[str, str]] = {}  # project -> (version, label of the first tree that holds it)
    for label, path in trees:
        try:
            dists = scan(path)
        except OSError:
            continue  # a tree that vanished fails on its own, where it is used
        for dist in dists:
            project = canonical_name(dist.name)
            version, holder = first.setdefault(project, (dist.version, label))
            if not _same_version(version, dist.version):
                raise TreesConflict(
                    f"{holder} and {label} cannot be used together: {holder} holds {project} {version}, "
                    f"{label} holds {project} {dist.version}, and the first on the path would shadow the other; "
                    "ask for versions that agree, or install them as one tree (--together, Repo.ensure_together)"
                )


def _same_version(one: str, other: str) -> bool:
    if one == other:
        return True
    from packaging.version import InvalidVersion, Version

    try:
        return Version(one) == Version(other)
    except InvalidVersion:
        return False


def conflict(tree: str) -> str | None:
    """Why ``tree`` cannot be activated here (a module it provides is already imported from another
    version of its project), or ``None``."""
    for name in sorted(top_level_names(tree)):
        module = sys.modules.get(name)
        origin = _origin(module) if module is not None else None
        if module is None or (origin is not None and _inside(origin, tree)):
            continue
        ours = owner(tree, name)
        theirs = owner(_top_dir(origin, name), name) if origin is not None else None
        if ours is not None and ours == theirs:
            continue  # the same version of the same project: what is imported is what the tree holds
        loaded = f"{theirs[0]} {theirs[1]}" if theirs else "a module of unknown version"
        wanted = f"{ours[0]} {ours[1]}" if ours else tree
        return (
            f"cannot activate {wanted}: module {name!r} is already imported from {loaded} "
            f"({origin or 'built in'}); one process holds one version of a module: use Repo.call_isolated() "
            "or `repoinstall run` for this one"
        )
    return None


def top_level_names(tree: str) -> set[str]:
    """Importable top-level names a tree provides: packages, modules and extension modules."""
    names: set[str] = set()
    try:
        entries = list(os.scandir(tree))
    except OSError:
        return names
    for entry in entries:
        name = entry.name
        if name in {"bin", "__pycache__"} or name.endswith((".dist-info", ".egg-info", ".data", ".pth")):
            continue
        if entry.is_dir():
            if name.isidentifier():
                names.add(name)
        elif name.endswith(".py"):
            names.add(name[:-3])
        elif name.endswith((".so", ".pyd")):
            names.add(name.split(".", 1)[0])
    return names


def owner(directory: str, name: str) -> tuple[str, str] | None:
    """(project, version) of the distribution in ``directory`` whose RECORD installs top-level ``name``."""
    from ._disk.dists import record_rows, scan
    from ._disk.identity import canonical_name

    try:
        dists = scan(directory)
    except OSError:
        return None
    prefixes = (f"{name}/", f"{name}.py", f"{name}.")
    for dist in dists:
        if any(row and row[0].startswith(prefixes) for row in record_rows(directory, dist) or ()):
            return canonical_name(dist.name), dist.version
    return None


def _origin(module: object) -> str | None:
    path = getattr(module, "__file__", None)
    if isinstance(path, str):
        return path
    locations = list(getattr(module, "__path__", []) or [])
    return str(locations[0]) if locations else None


def _inside(path: str, tree: str) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(tree) + os.sep)


def _top_dir(origin: str, name: str) -> str:
    # .../site-packages/name/__init__.py -> .../site-packages ; .../site-packages/name.py -> .../site-packages
    parts = os.path.realpath(origin).split(os.sep)
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] == name or parts[index].split(".", 1)[0] == name:
            return os.sep.join(parts[:index]) or os.sep
    return os.path.dirname(origin)


#: Runs in the fresh interpreter: read (paths, target, args, kwargs) from stdin, answer (ok, value) on the
#: original stdout; the function's own prints go to stderr so they cannot corrupt the answer.
_CHILD = """
import os, pickle, sys, importlib
answer = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
paths, target, args, kwargs = pickle.load(sys.stdin.buffer)
sys.path[:0] = paths
try:
    module_name, _, attribute = target.partition(":")
    value = importlib.import_module(module_name)
    for part in attribute.split(".") if attribute else ():
        value = getattr(value, part)
    outcome = (True, value(*args, **kwargs))
except BaseException as error:
    outcome = (False, error)
try:
    data = pickle.dumps(outcome)
except Exception as error:
    data = pickle.dumps((False, RuntimeError(f"result cannot be sent back: {error!r}")))
answer.write(data)
answer.close()
"""


def call_isolated(
    trees: Sequence[str], target: str, args: tuple[object, ...], kwargs: dict[str, object], timeout: float | None
) -> object:
    """Call ``module:function`` in a fresh interpreter that has ``trees`` first on its path; its result, or
    the exception it raised. Arguments and result travel pickled."""
    check_mounts(trees)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*trees, *filter(None, [env.get("PYTHONPATH")])])
    payload = pickle.dumps((list(trees), target, args, kwargs))
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD], input=payload, capture_output=True, env=env, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise IsolatedCallError(f"{target}: did not finish within {timeout:g}s") from None
    try:
        ok, value = pickle.loads(done.stdout)
    except Exception:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
        raise IsolatedCallError(
            f"{target}: the isolated interpreter exited {done.returncode} without an answer: {' | '.join(tail)}"
        ) from None
    if not ok:
        raise value
    return value
