"""Bytecode compiled once, in parallel, that stays valid wherever a stored distribution's files land and is the same
from any repo: PEP 552 unchecked hash-based pycs, compiled in a fixed interpreter state.

An installer compiles each module into a timestamp pyc, whose header holds the source's mtime and size: the
interpreter recompiles it (reading the source, and writing a new pyc where it can) as soon as the source's mtime
differs. An OCI layer cannot keep mtimes and still be reproducible (its entries carry one fixed mtime), so a tree
unpacked or mounted from an image would compile everything on every cold import, on a read-only mount. Its code
objects also name the installer's temporary directory, different in each repo.

So the installers compile nothing (``pip --no-compile``, uv without ``--compile-bytecode``) and, after their run,
in the private dir they filled (before anything is split into the store or published), every source a RECORD
lists is compiled here by the tree's interpreter as an *unchecked* hash-based pyc naming its source by its path in
the tree, ``__pycache__/<module>.<tag>.pyc`` as the interpreter would write it, and its RECORD gets the pyc's row
with its hash. A pyc the installer did write (an older configuration, ``-O`` levels) is compiled again the same
way. The interpreter trusts such a pyc without looking at the source's mtime or bytes. That is safe here because a
stored distribution never changes: every file of it, sources and pycs, is checked against its RECORD by
``verify``.

The work is spread over one process per core (as ``compileall -j0`` and uv's ``--compile-bytecode`` do), each
given sources of about the same total size. Each process runs with ``PYTHONHASHSEED=0`` (sets of constants marshal
in one order) and compiles each file alone, so a pyc's bytes depend on its source and name only, never on which
process compiled it or what it compiled before. A pyc that is already the unchecked hash-based pyc of its source is
left as it is: compiling a dir twice costs a header read per file.
"""

from __future__ import annotations

import csv
import io
import json
import os
import posixpath
import subprocess
import tempfile
import time
from typing import NamedTuple

from .. import _stop
from .._disk.dists import RECORD_LIMIT, Hashed, is_bytecode, scan, tree_relative

#: Run by the tree's interpreter: compile each [source, pyc or null (the interpreter's own cache path for it), name
#: in the tree, optimization level] it is given, unless the pyc is that source's unchecked hash-based pyc already;
#: print each one's [pyc path, sha256 as RECORD writes it, size, device, inode, mtime in ns] (the pyc's row, and
#: what tells the install it hashed that file: see Hashed), or null where it did not compile. The pycs are
#: read back and hashed here, on every core, not by the install after the compile.
_COMPILE = """
import base64, hashlib, importlib.util, json, os, py_compile, sys
done = []
for source, pyc, name, level in json.load(sys.stdin):
    try:
        if pyc is None:
            pyc = importlib.util.cache_from_source(source)
        with open(source, "rb") as handle:
            digest = importlib.util.source_hash(handle.read())
        try:
            with open(pyc, "rb") as handle:
                head = handle.read(16)
        except OSError:
            head = b""
        if head != importlib.util.MAGIC_NUMBER + b"\\x01\\x00\\x00\\x00" + digest:
            py_compile.compile(source, cfile=pyc, dfile=name, doraise=True, optimize=level,
                               invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        with open(pyc, "rb") as handle:
            data = handle.read()
            info = os.fstat(handle.fileno())
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        done.append([pyc, digest, len(data), info.st_dev, info.st_ino, info.st_mtime_ns])
    except Exception:
        done.append(None)
json.dump(done, sys.stdout)
"""
#: The whole compile's bound: a hung interpreter must not hold the install (and its lock) for ever.
_TIMEOUT = 600.0
#: Fewer sources than this per process are not worth another interpreter's start (tens of milliseconds).
_PER_PROCESS = 40


class _Compiled(NamedTuple):
    """A pyc a compiling interpreter wrote (or found so), as it reported it."""

    pyc: str
    digest: str  # sha256, as RECORD writes it
    size: int
    device: int
    inode: int
    mtime_ns: int

    @classmethod
    def of(cls, reported: object) -> _Compiled | None:
        if not isinstance(reported, list) or len(reported) != 6:
            return None
        pyc, digest, *numbers = reported
        if not isinstance(pyc, str) or not isinstance(digest, str) or not all(type(n) is int for n in numbers):
            return None
        return cls(pyc, digest, *numbers)


class _Job(NamedTuple):
    source: str  # tree-relative
    pyc: str | None  # tree-relative; ``None``: where the interpreter puts it (level 0)
    level: int
    record: int  # index of the RECORD that lists the source (or the pyc)
    size: int  # the source's bytes, to share the work out evenly


def hash_based(staged: str, python: str, processes: int | None = None, *, hashed: Hashed | None = None) -> int:
    """Compile every recorded source of the distributions an installer put in ``staged`` (a private dir) as an
    unchecked hash-based pyc, with ``python``, on ``processes`` processes (default: one per core this process may
    use), and record each pyc in its distribution's RECORD; how many pycs it wrote or found so. A source that does
    not compile gets no pyc (the interpreter compiles it in memory on import, as it would any other). Each pyc's
    digest, taken for its RECORD row, goes into ``hashed``: the install's later checks need not hash it again."""
    records: list[tuple[str, str, list[list[str]]]] = []  # (RECORD's path, its line ending, its rows)
    jobs: list[_Job] = []
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
        jobs += _jobs_of(staged, rows, len(records))
        records.append((record, "\r\n" if "\r\n" in text else "\n", rows))
    if not jobs:
        return 0
    written = _compile(staged, python, jobs, processes)
    rows_of: list[dict[str, list[str]]] = [
        {tree_relative(row[0]) or "": row for row in rows if row} for _, _, rows in records
    ]
    count = 0
    for job, compiled in zip(jobs, written, strict=True):
        relative = None if compiled is None else os.path.relpath(compiled.pyc, staged).replace(os.sep, "/")
        if compiled is None or relative is None or relative.startswith("../"):
            if job.pyc is None:
                _drop_unrecorded(staged, job.source, rows_of[job.record])
            continue
        if hashed is not None:
            seen = (compiled.device, compiled.inode, compiled.size, compiled.mtime_ns)
            hashed.remember(seen, "sha256", (compiled.digest, compiled.size))
        row = rows_of[job.record].get(relative)
        if row is None:  # a new file: its row beside its source's, as an installer lists its bytecode
            row = [_recorded_path(rows_of[job.record], job.source, relative)]
            rows_of[job.record][relative] = row
            records[job.record][2].append(row)
        row[1:] = [f"sha256={compiled.digest}", str(compiled.size)]
        count += 1
    for record, newline, rows in records:
        out = io.StringIO()
        csv.writer(out, lineterminator=newline).writerows(rows)
        with open(record, "wb") as handle:
            handle.write(out.getvalue().encode("utf-8"))
    return count


