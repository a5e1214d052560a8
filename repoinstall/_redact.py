"""Credentials hidden from what is shown: a URL's userinfo, in one URL or anywhere in free text; and a string
from outside shown with its control characters escaped (:func:`shown`).

A leaf (it imports nothing of the package), so every message, log line and exception can go through it: the
base exception (:class:`repoinstall._errors.RepoinstallError`) and the package logger (:mod:`repoinstall._log`)
do, whatever path a URL or an installer's output took to reach them.

What is hidden: the whole userinfo, user and password alike (``https://deploy:secret@host`` ->
``https://****@host``). A user can be the secret (``https://TOKEN@host``, ``https://TOKEN:@host``), and once an
installer has shown ``TOKEN:****`` nothing tells that user from a name.
"""

from __future__ import annotations

HIDDEN = "****"
#: The most characters of an outside string a message shows.
SHOWN = 300
#: ``://`` then the authority's userinfo: everything up to the last ``@`` before the first ``/`` or white space
#: (a user holding an unencoded ``@`` is hidden whole).
_USERINFO = r"://[^/\s]*@"


def shown(value: object, limit: int = SHOWN) -> str:
    """``value`` (a string from outside: a registry's header, a layer's file name, an annotation) as a message
    may show it: every character that is not printable escaped as Python writes it (``\\n``, ``\\x1b``,
    ``\\u202e``), so that it can neither end the message's line nor move or recolour a terminal; and cut to
    ``limit`` characters (a registry's field may be megabytes)."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = text[:limit] + "..."
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else ascii(char)[1:-1] for char in text)


def redact(url: str) -> str:
    """``https://user:secret@host/x`` -> ``https://****@host/x``."""
    return redact_all(url)


def redact_all(text: str) -> str:
    """Credentials of every URL in free text (an exception's message, an installer's output, a traceback)
    hidden as :func:`redact` hides them."""
    if "@" not in text:
        return text
    import re

    return re.sub(_USERINFO, f"://{HIDDEN}@", text)
