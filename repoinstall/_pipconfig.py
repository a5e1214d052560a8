"""Which indexes to ask, as pip would: pip's own configuration merged with repoinstall's options.

pip's configuration is read by pip itself (``python -m pip config list``), so pip.conf files in every place
pip looks, ``PIP_CONFIG_FILE`` and the ``PIP_*`` variables mean exactly what they mean to pip. Precedence is
pip's too: a variable beats the ``[install]`` section, which beats ``[global]``; ``--index-url`` replaces,
``--extra-index-url``, ``--find-links`` and ``--constraint`` add to what the configuration lists. A requirements
file's index lines (:class:`~repoinstall._options.FileIndex`) come last, as pip reads them after its options: its
``--index-url`` replaces the whole list so far (the configuration's extra indexes included), its
``--extra-index-url`` and ``--find-links`` add, its ``--no-index`` leaves no index.
"""

from __future__ import annotations

import ast
import functools
import math
import os
import subprocess
import sys
import threading
from typing import NamedTuple

from . import _log
from ._formats import NO_BINARY, ONLY_BINARY, Formats
from ._options import InstallOptions
from ._urls import check_sources

PYPI = "https://pypi.org/simple"
#: pip's own defaults for the two network settings resolution shares with it.
PIP_TIMEOUT = 15.0
PIP_RETRIES = 5
_TRUE = frozenset({"1", "y", "yes", "t", "true", "on"})


class IndexConfig(NamedTuple):
    """Where versions come from and how to reach them. URLs may carry credentials: redact before showing."""

    index_urls: tuple[str, ...]
    find_links: tuple[str, ...]
    constraints: tuple[str, ...]
    pre: bool
    timeout: float
    retries: int
    cert: str | None
    trusted_hosts: tuple[str, ...]
    #: pip's ``proxy`` (``scheme://[user:passwd@]proxy.server:port``) and ``client-cert`` (a PEM file with the
    #: private key and the certificate): resolution goes out the way the installers do.
    proxy: str | None = None
    client_cert: str | None = None
    #: pip's configuration's ``no-binary`` and ``only-binary``, then the options': which formats may be installed.
    formats: Formats = Formats()

    @property
    def sources(self) -> tuple[str, ...]:
        return self.index_urls + self.find_links


def index_config(options: InstallOptions | None, *, pre: bool = False) -> IndexConfig:
    """The indexes, find-links and constraints pip would use for ``options``, plus its network settings."""
    options = options or InstallOptions()
    pip = pip_settings(options.python)
    no_index = options.no_index or _flag(pip.get("no-index"))
    primary = options.index_url or pip.get("index-url") or PYPI
    extras = [*pip.get("extra-index-url", "").split(), *options.extra_index_urls]
    lines = options.file_index
    if lines is not None and lines.index_url is not None:
        primary, extras = lines.index_url, []
    extras += lines.extra_index_urls if lines is not None else ()
    no_index = no_index or (lines is not None and lines.no_index)
    indexes = () if no_index else tuple(dict.fromkeys([primary, *extras]))
    from_file = lines.find_links if lines is not None else ()
    find_links = tuple(dict.fromkeys([*pip.get("find-links", "").split(), *options.find_links, *from_file]))
    check_sources(indexes, find_links)
    return IndexConfig(
        index_urls=indexes,
        find_links=find_links,
        constraints=tuple(dict.fromkeys([*pip.get("constraint", "").split(), *options.constraints])),
        pre=pre or _flag(pip.get("pre")),
        timeout=_number(pip.get("timeout") or pip.get("default-timeout"), PIP_TIMEOUT, positive=True),
        retries=int(_number(pip.get("retries"), PIP_RETRIES, positive=False)),
        cert=pip.get("cert") or None,
        trusted_hosts=tuple(
            dict.fromkeys(
                [
                    *pip.get("trusted-host", "").split(),
                    *options.trusted_hosts,
                    *(lines.trusted_hosts if lines is not None else ()),
                ]
            )
        ),
        proxy=pip.get("proxy") or None,
        client_cert=pip.get("client-cert") or None,
        formats=Formats.of(
            [
                *((flag, pip[flag]) for flag in (NO_BINARY, ONLY_BINARY) if pip.get(flag)),
                *((NO_BINARY, value) for value in options.no_binary),
                *((ONLY_BINARY, value) for value in options.only_binary),
            ]
        ),
    )


def pip_settings(python: str) -> dict[str, str]:
    """pip's effective settings for ``pip install`` (key -> value), read once per process by pip itself.

    Threads (``--jobs``) that ask at once share one read: pip's start-up is the costly part.
    """
    with _settings_guard:
        return _read_settings(python)


@functools.lru_cache(maxsize=4)
def _read_settings(python: str) -> dict[str, str]:
    if python == sys.executable and not any(os.path.exists(path) for path in _config_files()):
        # No file for pip to read (a container's usual case): its settings are its PIP_* variables, read as pip
        # reads them, without starting pip (a third of a second, more than a uv install of a small tree).
        return parse_listing(
            "".join(
                f":env:.{key[4:].lower()}={value!r}\n"
                for key, value in os.environ.items()
                if key.startswith("PIP_") and key[4:].lower() not in ("version", "help")
            )
        )
    try:
        listing = subprocess.run(
            [python, "-m", "pip", "config", "list"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        _log.logger().warning("cannot read pip's configuration (%s): using pip's defaults", type(error).__name__)
        return {}
    return parse_listing(listing)


def _config_files() -> list[str]:
    """Every file this interpreter's pip would read its configuration from (pip's documented places)."""
    named = os.environ.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []  # pip reads no file at all
    home = os.path.expanduser("~")
    user = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    system = [d for d in (os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep) if d]
    return [
        *(os.path.join(d, "pip", "pip.conf") for d in system),
        "/etc/pip.conf",
        os.path.join(home, ".pip", "pip.conf"),
        os.path.join(user, "pip", "pip.conf"),
        os.path.join(sys.prefix, "pip.conf"),
        *([named] if named else []),
    ]


def forget_settings() -> None:
    """Read pip's configuration again next time (tests change it between cases)."""
    _read_settings.cache_clear()


_settings_guard = threading.Lock()


def parse_listing(listing: str) -> dict[str, str]:
    """``section.key='value'`` lines as pip prints them, reduced to what ``pip install`` would use."""
    ranked: dict[str, tuple[int, str]] = {}
    rank_of = {"global": 0, "install": 1, ":env:": 2}
    for line in listing.splitlines():
        dotted, sep, raw = line.partition("=")
        section, dot, key = dotted.rpartition(".")
        rank = rank_of.get(section)
        if not (sep and dot) or rank is None:
            continue
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            continue
        key = key.strip().replace("_", "-")
        if isinstance(value, str) and rank >= ranked.get(key, (-1, ""))[0]:
            ranked[key] = (rank, value)
    return {key: value for key, (_, value) in ranked.items()}


def _flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() in _TRUE


def _number(value: str | None, default: float, *, positive: bool) -> float:
    """pip's setting as a number, or the default when it is missing or unusable."""
    try:
        number = float(value) if value is not None else default
    except ValueError:
        return default
    usable = math.isfinite(number) and (number > 0 if positive else number >= 0)
    return number if usable else default
