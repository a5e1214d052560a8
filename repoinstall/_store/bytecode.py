"""Bytecode compiled once, in parallel, that stays valid wherever a stored distribution's files land and is the same
from any repo and any batch (with the same interpreter): PEP 552 unchecked hash-based pycs, their marshal bytes
normalised.

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
handed the next chunk of sources (largest first) as soon as it answered its last, so that all end together. Each
process runs with ``PYTHONHASHSEED=0`` (what a string's hash orders comes out in one order) and compiles each
file alone. What marshal writes still depends on the
compiling interpreter's history: it flags an object for back-references (FLAG_REF) when its reference count is
above 1, shared or not with what else that interpreter compiled or holds, and sorts a set's elements by their
marshal bytes, flag included; whether the compiler makes two equal frozensets one object depends on it too. So each
pyc's marshal bytes are normalised before they are written (see :mod:`marshalnorm`: FLAG_REF only where a TYPE_REF
refers back, sets in the order of their values, equal frozensets one object), and a pyc's
bytes depend on its source, its name in the tree, the optimization level and the interpreter, never on which
process compiled it or what it compiled before. The interpreter counts: its magic number (its minor version) is in
the header, and a patch release may generate other code for the same source. A pyc that is already the unchecked
hash-based pyc of its source is left as it is: compiling a dir twice costs a header read per file.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import functools
import io
import json
import os
import posixpath
import subprocess
import time
from typing import NamedTuple

from .. import _stop
from .._disk.dists import RECORD_LIMIT, Hashed, is_bytecode, scan, tree_relative
from . import marshalnorm

#: Run by the tree's interpreter, after marshalnorm's source (its ``normalize``): for each line it reads (a JSON
#: list of jobs, each [source, pyc or null (the interpreter's own cache path for it), name in the tree,
#: optimization level]), compile each source unless its pyc is that source's unchecked hash-based pyc already, and
#: answer with one line: each job's [pyc path, sha256 as RECORD writes it, size, device, inode, mtime in ns] (the
#: pyc's row, and what tells the install it hashed that file: see Hashed), or null where it did not compile (or its
#: marshal bytes hold what marshalnorm cannot read: no pyc rather than one whose bytes depend on the batch). A pyc
#: is written as py_compile writes it (atomically, never through a symlink or over what is not a file), its marshal
#: bytes normalised first, so the digest is that of the normalised bytes. The pycs are read back and hashed here,
#: on every core, not by the install after the compile. Each answer is one write of one line, flushed: the install
#: waits for it.
_LOOP = """
import base64, hashlib, importlib._bootstrap_external as external, importlib.util, json, marshal, os, sys
def one(source, pyc, name, level):
    if pyc is None:
        pyc = importlib.util.cache_from_source(source)
    with open(source, "rb") as handle:
        text = handle.read()
    head = importlib.util.MAGIC_NUMBER + b"\\x01\\x00\\x00\\x00" + importlib.util.source_hash(text)
    try:
        with open(pyc, "rb") as handle:
            found = handle.read(16)
    except OSError:
        found = b""
    if found != head:
        if os.path.islink(pyc) or (os.path.exists(pyc) and not os.path.isfile(pyc)):
            raise FileExistsError(pyc)
        code = compile(text, name, "exec", dont_inherit=True, optimize=level)
        os.makedirs(os.path.dirname(pyc), exist_ok=True)
        external._write_atomic(pyc, head + normalize(marshal.dumps(code)), external._calc_mode(source))
    with open(pyc, "rb") as handle:
        data = handle.read()
        info = os.fstat(handle.fileno())
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return [pyc, digest, len(data), info.st_dev, info.st_ino, info.st_mtime_ns]
for line in sys.stdin:
    done = []
    for job in json.loads(line):
        try:
            done.append(one(*job))
        except Exception:
            done.append(None)
    sys.stdout.write(json.dumps(done) + "\\n")
    sys.stdout.flush()
