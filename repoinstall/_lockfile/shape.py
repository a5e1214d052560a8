"""A lock file's shape, bounded before ``tomllib`` reads it: nesting depth, dotted-key length, number length.

``tomllib`` recurses once per nested array or inline table (5,000 levels end in ``RecursionError``) and is
quadratic in a dotted key's parts (one key of 20,000 parts in 40 KB took 19 s and 1.6 GB). The size cap of
:mod:`repoinstall._textfile` bounds neither. One linear pass over the text, aware of TOML's strings and comments,
refuses both first with one line; a real ``pylock.toml`` nests four deep (``packages[].wheels[].hashes``) and its
longest keys have three parts (``[tool.uv.sources]``), far below either bound.
"""

from __future__ import annotations

import re

from .._errors import RequirementsFileError

#: Arrays and inline tables nested deeper than this are refused: far above any lock, far below the interpreter's
#: recursion limit however deep the caller's own stack is.
MAX_DEPTH = 64
#: Dots in one key (``a.b.c`` has two), or in one table header: far above any lock, where ``tomllib`` is still fast.
MAX_DOTS = 64

#: Digits in a row, anywhere: no lock holds a number (or a version part) near this long, and Python refuses to
#: convert one of more than 4,300 digits (``ValueError``, in tomllib and in ``packaging``'s versions alike).
MAX_DIGITS = 1000
#: Tried at the start of a run of digits only, so each run is looked at once: linear in the text.
_LONG_NUMBER = re.compile(rf"(?<!\d)\d{{{MAX_DIGITS + 1}}}")

#: Whatever can open a string or comment, or changes depth or ends a key: everything else is skipped unread.
_TOKEN = re.compile(r"""\"\"\"|'''|["'#\[\]{}.=,\n]""")
#: The same without what only counts a key's dots: for a text no line of which has that many dots at all.
_NESTING = re.compile(r"""\"\"\"|'''|["'#\[\]{}]""")
#: Where a literal string, a one-line basic string or a comment ends, from just after its opening.
_CLOSE = {
    "'''": re.compile("'''"),
    "'": re.compile("'"),
    '"': re.compile(r'[^"\\\n]*(?:\\.[^"\\\n]*)*"'),  # unrolled: one C loop over plain characters
    "#": re.compile(r"(?=\n)|\Z"),
}
_OPENINGS = frozenset((*_CLOSE, '"""'))


def check_shape(path: str, text: str) -> None:
    """:class:`RequirementsFileError` (one line naming ``path`` and the line) if ``text`` nests deeper than
    :data:`MAX_DEPTH` or has a key or table header of more than :data:`MAX_DOTS` dots. An unterminated string
    ends the scan: ``tomllib`` names it. A run of more than :data:`MAX_DIGITS` digits, in a string or not, is
    refused as well."""
    if (number := _LONG_NUMBER.search(text)) is not None:
        raise RequirementsFileError(f"{path}:{_line(text, number.start())}: a number of more than {MAX_DIGITS} digits")
    depth = 0
    dots = 0
    position = 0
    # A key is one line: where no line has more dots than a key may, only nesting needs the scan (far fewer tokens).
    tokens = _TOKEN if any(line.count(".") > MAX_DOTS for line in text.splitlines()) else _NESTING
    while (found := tokens.search(text, position)) is not None:
        token = found.group()
        position = found.end()
        if token in _OPENINGS:
            ended = _closing(token, text, position)
            if ended is None:
                return
            position = ended
            continue
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise RequirementsFileError(
                    f"{path}:{_line(text, found.start())}: arrays or inline tables nested more than {MAX_DEPTH} deep"
                )
            dots = 0
        elif token in "]}":
            depth = max(depth - 1, 0)
        elif token == ".":
            dots += 1
            if dots > MAX_DOTS:
                raise RequirementsFileError(
                    f"{path}:{_line(text, found.start())}: a key of more than {MAX_DOTS + 1} dotted parts"
                )
        else:  # '=', ',' or a newline: a key ends or the next begins
            dots = 0


def _closing(opening: str, text: str, start: int) -> int | None:
    """Where the string opened by ``opening`` just before ``start`` ends (the index after it), or ``None``."""
    if opening == '"""':
        index = start
        while (quote := text.find('"""', index)) != -1:
            backslashes = 0
            while quote - 1 - backslashes >= start and text[quote - 1 - backslashes] == "\\":
                backslashes += 1
            if backslashes % 2 == 0:
                end = quote + 3
                while end < len(text) and end - quote < 5 and text[end] == '"':
                    end += 1  # up to two quotes of the content may stand right before the closing three
                return end
            index = quote + 1
        return None
    ended = _CLOSE[opening].match(text, start) if opening == '"' else _CLOSE[opening].search(text, start)
    return None if ended is None else ended.end()


def _line(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1
