"""``list``'s default view: each environment's trees, one line each, never wider than :data:`WIDTH` columns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._disk.manifest import TreeEntry

#: The widest line the default view prints (``--long`` and ``--json`` give every detail).
WIDTH = 100
_MORE = "..."


def short_lines(trees: Sequence[tuple[TreeEntry, list[str]]]) -> list[str]:
    """A header per environment, then ``  name[extras]==version  YYYY-MM-DD HH:MM  what it holds`` per tree (what
    ``held`` names), each line cut to :data:`WIDTH` columns."""
    lines: list[str] = []
    by_env: dict[str, list[tuple[TreeEntry, list[str]]]] = {}
    for record, held in trees:
        by_env.setdefault(record.env, []).append((record, held))
    for env in sorted(by_env):
        lines.append(_fit(f"{env}:"))
        rows = [(_pin(record), _when(record.installed_at), held) for record, held in by_env[env]]
        pad = min(max(len(pin) for pin, _, _ in rows), 40)
        for pin, when, held in rows:
            holds = f"with {', '.join(held)}" if held else ""
            lines.append(_fit(f"  {pin:<{pad}}  {when:<16}  {holds}".rstrip()))
    return lines


def _pin(record: TreeEntry) -> str:
    extras = f"[{','.join(record.extras)}]" if record.extras else ""
    return f"{record.name}{extras}=={record.version}"


def _when(installed_at: str) -> str:
    """``2026-11-26T19:40:05Z`` as ``2026-11-26 19:40`` (anything else as it is)."""
    date, _, time = installed_at.partition("T")
    return f"{date} {time[:5]}" if time else installed_at


def _fit(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - len(_MORE)] + _MORE