"""
#: The whole compile's bound: a hung interpreter must not hold the install (and its lock) for ever.
_TIMEOUT = 600.0
#: Fewer sources than this per process are not worth another interpreter's start (tens of milliseconds).
_PER_PROCESS = 40
#: Chunks per interpreter's share of the bytes, and the most sources in one chunk (its answer stays one short line).
_CHUNKS_PER_PROCESS = 16
_CHUNK_JOBS = 64


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
    inside = os.path.join(staged, "")  # every pyc is below it: its source's path or the one the job named
    for job, compiled in zip(jobs, written, strict=True):
        if compiled is None or (relative := compiled.pyc.removeprefix(inside)) == compiled.pyc:
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
    """Compile ``jobs`` on up to ``processes`` interpreters at once, each handed the next chunk of sources as soon
    as it answered its last (largest first, so the last chunks are small and every interpreter ends at about the
    same time, as uv's workers do); each job's pyc, or ``None`` (it did not compile, or its interpreter failed:
    killed, out of memory; the chunks it had not begun go to the others)."""
    import selectors

    wanted = processes or _cores()
    count = max(1, min(wanted, len(jobs) // _PER_PROCESS or 1))
    pool = _Pool(staged, jobs, _chunks(jobs, count))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}, "PYTHONHASHSEED": "0"}
    finished = False
    with selectors.DefaultSelector() as waiting:
        try:
            for _ in range(count):
                proc = subprocess.Popen(
                    [python, "-I", "-c", _script()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL, env=env,
                )  # fmt: skip
                pool.running.append(proc)
                # Registered as an installer is: a stop (SIGTERM, Ctrl-C, an interrupted batch) kills it at once,
                # so no interpreter outlives the run writing into the staging dir, and the wait below ends.
                _stop.started(proc)
                if pool.hand(proc):
                    assert proc.stdout is not None
                    waiting.register(proc.stdout, selectors.EVENT_READ, proc)
            deadline = time.monotonic() + _TIMEOUT
            while waiting.get_map() and (left := deadline - time.monotonic()) > 0:
                for key, _ in waiting.select(left):
                    if not pool.answered(key.data):
                        waiting.unregister(key.fileobj)
            finished = not waiting.get_map()
            _stop.check()  # killed by a stop: the install stops, as after its installer's run
        finally:
            for proc in pool.running:
                # Timed out, interrupted (SIGTERM, Ctrl-C), or gave a torn answer: nothing may go on writing into
                # the staging dir. One that answered its last chunk has its stdin closed and ends by itself.
                assert proc.stdin is not None and proc.stdout is not None
                if not finished or not proc.stdin.closed:
                    proc.kill()
                proc.wait()
                for pipe in (proc.stdin, proc.stdout):
                    with contextlib.suppress(OSError):
                        pipe.close()
                _stop.ended(proc)
    return pool.written


class _Pool:
    """The compiling interpreters' work: the chunks not handed out yet, the one each interpreter is at, and the
    pycs they reported."""

    def __init__(self, staged: str, jobs: list[_Job], chunks: list[list[int]]) -> None:
        self.staged = staged
        self.jobs = jobs
        self.pending = collections.deque(chunks)
        self.running: list[subprocess.Popen[bytes]] = []
        self.given: dict[subprocess.Popen[bytes], list[int]] = {}  # each interpreter's chunk, until it answers
        self.written: list[_Compiled | None] = [None] * len(jobs)

    def hand(self, proc: subprocess.Popen[bytes]) -> bool:
        """Give ``proc`` the next chunk; whether it has one to answer (none left: its stdin is closed, so it ends;
        it died: the chunk goes back, for the others)."""
        assert proc.stdin is not None
        if not self.pending:
            with contextlib.suppress(OSError):
                proc.stdin.close()
            return False
        chunk = self.given[proc] = self.pending.popleft()
        staged, jobs = self.staged, self.jobs
        line = [[os.path.join(staged, jobs[n].source), _joined(staged, jobs[n].pyc), jobs[n].source, jobs[n].level]
                for n in chunk]  # fmt: skip
        try:
            # Never blocks for long: the interpreter has read and answered its last chunk, so the pipe is empty.
            proc.stdin.write(json.dumps(line).encode() + b"\n")
            proc.stdin.flush()
        except OSError:  # a broken pipe: it died
            self.pending.appendleft(self.given.pop(proc))
            return False
        return True

    def answered(self, proc: subprocess.Popen[bytes]) -> bool:
        """Read ``proc``'s answer to its chunk and hand it the next; whether it has one to answer. An interpreter
        that ended (EOF) or tore its line (killed while writing it) gets no more: its chunk has no pycs, and what it
        wrote of them no RECORD lists (see :func:`hash_based`)."""
        assert proc.stdout is not None
        chunk = self.given.pop(proc)
        try:
            done = json.loads(proc.stdout.readline())  # one line per chunk, written whole and flushed
        except ValueError:
            return False
        if not isinstance(done, list) or len(done) != len(chunk):
            return False
        for n, reported in zip(chunk, done, strict=True):
            self.written[n] = _Compiled.of(reported)
        return self.hand(proc)


@functools.cache
def _script() -> str:
    """What the compiling interpreters run: marshalnorm's source (standard library only: it runs as it is in the
    tree's interpreter, which need not be this one), then the compile loop."""
    with open(marshalnorm.__file__, encoding="utf-8") as handle:
        return handle.read() + _LOOP


def _chunks(jobs: list[_Job], count: int) -> list[list[int]]:
    """``jobs`` (their indexes), largest source first, in chunks of about a sixteenth of one interpreter's share
    of the bytes (a large source alone): few enough that handing them out costs nothing, small enough at the end
    that no interpreter is left with much while the others are done."""
    order = sorted(range(len(jobs)), key=lambda n: -jobs[n].size)
    bound = max(1, sum(job.size for job in jobs) // (count * _CHUNKS_PER_PROCESS))
    chunks: list[list[int]] = []
    load = bound
    for number in order:
        if load >= bound or len(chunks[-1]) >= _CHUNK_JOBS:
            chunks.append([])
            load = 0
        chunks[-1].append(number)
        load += jobs[number].size
    return chunks


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
