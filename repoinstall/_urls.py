"""Index URLs that may carry credentials: where they are split off (into the auth) and how they are shown."""

from __future__ import annotations

import urllib.parse


def redact(url: str) -> str:
    """``https://user:secret@host/x`` -> ``https://user:****@host/x``; a lone token becomes ``****``."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, has_password, _ = userinfo.partition(":")
    shown = f"{user}:****" if has_password else "****"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{shown}@{host}"))


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """The URL without userinfo, and the (user, password) it carried."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    bare = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return bare, (urllib.parse.unquote(user), urllib.parse.unquote(password))
