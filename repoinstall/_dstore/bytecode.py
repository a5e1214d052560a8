"""Bytecode that stays valid wherever a stored distribution's files land, and is the same from any repo: PEP 552
unchecked hash-based pycs, compiled afresh in a fixed interpreter state.

An installer compiles each module into a timestamp pyc, whose header holds the source's mtime and size: the
interpreter recompiles it (reading the source, and writing a new pyc where it can) as soon as the source's mtime
differs. An OCI layer cannot keep mtimes and still be reproducible (its entries carry one fixed mtime), so a tree
unpacked or mounted from an image would compile everything on every cold import, on a read-only mount. Its code
objects also name the installer's temporary directory, different in each repo.

After an installer run, before its distributions are split into the store, each pyc a RECORD lists whose source
is there is compiled again by the tree's interpreter (one process for the run, ``PYTHONHASHSEED=0`` so that sets
of constants marshal in one order) as an *unchecked* hash-based pyc naming its source by its path in the tree;
its RECORD row gets the new hash. The interpreter trusts such a pyc without looking at the source's mtime or
bytes. That is safe here because a stored distribution never changes: every file of it, sources and pycs, is
checked against its RECORD by ``verify``.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import posixpath
import subprocess

from .._store.dists import RECORD_LIMIT, is_bytecode, scan, tree_relative

#: Run by the tree's interpreter: compile each (source, pyc, name in the tree, optimization level) it is given.
_COMPILE = """
import json, py_compile, sys
failed = []
for source, pyc, name, level in json.load(sys.stdin):
    try:
        py_compile.compile(source, cfile=pyc, dfile=name, doraise=True, optimize=level,
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    except Exception:
        failed.append(pyc)
json.dump(failed, sys.stdout)
"""
_TIMEOUT = 600.0


def hash_based(staged: str, python: str) -> int:
    """Compile the pycs of the distributions an installer put in ``staged`` (a private dir) again as unchecked
    hash-based pycs, with ``python``, and update their RECORD rows; how many it rewrote. A pyc whose source is not
    there, or that does not compile, stays as the installer wrote it."""
    records: list[tuple[str, str, list[list[str]]]] = []  # (RECORD's path, its line ending, its rows)
    jobs: dict[str, list[str]] = {}  # tree-relative pyc -> its RECORD row
    work = []
    for dist in scan(staged):
        record = os.path.join(staged, dist.dist_info, "RECORD")
        try:
            with open(record, "rb") as handle:
                data = handle.read(RECORD_LIMIT + 1)
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # the store's check names what is wrong with it
        if len(data) > RECORD_LIMIT:
            continue
        rows = list(csv.reader(io.StringIO(text)))
        records.append((record, "\r\n" if "\r\n" in text else "\n", rows))
        for row in rows:
            relative = tree_relative(row[0]) if row else None
            if relative is None or not is_bytecode(relative) or (found := _source_of(staged, relative)) is None:
                continue
            source, level = found
            jobs[relative] = row
            work.append((os.path.join(staged, source), os.path.join(staged, relative), source, level))
    if not work:
        return 0
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}, "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [python, "-I", "-c", _COMPILE], input=json.dumps(work).encode(), capture_output=True, env=env,
        timeout=_TIMEOUT, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return 0  # the installer's pycs stay: valid where mtimes are kept
    failed = {os.path.relpath(path, staged) for path in json.loads(done.stdout or b"[]")}
    for relative, row in jobs.items():
        if relative in failed:
            continue
        with open(os.path.join(staged, relative), "rb") as handle:
            new = handle.read()
        digest = base64.urlsafe_b64encode(hashlib.sha256(new).digest()).rstrip(b"=").decode("ascii")
        row[1:] = [f"sha256={digest}", str(len(new))]
    for record, newline, rows in records:
        out = io.StringIO()
        csv.writer(out, lineterminator=newline).writerows(rows)
        with open(record, "wb") as handle:
            handle.write(out.getvalue().encode("utf-8"))
    return len(jobs) - len(failed)


def _source_of(staged: str, relative: str) -> tuple[str, int] | None:
    """The tree-relative source of the pyc at ``relative`` and its optimization level, if the distribution holds
    that source as a regular file."""
    name = posixpath.basename(relative)
    module, _, rest = name.partition(".")
    level = 0
    if ".opt-" in rest:
        try:
            level = int(rest.split(".opt-", 1)[1].split(".", 1)[0])
        except ValueError:
            return None
    source = posixpath.join(posixpath.dirname(posixpath.dirname(relative)), f"{module}.py")
    path = os.path.join(staged, source)
    if os.path.islink(path) or not os.path.isfile(path) or os.path.islink(os.path.join(staged, relative)):
        return None
    return source, level
