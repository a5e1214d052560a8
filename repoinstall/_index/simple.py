"""Reading the Simple Repository API: JSON (PEP 691) or HTML (PEP 503) project pages, PEP 592 yanks,
PEP 658/714 metadata files, and pip-style find-links (an HTML page of links, or a local directory)."""

from __future__ import annotations

import json
import os
import urllib.parse
from html.parser import HTMLParser
from typing import NamedTuple

from .._urls import split_credentials

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
HTML_TYPE = "application/vnd.pypi.simple.v1+html"
#: Prefer JSON, take HTML; the same preference pip sends.
ACCEPT = f"{JSON_TYPE}, {HTML_TYPE};q=0.2, text/html;q=0.01"


class Link(NamedTuple):
    """One distribution file an index lists. ``url`` never carries credentials (they live in the auth)."""

    filename: str
    url: str
    requires_python: str | None = None
    yanked: bool = False
    #: The index serves the file's core metadata at ``url + ".metadata"`` (PEP 658/714).
    metadata: bool = False
    #: The file's sha256 (lowercase hex) as the page gives it (PEP 691 ``hashes``, PEP 503 ``#sha256=``).
    sha256: str | None = None


class PageError(ValueError):
    """The answer is not a project page we can read; the message says what is wrong with it."""


def project_url(index_url: str, project: str) -> str:
    """The project page under an index base URL (``https://host/simple`` -> ``https://host/simple/name/``)."""
    return index_url.rstrip("/") + "/" + urllib.parse.quote(project) + "/"


def parse_page(body: bytes, content_type: str, page_url: str) -> list[Link]:
    """The files a project page lists, by its content type; :class:`PageError` if it cannot be read."""
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime in (JSON_TYPE, "application/json"):
        return _parse_json(body, page_url)
    if mime in (HTML_TYPE, "text/html", ""):
        return _parse_html(body, page_url, _charset(content_type))
    raise PageError(f"unexpected content type {mime!r}")


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            return value.strip("\"'")
    return "utf-8"


def _parse_json(body: bytes, page_url: str) -> list[Link]:
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise PageError(f"not valid JSON ({error})") from None
    files = document.get("files") if isinstance(document, dict) else None
    if not isinstance(files, list):
        raise PageError("JSON without a 'files' list")
    links = []
    for entry in files:
        if not isinstance(entry, dict):
            raise PageError("JSON 'files' entry is not an object")
        filename, url = entry.get("filename"), entry.get("url")
        if not isinstance(filename, str) or not isinstance(url, str):
            raise PageError("JSON 'files' entry without filename and url")
        requires = entry.get("requires-python")
        metadata = entry.get("core-metadata", entry.get("dist-info-metadata", False))
        hashes = entry.get("hashes")
        sha256 = hashes.get("sha256") if isinstance(hashes, dict) else None
        links.append(
            Link(
                filename,
                _absolute(page_url, url),
                requires if isinstance(requires, str) and requires.strip() else None,
                bool(entry.get("yanked", False)),
                metadata is not False and metadata is not None,
                _hex(sha256),
            )
        )
    return links


class _Anchors(HTMLParser):
    def __init__(self, page_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = page_url
        self.links: list[Link] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "base" and values.get("href"):
            self.base = _absolute(self.base, values["href"] or "")
        if tag != "a" or not values.get("href"):
            return
        url = _absolute(self.base, values["href"] or "")
        fragment = urllib.parse.urlsplit((values["href"] or "").strip()).fragment
        algorithm, _, digest = fragment.partition("=")
        filename = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
        if not filename:
            return
        requires = values.get("data-requires-python")
        metadata = values.get("data-core-metadata", values.get("data-dist-info-metadata"))
        self.links.append(
            Link(
                filename,
                url,
                requires if requires and requires.strip() else None,
                "data-yanked" in values,
                metadata is not None and metadata.lower() != "false",
                _hex(digest) if algorithm == "sha256" else None,
            )
        )


def _parse_html(body: bytes, page_url: str, charset: str) -> list[Link]:
    try:
        text = body.decode(charset)
    except (LookupError, UnicodeDecodeError):
        raise PageError(f"HTML that is not valid {charset}") from None
    if "\x00" in text:
        raise PageError("binary data, not HTML")
    parser = _Anchors(page_url)
    parser.feed(text)
    parser.close()
    return parser.links


def _hex(value: object) -> str | None:
    """A sha256 as a page gives it, lowercase; ``None`` for anything that is not 64 hex digits."""
    if not isinstance(value, str) or len(value) != 64:
        return None
    try:
        int(value, 16)
    except ValueError:
        return None
    return value.lower()


def _absolute(base: str, href: str) -> str:
    # The fragment (#sha256=...) is not part of the file's address; userinfo never is.
    return split_credentials(urllib.parse.urljoin(base, href.strip()).split("#", 1)[0])[0]


def local_links(directory: str) -> list[Link]:
    """A find-links directory: every file in it, as pip sees them (no requires-python, nothing yanked)."""
    links = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if entry.is_file():
            links.append(Link(entry.name, "file://" + urllib.parse.quote(os.path.abspath(entry.path))))
    return links
