"""Build small real wheels for tests: METADATA, WHEEL, RECORD with real hashes, a module that knows its version."""

from __future__ import annotations

import base64
import hashlib
import random
import zipfile
from pathlib import Path
from typing import Any


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    *,
    requires: tuple[str, ...] = (),
    extras: dict[str, tuple[str, ...]] | None = None,
    payload: int = 0,
    incompressible: bool = False,
    requires_python: str | None = None,
    tag: str = "py3-none-any",
    modules: int = 0,
    scripts: dict[str, str] | None = None,
    more: dict[str, bytes] | None = None,
) -> Path:
    """Write ``{name}-{version}-{tag}.whl`` with module ``{name}`` (dashes as underscores) and, for benchmarks,
    ``modules`` more submodules of about 3 KB of real code each (something to unpack and compile); ``more``: other
    files, by their path in the wheel."""
    module = name.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if requires_python is not None:
        metadata.append(f"Requires-Python: {requires_python}")
    metadata += [f"Requires-Dist: {r}" for r in requires]
    for extra, reqs in (extras or {}).items():
        metadata.append(f"Provides-Extra: {extra}")
        metadata += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    files = {
        f"{module}/__init__.py": (
            f'VERSION = "{version}"\nNAME = "{name}"\n\n\ndef version(*args):\n    return VERSION, list(args)\n'
            + ("\n\ndef main():\n    print(NAME, VERSION)\n" if scripts else "")
        ).encode(),
        f"{dist_info}/METADATA": ("\n".join(metadata) + "\n\n").encode(),
        f"{dist_info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode(),
    }
    if scripts:  # console scripts: name -> "module:function"
        lines = "".join(f"{script} = {target}\n" for script, target in scripts.items())
        files[f"{dist_info}/entry_points.txt"] = f"[console_scripts]\n{lines}".encode()
    for index in range(modules):
        functions = "".join(
            f"\n\ndef step_{index}_{n}(values, scale={n}):\n"
            f"    total = 0\n    for value in values:\n        total += (value * scale) % {n + 7}\n"
            f"    return {{'module': {index}, 'step': {n}, 'total': total}}\n"
            for n in range(20)
        )
        files[f"{module}/part_{index:03d}.py"] = f'"""Part {index} of {name}."""{functions}'.encode()
    if payload:
        # Seeded, so the wheel (and its hash) is the same in every run.
        data = random.Random(name).randbytes(payload) if incompressible else bytes(range(256)) * (payload // 256 + 1)
        files[f"{module}/payload.bin"] = data
    files.update(more or {})
    record = "".join(f"{path},{_hash(data)},{len(data)}\n" for path, data in files.items())
    record += f"{dist_info}/RECORD,,\n"
    files[f"{dist_info}/RECORD"] = record.encode()
    path = directory / f"{module}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    return path


def make_broken_wheel(directory: Path, name: str, version: str) -> Path:
    """A file with a wheel's name that is not a zip archive."""
    path = directory / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    path.write_bytes(b"this is not a zip archive\n" * 10)
    return path


def wheels_of_installed(directory: Path, *requirements: str) -> list[Path]:
    """Wheels of the pure-Python distributions installed here that ``requirements`` need, their dependencies
    included (markers evaluated for this interpreter): what an index on 127.0.0.1 serves so that a fresh venv
    installs the project as it would from PyPI, with no network. Scripts are left out (the installer writes them
    from entry_points.txt), and so is bytecode."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    written: list[Path] = []
    pending = [Requirement(text) for text in requirements]
    while pending:
        wanted = pending.pop()
        name = canonicalize_name(wanted.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        for text in dist.requires or ():
            needed = Requirement(text)
            extras = wanted.extras or {""}
            if needed.marker is None or any(needed.marker.evaluate({"extra": extra}) for extra in extras):
                pending.append(needed)
        written.append(_wheel_of(dist, directory))
    return written


def _wheel_of(dist: Any, directory: Path) -> Path:
    """``dist``: an ``importlib.metadata`` distribution, or the ``importlib_metadata`` backport's where a package in
    the environment installs its finder (the same interface)."""
    from packaging.utils import canonicalize_name

    module = canonicalize_name(dist.metadata["Name"]).replace("-", "_")
    version = dist.version
    files: dict[str, bytes] = {}
    dist_info = ""
    for file in dist.files or ():
        member = file.as_posix()
        if member.startswith("..") or "__pycache__" in member or member.endswith((".pyc", "/RECORD", "/INSTALLER")):
            continue
        if member.endswith("/direct_url.json") or member.endswith("/REQUESTED"):
            continue
        if member.split("/")[0].endswith(".dist-info"):
            dist_info = member.split("/")[0]
        files[member] = Path(str(file.locate())).read_bytes()
    record = "".join(f"{path},{_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{dist_info}/RECORD"] = (record + f"{dist_info}/RECORD,,\n").encode()
    path = directory / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    return path
