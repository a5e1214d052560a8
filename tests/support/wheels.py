"""Build small real wheels for tests: METADATA, WHEEL, RECORD with real hashes, a module that knows its version."""

from __future__ import annotations

import base64
import hashlib
import random
import zipfile
from pathlib import Path


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
