"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from repoinstall._disk.layout import Layout


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[Layout]:
    layout = Layout(tmp_path / "repo")
    layout.writable_fd()
    yield layout
    layout.close()
