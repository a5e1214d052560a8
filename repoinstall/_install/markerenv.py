"""The PEP 508 marker values and wheel tags of the interpreter trees are installed for (``--python``), asked once
per process."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._lockfile.environment import Environment

#: packaging.markers.default_environment(), for an interpreter that may not have packaging.
_SCRIPT = """
import json, os, platform, sys
def version(info):
    shown = "{0.major}.{0.minor}.{0.micro}".format(info)
    return shown if info.releaselevel == "final" else shown + info.releaselevel[0] + str(info.serial)
print(json.dumps({
    "implementation_name": sys.implementation.name,
    "implementation_version": version(sys.implementation.version),
    "os_name": os.name,
    "platform_machine": platform.machine(),
    "platform_release": platform.release(),
    "platform_system": platform.system(),
    "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
    "sys_platform": sys.platform,
}))
"""


@functools.cache
def marker_environment(python: str) -> dict[str, str] | None:
    """Marker values for ``python`` (this interpreter's own without a process); ``None`` if it cannot say."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        from packaging.markers import default_environment

        return {key: str(value) for key, value in default_environment().items()}
    try:
        shown = subprocess.run(
            [python, "-I", "-c", _SCRIPT], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        values = json.loads(shown)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if isinstance(values, dict) and all(isinstance(v, str) for v in values.values()):
        return {str(k): v for k, v in values.items()}
    return None


#: The wheel tags ``python`` takes, best first: packaging.tags.sys_tags() run by that interpreter, with this
#: process's packaging appended to its path (its own, if it has one, comes first; packaging is pure Python).
_TAGS_SCRIPT = """
import json, sys
sys.path.append(sys.argv[1])
from packaging.tags import sys_tags
print(json.dumps([str(tag) for tag in sys_tags()]))
"""


@functools.cache
def lock_environment(python: str) -> Environment:
    """The environment a lock is read for when its tree is installed for ``python``: its markers and wheel tags
    (``--python`` of another interpreter), this interpreter's without a process. One that cannot say is read as
    this one: its installer then names what does not fit."""
    from .._lockfile.environment import THIS, Environment

    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return THIS
    markers = marker_environment(python)
    if markers is None:
        return THIS
    import packaging

    where = os.path.dirname(os.path.dirname(os.path.abspath(packaging.__file__)))
    try:
        shown = subprocess.run(
            [python, "-I", "-c", _TAGS_SCRIPT, where], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        tags = json.loads(shown)
    except (OSError, subprocess.SubprocessError, ValueError):
        return Environment.of(markers)
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        return Environment.of(markers)
    return Environment.of(markers, tags)
