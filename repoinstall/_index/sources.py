"""A project's files on each place pip would look: index pages (cached on the volume) and find-links."""

from __future__ import annotations

import os
import urllib.parse
import urllib.request
from typing import NamedTuple

from .._errors import ResolutionError
from .._redact import redact
from .._urls import file_path, split_credentials
from . import http as _http
from .cache import IndexCache, key_for
from .http import Plan
from .simple import ACCEPT, Link, PageError, local_links, parse_page, project_url


class Listing(NamedTuple):
    """A project's files on one source; ``found`` is false when the source does not know the project."""

    found: bool
    links: tuple[Link, ...]


def index_listing(index_url: str, project: str, cache: IndexCache, retries: int) -> Plan[Listing]:
    """The project's files on one index (PEP 691 JSON or PEP 503 HTML), through the shared cache."""
    bare, credentials = split_credentials(index_url)
    shown = redact(index_url)
    if bare.startswith("file:"):
        return _local_index(bare, project, shown)
    # Credentials are part of the question (another user may see another index) but never stored: hashed.
    key = key_for("index", bare, credentials[0] if credentials else "", project)

    def fetch() -> Plan[dict[str, object]]:
        url = project_url(bare, project)
        reply = yield from _http.get(url, retries, what=f"index {shown} ({project})", headers=[("Accept", ACCEPT)])
        listing = _listing(reply, shown, project)
        return _entry(listing, shown, project)

    entry = yield from cache.shared(key, f"index {shown} ({project})", fetch, _well_formed)
    return _from_entry(entry)


def find_links_listing(location: str, project: str, cache: IndexCache, retries: int) -> Plan[Listing]:
    """Files for the project in one find-links location: a local directory or HTML file, or an HTML page."""
    bare, _ = split_credentials(location)
    shown = redact(location)
    scheme = urllib.parse.urlsplit(bare).scheme
    if scheme in ("http", "https"):
        key = key_for("find-links", bare)

        def fetch() -> Plan[dict[str, object]]:
            reply = yield from _http.get(bare, retries, what=f"find-links {shown}", headers=[("Accept", "text/html")])
            return _entry(_listing(reply, shown, "the find-links page"), shown, "")

        entry = yield from cache.shared(key, f"find-links {shown}", fetch, _well_formed)
        links = _from_entry(entry).links
    else:
        path = file_path(bare) if scheme == "file" else bare
        links = tuple(_local_find_links(path, shown))
    return Listing(True, links)


def _listing(reply: _http.Reply, shown: str, project: str) -> Listing:
    if reply.error is not None:
        raise ResolutionError(f"index {shown}: {reply.error} for {project}")
    if reply.status in (404, 410):
        return Listing(False, ())
    if reply.status in (401, 403):
        raise ResolutionError(f"index {shown}: HTTP {reply.status} for {project}: credentials missing or refused")
    if reply.status != 200:
        raise ResolutionError(f"index {shown}: HTTP {reply.status} for {project}")
    try:
        return Listing(True, tuple(parse_page(reply.body, reply.content_type, reply.url)))
    except PageError as error:
        raise ResolutionError(f"index {shown}: unreadable answer for {project}: {error}") from None


def _local_index(bare: str, project: str, shown: str) -> Listing:
    # pip reads a file:// index straight from disk: <dir>/<project>/index.html
    directory = file_path(project_url(bare, project))
    page = os.path.join(directory, "index.html")
    try:
        with open(page, "rb") as handle:
            body = handle.read()
    except FileNotFoundError:
        return Listing(False, ())
    except OSError as error:
        raise ResolutionError(f"index {shown}: cannot read {page}: {error.strerror}") from None
    try:
        return Listing(True, tuple(parse_page(body, "text/html", "file://" + urllib.request.pathname2url(page))))
    except PageError as error:
        raise ResolutionError(f"index {shown}: unreadable page for {project}: {error}") from None


def _local_find_links(path: str, shown: str) -> list[Link]:
    try:
        if os.path.isdir(path):
            return local_links(path)
        with open(path, "rb") as handle:
            body = handle.read()
    except FileNotFoundError:
        return []  # pip warns and goes on for a missing find-links location
    except OSError as error:
        raise ResolutionError(f"find-links {shown}: cannot read it: {error.strerror}") from None
    try:
        return parse_page(body, "text/html", "file://" + urllib.request.pathname2url(os.path.abspath(path)))
    except PageError as error:
        raise ResolutionError(f"find-links {shown}: unreadable: {error}") from None


def _entry(listing: Listing, shown: str, project: str) -> dict[str, object]:
    return {"source": shown, "project": project, "found": listing.found, "links": [list(x) for x in listing.links]}


#: The types of a cached link's fields, in :class:`Link`'s order (the first two are required).
_LINK_TYPES: tuple[type | tuple[type, ...], ...] = (str, str, (str, type(None)), bool, bool, (str, type(None)))


def _well_formed(entry: dict[str, object]) -> bool:
    """Whether a cached entry is a listing as :func:`_entry` writes it. Anything else (garbled, or written by
    something else) is a cache miss, so the index is asked again: never "the project is not there"."""
    rows = entry.get("links")
    return (
        isinstance(entry.get("found"), bool)
        and isinstance(rows, list)
        and all(
            isinstance(row, list)
            and 2 <= len(row) <= len(_LINK_TYPES)
            and all(isinstance(value, kind) for value, kind in zip(row, _LINK_TYPES, strict=False))
            for row in rows
        )
    )


def _from_entry(entry: dict[str, object]) -> Listing:
    """The listing of an entry :func:`_well_formed` accepted (or that :func:`_entry` just made)."""
    rows = entry["links"]
    assert isinstance(rows, list)
    return Listing(bool(entry["found"]), tuple(Link(*row) for row in rows))
