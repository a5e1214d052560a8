"""The PEP 508 marker values of the interpreter trees are installed for (``--python``), asked once per process."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

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
