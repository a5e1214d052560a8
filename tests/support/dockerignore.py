"""Which files of a directory a ``docker build`` sends as its context, by the rules of its ``.dockerignore``, as
Docker applies them (moby's patternmatcher): ``*`` and ``?`` stay within one path segment, ``**`` spans any
number of them, ``!`` takes a match back, the last matching line wins, and a line that matches a directory
matches everything below it. No container engine needed."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple


class Rule(NamedTuple):
    pattern: str
    regex: re.Pattern[str]
    keep: bool  # a "!" line: what it matches goes back into the context


def _regex(pattern: str) -> re.Pattern[str]:
    out, index = "^", 0
    while index < len(pattern):
        char = pattern[index]
        index += 1
        if char == "*" and pattern[index : index + 1] == "*":
            index += 1
            if pattern[index : index + 1] == "/":
                index += 1  # "**/" is "**"
            out += ".*" if index == len(pattern) else "(.*/)?"
        elif char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "[":  # a character class, as filepath.Match has it
            end = pattern.index("]", index)
            body = pattern[index:end]
            out += "[" + ("^" + body[1:] if body.startswith("^") else body) + "]"
            index = end + 1
        elif char == "\\" and index < len(pattern):
            out += re.escape(pattern[index])
            index += 1
        else:
            out += re.escape(char)
    return re.compile(out + "$")


def parse(text: str) -> list[Rule]:
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        pattern = os.path.normpath(line[1:].strip() if keep else line).lstrip("/")
        if pattern != ".":
            rules.append(Rule(pattern, _regex(pattern), keep))
    return rules


def excluded(rules: list[Rule], path: str) -> bool:
    """Whether ``path`` (relative, with ``/``) is left out of the context."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]  # the parents first, the path itself last
    out = False
    for rule in rules:
        if rule.keep == out and any(rule.regex.match(candidate) for candidate in candidates):
            out = not rule.keep
    return out


def context(root: Path, rules: list[Rule]) -> Iterator[str]:
    """Every file sent, relative to ``root``. Like Docker, an excluded directory is not entered unless a ``!`` line
    names something below it."""
    for directory, subdirs, files in os.walk(root):
        relative = os.path.relpath(directory, root)
        prefix = "" if relative == "." else relative.replace(os.sep, "/") + "/"
        subdirs[:] = [
            name
            for name in subdirs
            if not excluded(rules, prefix + name)
            or any(rule.keep and (rule.pattern + "/").startswith(prefix + name + "/") for rule in rules)
        ]
        yield from (prefix + name for name in files if not excluded(rules, prefix + name))
