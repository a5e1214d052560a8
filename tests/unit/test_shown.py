"""A string from outside (a registry's) is shown on one line: control characters escaped, cut to a length."""

from __future__ import annotations

from repoinstall._redact import shown


def test_control_characters_are_escaped_and_long_text_cut() -> None:
    forged = "linux\nrepoinstall: error: forged\r\x1b[2J\x9b2J\u202eevil\t"
    said = shown(forged)
    assert said == "linux\\nrepoinstall: error: forged\\r\\x1b[2J\\x9b2J\\u202eevil\\t"
    assert said.isprintable() and len(said.splitlines()) == 1
    assert shown("manylinux_2_36 x86_64") == "manylinux_2_36 x86_64"
    assert shown(ValueError("a\nb")) == "a\\nb"
    assert shown("x" * 10_000) == "x" * 300 + "..."
