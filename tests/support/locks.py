"""Lock files for tests and benchmarks: a pylock.toml shaped as uv writes one for a real project (an sdist and
many wheels per package, each with URL, upload time, size and sha256), a lock of wheels an index serves, with
extras and dependency groups, and hashed requirements lines."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

#: Twenty platform tags, as a numpy-like project publishes them; one or two fit any CPython 3.9-3.14 on Linux.
WHEEL_TAGS = [
    f"cp{minor}-cp{minor}-{platform}"
    for minor in (39, 310, 311, 312, 313)
    for platform in (
        "manylinux_2_17_x86_64.manylinux2014_x86_64",
        "manylinux_2_17_aarch64.manylinux2014_aarch64",
        "musllinux_1_2_x86_64",
        "win_amd64",
    )
]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def uv_like_pylock(packages: int = 50, tags: list[str] | None = None, *, py3_wheel: bool = True) -> str:
    """``packages`` packages, each with an sdist, a wheel per tag and (``py3_wheel``) a py3-none-any one; every
    fifth carries a marker that holds on CPython."""
    lines = ['lock-version = "1.0"', 'created-by = "uv"', 'requires-python = ">=3.9"', ""]
    for number in range(packages):
        name = f"package-{number:02d}"
        module = name.replace("-", "_")
        version = f"{number % 7 + 1}.{number % 5}.{number}"
        when = f"2025-01-0{number % 9 + 1}T10:00:00.000Z"
        lines += ["[[packages]]", f'name = "{name}"', f'version = "{version}"']
        if number % 5 == 0:
            lines.append("marker = \"python_full_version >= '3.9' and platform_python_implementation == 'CPython'\"")
        lines.append('index = "https://pypi.org/simple"')
        sdist = f"{module}-{version}.tar.gz"
        lines.append(
            f'sdist = {{ url = "https://files.example.org/packages/ab/cd/{sdist}", upload-time = {when}, '
            f'size = {10_000 + number}, hashes = {{ sha256 = "{sha256(sdist)}" }} }}'
        )
        lines.append("wheels = [")
        for tag in [*(WHEEL_TAGS if tags is None else tags), *(["py3-none-any"] if py3_wheel else [])]:
            wheel = f"{module}-{version}-{tag}.whl"
            lines.append(
                f'    {{ url = "https://files.example.org/packages/ab/cd/ef/{wheel}", upload-time = {when}, '
                f'size = {123_456 + number}, hashes = {{ sha256 = "{sha256(wheel)}" }} }},'
            )
        lines += ["]", ""]
    return "\n".join(lines)


def served_pylock(
    url: str,
    wheels: Sequence[tuple[Path, str | None]],
    *,
    extras: Sequence[str] = (),
    groups: Sequence[str] = (),
    default_groups: Sequence[str] = (),
) -> str:
    """A PEP 751 lock of ``wheels`` as an index at ``url`` serves them (each file's URL and sha256), each with its
    marker, declaring ``extras``, ``dependency-groups`` and ``default-groups``: what a locker writes for a project
    with optional dependencies and dependency groups."""
    lines = ['lock-version = "1.0"', 'created-by = "tests"']
    for key, values in (("extras", extras), ("dependency-groups", groups), ("default-groups", default_groups)):
        if values:
            lines.append(f"{key} = [{', '.join(json.dumps(v) for v in values)}]")
    for wheel, marker in wheels:
        name, version = wheel.name.split("-")[:2]
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines += ["", "[[packages]]", f'name = "{name.replace("_", "-")}"', f'version = "{version}"']
        if marker is not None:
            lines.append(f"marker = {json.dumps(marker)}")
        lines.append(f'wheels = [{{ url = "{url}{wheel.name}", hashes = {{ sha256 = "{digest}" }} }}]')
    return "\n".join(lines) + "\n"
