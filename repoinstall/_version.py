"""The installed version, a leaf every layer may read (the repo's format file names the release that wrote it).

The release (CHANGELOG.md's latest); pyproject.toml's ``version`` and the chart's ``appVersion`` say the same (a
test checks). A literal: reading the distribution's metadata would cost the warm path an importlib.metadata import.
"""

from __future__ import annotations

__version__ = "0.4.0"
