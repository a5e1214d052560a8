"""One wheel, one layer, from any repo and any batch: a stored distribution's pycs, and so its OCI layer, are the
same bytes whatever else its batch compiled in the same interpreters and however many interpreters shared the work.

CPython's marshal flags an object for back-references when its reference count is above 1, and sorts a set's
elements by their marshal bytes, flag included: both depend on what else lives in the compiling interpreter. The
interpreters here hold, while marshalling a code object, one reference to each of its constants equal to one they
compiled before (``SHARING``), as interned strings, small ints and constants shared with earlier code are held in
interpreters whose counts show it (free-threaded builds, later versions): with that history the raw pycs of one
source differ from batch to batch, and the normalised ones do not."""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from wheels import make_wheel

from repoinstall import InstallOptions, Repo
from repoinstall._oci import layer

#: Run before the compile loop in each compiling interpreter (see ``interpreter``).
SHARING = """
import marshal as _marshal, types as _types
_dumps, _seen = _marshal.dumps, set()
def _constants(root):
    stack = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, _types.CodeType):
            stack.extend(item.co_consts)
        elif isinstance(item, (str, bytes, float, int, tuple, frozenset)):
            yield item
            if isinstance(item, (tuple, frozenset)):
                stack.extend(item)
def _sharing_dumps(value, *args):
    held = [x for x in _constants(value) if (type(x), x) in _seen]  # equal to constants compiled here before
    data = _dumps(value, *args)
    _seen.update((type(x), x) for x in _constants(value))
    del held
    return data
_marshal.dumps = _sharing_dumps
"""
#: In the distribution compared, one module; in each other one, many bigger ones (compiled first: the largest go
#: first), all with the same constants: strings that are not names, bytes, floats, big ints, tuples, sets.
CONSTANTS = """
TABLE = ("not a name", b"some bytes", 2.5, 10**30, ("not a name", 1.25), -0.5j)
def known(value):
    return value in {"a b", b"c d", 1.75, ("e f", 2)}, value not in {"g h", "ij"}
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bytecode-batch-wheels")
    make_wheel(directory, "kept-lib", "1.0", modules=45, more={"kept_lib/consts.py": CONSTANTS.encode()})
    padding = "\n".join(f"# {'padding ' * 12}" for _ in range(200))  # larger than any source of kept-lib
    for name in ("other-lib", "third-lib"):
        module = name.replace("-", "_")
        more = {f"{module}/consts_{n}.py": (CONSTANTS + padding).encode() for n in range(20)}
        make_wheel(directory, name, "1.0", modules=20, more=more)
    return directory


@pytest.fixture(scope="module")
def interpreter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This Python, but for the bytecode compile, which runs ``SHARING`` first."""
    directory = tmp_path_factory.mktemp("sharing-python")
    (directory / "sharing.py").write_text(SHARING)
    wrapper = directory / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -I ] && [ "$2" = -c ]; then\n'
        f'  script=$3; shift 3; exec {sys.executable} -I -c "$(cat {directory}/sharing.py)\n$script" "$@"\n'
        "fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def stored_layer(repo: Path, name: str, out: Path) -> str:
    (stored,) = glob.glob(str(repo / "store" / "*" / name / "*"))
    return layer.build(stored, str(out)).digest


@pytest.fixture
def one_core() -> Iterator[None]:
    """One compiling interpreter: the bytecode compile starts one per core this process may use."""
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cores)


def ensure(repo: Path, wheels: Path, interpreter: Path, *specs: str) -> None:
    options = InstallOptions(python=str(interpreter), no_index=True, find_links=(str(wheels),))
    with Repo(repo, install=options) as opened:
        if len(specs) == 1:
            opened.ensure(specs[0])
        else:
            opened.ensure_together(specs)


def test_a_distribution_gives_one_layer_from_any_batch(
    tmp_path: Path, wheels: Path, interpreter: Path, one_core: None
) -> None:
    # One core here (the fixture), then both again: one compiling interpreter, then two.
    ensure(tmp_path / "alone-one-core", wheels, interpreter, "kept-lib==1.0")
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    ensure(tmp_path / "alone", wheels, interpreter, "kept-lib==1.0")
    ensure(tmp_path / "with-others", wheels, interpreter, "other-lib==1.0", "kept-lib==1.0", "third-lib==1.0")
    ensure(tmp_path / "with-one-other", wheels, interpreter, "kept-lib==1.0", "third-lib==1.0")
    repos = ["alone-one-core", "alone", "with-others", "with-one-other"]
    digests = {repo: stored_layer(tmp_path / repo, "kept-lib", tmp_path / f"{repo}.tar.gz") for repo in repos}
    assert len(set(digests.values())) == 1, digests
