"""The public API: result types of every operation importable from ``repoinstall`` (loaded on first use), and
``ensure_all`` typed by ``return_exceptions``."""

from __future__ import annotations

import subprocess
import sys
import typing

import repoinstall
from repoinstall import Repo


def test_every_result_type_is_exported() -> None:
    from repoinstall._disk.manifest import TreeEntry
    from repoinstall._ops.doctor import Finding
    from repoinstall._ops.gc import Removal
    from repoinstall._ops.lockinfo import LockInfo
    from repoinstall._ops.remove import Removed
    from repoinstall._ops.verify import TreeReport
    from repoinstall._store.usage import StoreUsage

    exported = {name: getattr(repoinstall, name) for name in repoinstall.__all__}
    assert exported["TreeReport"] is TreeReport and exported["LockInfo"] is LockInfo
    assert exported["Removal"] is Removal and exported["Finding"] is Finding and exported["TreeEntry"] is TreeEntry
    assert exported["Removed"] is Removed and exported["StoreUsage"] is StoreUsage
    from repoinstall._errors import InstallError, SourceRefused
    from repoinstall._oci.layer import Refused

    assert exported["SourceRefused"] is SourceRefused and issubclass(Refused, SourceRefused)
    assert issubclass(SourceRefused, InstallError)


def test_importing_the_package_loads_no_operator_module() -> None:
    probe = "import sys, repoinstall; print(sorted(m for m in sys.modules if m.startswith('repoinstall._ops')))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_ensure_all_is_overloaded_on_return_exceptions() -> None:
    for method in (Repo.ensure_all, Repo.aensure_all):
        overloads = typing.get_overloads(method)
        assert len(overloads) == 2
        hints = [typing.get_type_hints(o)["return"] for o in overloads]
        assert hints[0] == list[repoinstall.EnsureResult], hints
