"""Index URLs that may carry credentials: where they are split off (into the auth) and how they are shown."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable

from ._errors import InvalidInput

_SCHEMES = ("http", "https", "file")


def file_path(url: str) -> str:
    """The local path a ``file:`` URL names (its path part, percent-decoded), as ``urllib.request.url2pathname``
    makes it on POSIX, without importing ``urllib.request`` (and, through it, ``http.client`` and ``ssl``) on
    every command that reads a lock of local files."""
    return urllib.parse.unquote(urllib.parse.urlsplit(url).path)


def without_credentials(url: str) -> str:
    """The URL as a record keeps it: no userinfo (user, password or token) and no fragment."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # not a URL anyone could fetch: nothing worth keeping, and nothing that could leak
        return ""
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit(parts._replace(netloc=host, fragment=""))


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL without userinfo, and the (user, password) it carried."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    bare = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return bare, (urllib.parse.unquote(user), urllib.parse.unquote(password))


def check_sources(indexes: Iterable[str], find_links: Iterable[str]) -> None:
    """:func:`check` every index URL, and every find-links location that is a URL (a path is not)."""
    for url in indexes:
        check(url, "index URL")
    for location in find_links:
        if "://" in location:
            check(location, "find-links URL")


def check(url: str, what: str) -> None:
    """:class:`InvalidInput` (one line, the password never shown) if ``url`` cannot be an index or find-links URL.

    A password holding an unencoded ``/``, ``?`` or ``#`` ends the host part early, so the URL's host, port and
    path are read from the middle of the password: every parser (ours, httpx, pip, uv) would then ask the wrong
    host, or show the password as a host or port in its error.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in _SCHEMES:
        shown = url if "@" not in url else f"{scheme}{sep}****@{url.rsplit('@', 1)[1]}"
        raise InvalidInput(f"{what} {shown}: not an http, https or file URL")
    shown = f"{scheme}://****@{rest.rsplit('@', 1)[1]}" if "@" in rest else url
    if any(char.isspace() or ord(char) < 32 or ord(char) == 127 for char in url):
        raise InvalidInput(f"{what} {shown!r}: holds white space or a control character (percent-encode it)")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 (reading it validates it)
    except ValueError as error:
        # urllib's own message may quote the text it took for a port: that can be part of a password.
        reason = "its port is not a number" if "cast to integer" in str(error) else str(error)
        if "@" in rest:
            reason += " (a password with '/', '?', '#' or '@' must be percent-encoded: %2F, %3F, %23, %40)"
        raise InvalidInput(f"{what} {shown}: cannot be read: {reason}") from None
    if "@" in parts.path + parts.query + parts.fragment and "@" not in parts.netloc:
        raise InvalidInput(
            f"{what} {shown}: cannot be read: a password with '/', '?', '#' or '@' must be percent-encoded "
            "(%2F, %3F, %23, %40)"
        )
    if scheme.lower() != "file" and not parts.hostname:
        raise InvalidInput(f"{what} {shown}: has no host")
