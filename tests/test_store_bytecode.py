"""One wheel, one layer, from any repo and any batch: a stored distribution's pycs, and so its OCI layer, are the
same bytes whatever else its batch compiled in the same interpreters and however many interpreters shared the work.

CPython's marshal flags an object for back-references when its reference count is above 1, and sorts a set's
elements by their marshal bytes, flag included: both depend on what else lives in the compiling interpreter. The
interpreters here hold, while marshalling a code object, one reference to each of its constants equal to one they
compiled before (``sharingpython``), as interpreters whose counts show their history do: the raw pycs of one source
then differ from batch to batch, and the normalised ones do not."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest
from sharingpython import one_core, sharing_python
from wheels import make_wheel

from repoinstall import InstallOptions, Repo
from repoinstall._oci import layer

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
    return sharing_python(tmp_path_factory.mktemp("sharing-python"))


def stored_layer(repo: Path, name: str, out: Path) -> str:
    (stored,) = glob.glob(str(repo / "store" / "*" / name / "*"))
    return layer.build(stored, str(out)).digest


def ensure(repo: Path, wheels: Path, interpreter: Path, *specs: str) -> None:
    options = InstallOptions(python=str(interpreter), no_index=True, find_links=(str(wheels),))
    with Repo(repo, install=options) as opened:
        if len(specs) == 1:
            opened.ensure(specs[0])
        else:
            opened.ensure_together(specs)


def test_a_distribution_gives_one_layer_from_any_batch(tmp_path: Path, wheels: Path, interpreter: Path) -> None:
    with one_core():  # one compiling interpreter, then one per core
        ensure(tmp_path / "alone-one-core", wheels, interpreter, "kept-lib==1.0")
    ensure(tmp_path / "alone", wheels, interpreter, "kept-lib==1.0")
    ensure(tmp_path / "with-others", wheels, interpreter, "other-lib==1.0", "kept-lib==1.0", "third-lib==1.0")
    ensure(tmp_path / "with-one-other", wheels, interpreter, "kept-lib==1.0", "third-lib==1.0")
    repos = ["alone-one-core", "alone", "with-others", "with-one-other"]
    digests = {repo: stored_layer(tmp_path / repo, "kept-lib", tmp_path / f"{repo}.tar.gz") for repo in repos}
    assert len(set(digests.values())) == 1, digests
