"""The installed version, a leaf every layer may read (the repo's format file names the release that wrote it).

pyproject.toml's ``version`` says the same (a test checks). A literal: reading the distribution's metadata would
cost the warm path an importlib.metadata import.
"""

from __future__ import annotations

__version__ = "0.1.0"