def _jobs_of(staged: str, rows: list[list[str]], record: int) -> list[_Job]:
    """What to compile of one RECORD: each recorded ``.py`` source at level 0, and each recorded pyc of another
    level whose source is there."""
    jobs: list[_Job] = []
    for row in rows:
        relative = tree_relative(row[0]) if row else None
        if relative is None:
            continue
        if relative.endswith(".py") and (size := _regular_size(staged, relative)) is not None:
            jobs.append(_Job(relative, None, 0, record, size))
        elif is_bytecode(relative) and (found := _source_of(staged, relative)) is not None:
            source, level = found
            if level and (size := _regular_size(staged, source)) is not None:
                jobs.append(_Job(source, relative, level, record, size))
    return jobs


def _regular_size(staged: str, relative: str) -> int | None:
    """The size of the regular file at ``relative`` (``None``: none there, or a symlink)."""
    try:
        info = os.lstat(os.path.join(staged, relative))
    except OSError:
        return None
    import stat

    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _compile(staged: str, python: str, jobs: list[_Job], processes: int | None) -> list[_Compiled | None]:
    """Compile ``jobs`` on up to ``processes`` interpreters at once, each given sources of about the same total size;
    each job's pyc, or ``None`` (it did not compile, or its interpreter failed: killed, out of memory)."""
    wanted = processes or _cores()
    count = max(1, min(wanted, len(jobs) // _PER_PROCESS or 1))
    shares: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for number in sorted(range(len(jobs)), key=lambda n: -jobs[n].size):  # largest first, onto the lightest share
        lightest = loads.index(min(loads))
        shares[lightest].append(number)
        loads[lightest] += jobs[number].size + 1
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}, "PYTHONHASHSEED": "0"}
    written: list[_Compiled | None] = [None] * len(jobs)
    running: list[tuple[list[int], subprocess.Popen[bytes]]] = []
    try:
        for share in shares:
            given = [[os.path.join(staged, jobs[n].source), _joined(staged, jobs[n].pyc), jobs[n].source, jobs[n].level]
                     for n in share]  # fmt: skip
            with tempfile.TemporaryFile() as work:  # its stdin: each one starts at once, whatever the others read
                work.write(json.dumps(given).encode())
                work.seek(0)
                proc = subprocess.Popen(
                    [python, "-I", "-c", _COMPILE], stdin=work, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                    env=env,
                )  # fmt: skip
            running.append((share, proc))
            # Registered as an installer is: a stop (SIGTERM, Ctrl-C, an interrupted batch) kills it at once, so
            # no interpreter outlives the run writing into the staging dir, and the wait below ends.
            _stop.started(proc)
        deadline = time.monotonic() + _TIMEOUT
        for share, proc in running:
            try:
                out, _ = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
                done = json.loads(out) if proc.returncode == 0 else None
            except (subprocess.TimeoutExpired, ValueError):
                done = None
            if not isinstance(done, list) or len(done) != len(share):
                continue  # its jobs have no pyc (what it wrote, no RECORD lists: see hash_based)
            for n, reported in zip(share, done, strict=True):
                written[n] = _Compiled.of(reported)
        _stop.check()  # killed by a stop: the install stops, as after its installer's run
    finally:
        for _, proc in running:
            # Timed out, or interrupted (SIGTERM, Ctrl-C): nothing may go on writing into the staging dir.
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            _stop.ended(proc)
    return written


def _joined(staged: str, relative: str | None) -> str | None:
    return None if relative is None else os.path.join(staged, relative)


def _drop_unrecorded(staged: str, source: str, recorded: dict[str, list[str]]) -> None:
    """Remove the level-0 pycs of ``source`` that no RECORD lists: a failed interpreter may have written one."""
    directory, _, name = source.rpartition("/")
    cache = posixpath.join(directory, "__pycache__") if directory else "__pycache__"
    stem = name.removesuffix(".py")
    try:
        names = os.listdir(os.path.join(staged, cache))
    except OSError:
        return
    for found in names:
        relative = f"{cache}/{found}"
        if (
            found.startswith(f"{stem}.")
            and found.endswith(".pyc")
            and ".opt-" not in found
            and relative not in recorded
        ):
            os.unlink(os.path.join(staged, relative))


def _recorded_path(rows: dict[str, list[str]], source: str, relative: str) -> str:
    """The RECORD path for a new pyc: written as the row of its source is (relative to the same place)."""
    row = rows.get(source)
    if row is None:
        return relative
    written = row[0].replace("\\", "/")
    base = written[: len(written) - len(source)] if written.endswith(source) else ""
    return base + relative


def _cores() -> int:
    """The processors this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


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
