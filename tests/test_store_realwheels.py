"""numpy, pandas and scipy, real wheels, stored by five repos in five different batches: each distribution gives
one layer, the same digest from every repo, though each batch compiled another mix of sources in its interpreters,
on one core or two, and two of them in interpreters whose reference counts show what they compiled before
(``sharingpython``).

The wheels are what ``.ci/requirements-realwheels.txt`` pins; ``.ci/run`` downloads them, hash-checked, to
``REPOINSTALL_REAL_WHEELS``."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import sys
from pathlib import Path

import httpx
import pytest
from helpers import run
from registry import registry
from sharingpython import one_core, sharing_python

from repoinstall import InstallOptions, Repo
from repoinstall._oci import layer

ROOT = Path(__file__).resolve().parents[1]
WHEELS = Path(os.environ.get("REPOINSTALL_REAL_WHEELS", "/var/tmp/repoinstall-realwheels"))
#: CI: missing wheels fail the test instead of skipping it (a skip would hide a missing download step).
REQUIRED = os.environ.get("REPOINSTALL_REQUIRE_FUSE") == "1"
#: The annotation naming a one-distribution layer's distribution.
NAME = "org.repoinstall.dist.name"
PINS = dict(re.findall(r"^([a-z-]+)==(\S+)", (ROOT / ".ci" / "requirements-realwheels.txt").read_text(), re.M))


@pytest.fixture(scope="module")
def wheels() -> Path:
    found = {path.name.split("-")[0].replace("_", "-").lower() for path in WHEELS.glob("*.whl")}
    if missing := sorted(set(PINS) - found):
        reason = f"no {', '.join(missing)} wheel in {WHEELS} (bash .ci/run downloads them)"
        if REQUIRED:
            pytest.fail(f"the real-wheel layer test is required here but cannot run: {reason}")
        pytest.skip(reason)
    if sys.version_info[:2] != (3, 11) or sys.platform != "linux":
        pytest.skip("the pinned wheels are CPython 3.11's for Linux")
    return WHEELS


def pinned(name: str) -> str:
    return f"{name}=={PINS[name]}"


def test_each_real_distribution_gives_one_layer_from_five_batches(tmp_path: Path, wheels: Path) -> None:
    plain = sys.executable
    sharing = str(sharing_python(tmp_path))
    # (repo, interpreter, on one core, how it is ensured, specs)
    batches = [
        ("numpy-alone", plain, False, "one", [pinned("numpy")]),
        ("pandas", plain, True, "one", [pinned("pandas")]),
        ("scipy-and-six", sharing, False, "all", [pinned("scipy"), pinned("six")]),
        ("together", plain, False, "together", [pinned("pandas"), pinned("scipy")]),
        ("all-sharing-one-core", sharing, True, "all", [pinned("scipy"), pinned("python-dateutil"), pinned("pandas")]),
    ]
    digests: dict[str, dict[str, str]] = {}
    for repo, python, alone, how, specs in batches:
        options = InstallOptions(python=python, no_index=True, find_links=(str(wheels),))
        with Repo(tmp_path / repo, install=options) as opened, one_core() if alone else contextlib.nullcontext():
            if how == "one":
                opened.ensure(specs[0])
            elif how == "all":
                opened.ensure_all(specs)
            else:
                opened.ensure_together(specs)
        for record in glob.glob(str(tmp_path / repo / "store" / "*" / "*" / "*" / "*.dist-info" / "RECORD")):
            stored = os.path.dirname(os.path.dirname(record))  # a stored distribution (not a kept closure)
            name = Path(stored).parent.name
            if name not in PINS:
                continue  # a together tree's own record
            out = tmp_path / f"{repo}-{name}.tar.gz"
            digests.setdefault(name, {})[repo] = layer.build(stored, str(out)).digest
            out.unlink()
    print("\nlayer digests:")
    for name, by_repo in sorted(digests.items()):
        print(f"  {name}: {sorted(set(by_repo.values()))} from {len(by_repo)} repos")
    assert sorted(digests) == sorted(PINS)
    assert all(len(by_repo) >= 2 for by_repo in digests.values()), digests  # each stored by several batches
    assert {name: len(set(by_repo.values())) for name, by_repo in digests.items()} == dict.fromkeys(digests, 1), digests


def test_a_numpy_pandas_image_shares_its_numpy_layer_with_another_tree(tmp_path: Path, wheels: Path) -> None:
    """Two trees holding the same numpy, pushed from two repos: their images name one numpy layer, so the registry
    keeps it once and a node pulls it once."""
    with registry(tmp_path / "registry") as oci:
        where = f"{oci.host}/realwheels"
        manifests = []
        for repo, spec in (("one", pinned("pandas")), ("two", pinned("scipy"))):
            done = run("push", where, spec, "--repo", tmp_path / repo, "--no-index", "-f", wheels, "--plain-http",
                       "--json")  # fmt: skip
            assert done.returncode == 0, done.stderr
            (image,) = json.loads(done.stdout)["images"]
            got = httpx.get(
                f"http://{oci.host}/v2/realwheels/manifests/{image['manifest']}",
                headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
            )
            got.raise_for_status()
            manifests.append(got.json())
    numpy = [
        {layer["digest"] for layer in manifest["layers"] if layer["annotations"].get(NAME) == "numpy"}
        for manifest in manifests
    ]
    assert len(numpy[0]) == 1 and numpy[0] == numpy[1], numpy  # one numpy layer, the same in both images
    assert all(len(manifest["layers"]) <= 100 for manifest in manifests)
