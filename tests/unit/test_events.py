"""Every message the package logs is an event with a stable name, its arguments named, and each name is in the
reference (docs/reference/json.md)."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import repoinstall
from repoinstall._events import BASE, NAMED, OWN, name

PACKAGE = Path(repoinstall.__file__).parent
REFERENCE = PACKAGE.parent / "docs" / "reference" / "json.md"
LEVELS = {"debug", "info", "warning", "error", "critical", "exception"}


def logged() -> list[tuple[str, int, str, int]]:
    """(file, line, format string, how many arguments) of every ``logger().LEVEL("...", ...)`` in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if "logger()" not in ast.unparse(node.func.value) and ast.unparse(node.func.value) != "log":
                continue
            args = node.args[1:] if node.func.attr == "log" else node.args if node.func.attr in LEVELS else None
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                found.append((path.name, node.lineno, args[0].value, len(args) - 1))
    return found


def test_every_message_logged_has_an_event_name_and_one_name_per_argument() -> None:
    messages = logged()
    assert len(messages) > 50
    for where, line, message, count in messages:
        assert message in NAMED, (where, line, message)
        assert len(NAMED[message][1]) == count, (where, line, message)


def test_every_event_and_figure_name_is_in_the_reference_and_none_hides_a_base_field() -> None:
    text = REFERENCE.read_text()
    for event, figures in NAMED.values():
        assert f"`{event}`" in text, event
        assert not set(figures) & (set(BASE) - {"tree"}), (event, figures)
    for event in OWN:
        assert f"`{event}`" in text, event


def test_a_record_is_named_and_its_text_figures_are_redacted() -> None:
    record = logging.LogRecord(
        "repoinstall", logging.INFO, __file__, 1, "waiting for %s: %s", ("/repo/lock", "https://u:pw@h/x"), None
    )
    name(record)
    assert (record.event, record.tree) == ("lock.wait", "")  # type: ignore[attr-defined]
    assert record.figures == {"lock": "/repo/lock", "holder": "https://****@h/x"}  # type: ignore[attr-defined]
