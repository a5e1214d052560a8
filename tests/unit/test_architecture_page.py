"""The architecture page and the protocol page say what the code does: every layer of the layer test is in the
architecture page's table, and both pages number the protocol's steps as ``ensure_tree``'s comments number them."""

from __future__ import annotations

import re
from pathlib import Path

from test_import_graph import LAYERS

ROOT = Path(__file__).parents[2]
ARCHITECTURE = ROOT / "docs" / "project" / "architecture.md"
PROTOCOL = ROOT / "docs" / "concepts" / "protocol.md"


def _code_steps() -> list[tuple[int, str]]:
    """``ensure_tree``'s numbered steps: (number, the words before the first ``:`` or ``,``), lowercased."""
    source = (ROOT / "repoinstall" / "_install" / "protocol.py").read_text()
    return [(int(n), words.strip().lower()) for n, words in re.findall(r"^\s*# (\d)\. ([\w ]+?)[:,]", source, re.M)]


def _page_steps(page: Path) -> list[tuple[int, str]]:
    return [(int(n), words.lower()) for n, words in re.findall(r"^\s*(\d)\. \*\*([\w ]+)\*\*", page.read_text(), re.M)]


def test_the_code_numbers_eight_steps() -> None:
    steps = _code_steps()
    assert [n for n, _ in steps] == list(range(1, 9)), steps


def test_both_pages_number_the_steps_as_the_code_does() -> None:
    code = dict(_code_steps())
    for page in (ARCHITECTURE, PROTOCOL):
        # A page's step n names the code's step n by its first words ("**Check again** inside the lock").
        named = {n: words for n, words in _page_steps(page) if code.get(n, "").startswith(words)}
        assert sorted(named) == sorted(code), (page.name, named)


def test_every_layer_is_in_the_architecture_table() -> None:
    table = [line for line in ARCHITECTURE.read_text().splitlines() if line.startswith("| `")]
    named = [set(re.findall(r"`([\w.]+)/?`", line.split("|")[1])) for line in table]
    assert [set().union(*(n for n in named if n & layer)) for layer in LAYERS] == LAYERS
    assert sorted(set().union(*named)) == sorted(set().union(*LAYERS))
