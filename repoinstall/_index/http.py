"""HTTP for resolution: request plans shared by a sync and an async driver, retries, auth and redaction.

A plan is a generator that yields :class:`Get` (fetch this) or :class:`Pause` (sleep this long) and receives
a :class:`Reply`; the sync driver runs it on ``httpx.Client``, the async one on ``httpx.AsyncClient``. So
both resolve the same way, differing only where I/O happens, and a plan waiting for a peer's fetch (a
``Pause`` loop) never blocks an event loop. The code between a plan's steps reads and writes the volume's cache
(and lists a local find-links directory): the async driver runs it through an :class:`Offload`, on the caller's
own threads, so nothing of it runs on the loop either.
"""

from __future__ import annotations

import asyncio
import netrc
import os
import random
import ssl
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Generator, Iterable
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

from .. import _log
from .._errors import ResolutionError
from .._urls import split_credentials

if TYPE_CHECKING:
    import httpx

    from .._pipconfig import IndexConfig

T = TypeVar("T")
#: Bodies larger than this are refused: a project page or a metadata file is far smaller.
PAGE_LIMIT = 64 << 20
_USER_AGENT = "repoinstall (+https://packaging.python.org/specifications/simple-repository-api/)"


class Get(NamedTuple):
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    limit: int = PAGE_LIMIT


class Pause(NamedTuple):
    seconds: float


class Reply(NamedTuple):
    """What came back: a status and body, or ``error`` (a transport failure, already worded) and status 0."""

    url: str
    status: int = 0
    content_type: str = ""
    body: bytes = b""
    content_range: str = ""
    error: str | None = None
    #: Whether a retry may get another answer (a broken connection may; an oversized answer will not).
    transient: bool = True
    #: Seconds the server asked us to wait before asking again (``Retry-After`` of a 429 or 503), if it did.
    retry_after: float | None = None


Step = Get | Pause
Plan = Generator[Step, "Reply | None", T]


class Offload(Protocol):
    """Runs a blocking call off the event loop, awaited: ``Repo`` passes its own thread pool's (never the loop's
    default executor, which the application's own work uses)."""

    def __call__(self, call: Callable[[], T], /) -> Awaitable[T]: ...


class _Done(NamedTuple):
    """A plan's value: returned through a future, where a ``StopIteration`` may not go."""

    value: object


def advance(plan: Generator[Step, Reply | None, object], reply: Reply | None) -> Step | _Done:
    """The plan's next step, or its value: one stretch of its code between two steps."""
    try:
        return plan.send(reply)
    except StopIteration as done:
        return _Done(done.value)


#: The longest Retry-After honoured: a server asking for more gets asked again after this many seconds.
RETRY_AFTER_MAX = 60.0


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delay-seconds or an HTTP date), ``None`` if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def backoff(attempt: int) -> float:
    """Seconds before retry ``attempt`` (0-based): 0.25, 0.5, 1, 2 ... capped at 8, with jitter so a fleet
    that failed together does not retry together."""
    return float(min(8.0, 0.25 * 2**attempt) * random.uniform(0.75, 1.25))


def get(
    url: str,
    retries: int,
    *,
    what: str,
    headers: Iterable[tuple[str, str]] = (),
    limit: int = PAGE_LIMIT,
) -> Plan[Reply]:
    """GET with bounded retries on connection errors, timeouts, 429 and 5xx; the last reply otherwise (an
    answer over the limit comes back at once, with ``error`` set: the caller knows whether it can do without).

    Raises :class:`ResolutionError` starting with ``what`` (which names the index, redacted) when every
    attempt failed.
    """
    request = Get(url, tuple(headers), limit)
    attempt = 0
    while True:
        reply = yield request
        assert reply is not None
        if not reply.transient or (reply.error is None and reply.status != 429 and reply.status < 500):
            return reply
        problem = reply.error or f"HTTP {reply.status}"
        if attempt == retries:
            tries = "1 attempt" if retries == 0 else f"{retries + 1} attempts"
            raise ResolutionError(f"{what}: {problem} ({tries})")
        # Retry-After (a 429 or 503 saying when to come back) is honoured, up to RETRY_AFTER_MAX.
        pause = backoff(attempt) if reply.retry_after is None else min(reply.retry_after, RETRY_AFTER_MAX)
        _log.logger().info("%s: %s; retrying in %.1fs", what, problem, pause)
        yield Pause(pause)
        attempt += 1


def run(plan: Plan[T], client: Callable[[], httpx.Client]) -> T:
    """Drive ``plan`` with blocking I/O; ``client()`` is called only when a request is due (an answer from
    the cache needs no client, and making one costs more than the whole cached answer)."""
    reply: Reply | None = None
    while True:
        try:
            step = plan.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if isinstance(step, Pause):
            time.sleep(step.seconds)
            reply = None
        else:
            reply = _fetch(client(), step)


async def arun(plan: Plan[T], client: Callable[[], Awaitable[httpx.AsyncClient]], offload: Offload) -> T:
    """Drive ``plan`` from the running event loop: its requests and pauses awaited there, its code between them (the
    volume's cache, local find-links directories) run through ``offload``, so nothing in it blocks the loop."""
    reply: Reply | None = None
    while True:
        step = await offload(partial(advance, plan, reply))
        if isinstance(step, _Done):
            return step.value  # type: ignore[return-value]
        if isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
            reply = None
        else:
            reply = await _afetch(await client(), step)


def _fetch(client: httpx.Client, step: Get) -> Reply:
    import httpx

    try:
        with client.stream("GET", step.url, headers=dict(step.headers)) as response:
            body = _Body(step)
            for chunk in response.iter_bytes():
                if (too_large := body.add(chunk)) is not None:
                    return too_large
            return body.reply(response)
    except httpx.HTTPError as error:
        return _failed(step, error)


async def _afetch(client: httpx.AsyncClient, step: Get) -> Reply:
    import httpx

    try:
        async with client.stream("GET", step.url, headers=dict(step.headers)) as response:
            body = _Body(step)
            async for chunk in response.aiter_bytes():
                if (too_large := body.add(chunk)) is not None:
                    return too_large
            return body.reply(response)
    except httpx.HTTPError as error:
        return _failed(step, error)


class _Body:
    """An answer's bytes, up to the step's limit: what the sync and async fetch share."""

    def __init__(self, step: Get) -> None:
        self._step = step
        self._data = bytearray()

    def add(self, chunk: bytes) -> Reply | None:
        """``None``, or the reply to give instead once the answer outgrows the limit (retrying cannot help)."""
        self._data += chunk
        if len(self._data) <= self._step.limit:
            return None
        return Reply(self._step.url, error=f"answer larger than {self._step.limit} bytes", transient=False)

    def reply(self, response: httpx.Response) -> Reply:
        waits = response.status_code in (429, 503)
        return Reply(
            self._step.url,
            response.status_code,
            response.headers.get("content-type", ""),
            bytes(self._data),
            response.headers.get("content-range", ""),
            retry_after=retry_after(response.headers.get("retry-after")) if waits else None,
        )


def _failed(step: Get, error: Exception) -> Reply:
    if (refused := _certificate_refused(error)) is not None:
        return Reply(step.url, error=refused, transient=False)  # a certificate does not change between tries
    return Reply(step.url, error=_describe(error))


def _certificate_refused(error: BaseException) -> str | None:
    """What a TLS handshake refused, in our words, when the failure behind ``error`` is a certificate: the
    index's not trusted, or ours missing or refused."""
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, ssl.SSLError):
        cause = cause.__cause__ or cause.__context__
    reason = (getattr(cause, "reason", None) or "").upper()
    if "CERTIFICATE_VERIFY_FAILED" in reason:
        return "TLS: the index's certificate is not trusted (pip's cert names the authorities to trust)"
    if "CERTIFICATE" in reason and "ALERT" in reason:  # the server's alert: certificate required, bad, unknown
        return f"TLS: the index refused our client certificate ({reason.lower()}; pip's client-cert names it)"
    return None


def _describe(error: Exception) -> str:
    import httpx

    # Our own words, never str(error): some httpx messages quote the URL, and URLs may carry credentials.
    if isinstance(error, httpx.ConnectTimeout):
        return "connection timed out"
    if isinstance(error, httpx.TimeoutException):
        return "timed out waiting for an answer"
    if isinstance(error, httpx.ConnectError):
        return "cannot connect"
    if isinstance(error, httpx.RemoteProtocolError):
        return "connection broken mid-answer"
    if isinstance(error, httpx.TooManyRedirects):
        return "too many redirects"
    return f"request failed ({type(error).__name__})"


# ---- credentials ------------------------------------------------------------------------------------------


def _netloc(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.hostname or ''}:{parts.port or ''}"


def _netrc_credentials(host: str) -> tuple[str, str] | None:
    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        found = netrc.netrc(path).authenticators(host)
    except (OSError, netrc.NetrcParseError):
        return None
    if not found:
        return None
    login, _, password = found
    return login, password or ""


def make_auth(index_urls: Iterable[str]) -> httpx.Auth:
    """Basic auth per host, as pip does it: the index URL's own userinfo first, then ``~/.netrc`` (``$NETRC``).

    Download links on the same host as an index get that index's credentials; other hosts get netrc's.
    """
    import httpx

    known: dict[str, tuple[str, str]] = {}
    for url in index_urls:
        _, credentials = split_credentials(url)
        if credentials is not None:
            known.setdefault(_netloc(url), credentials)

    class _IndexAuth(httpx.Auth):
        def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
            key = f"{request.url.host}:{request.url.port or ''}"
            credentials = known.get(key) or _netrc_credentials(request.url.host)
            if credentials is not None:
                request.headers["Authorization"] = httpx.BasicAuth(*credentials)._auth_header
            yield request

    return _IndexAuth()


def async_client(config: IndexConfig) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` for ``config``: made off the loop (its TLS context and ``.netrc`` are files read)."""
    import httpx

    return httpx.AsyncClient(**client_settings(config, asynchronous=True))  # type: ignore[arg-type]


def client_settings(config: IndexConfig, *, asynchronous: bool = False) -> dict[str, object]:
    """Keyword arguments for ``httpx.Client``/``AsyncClient``: timeouts, TLS (``cert``, ``trusted-host``), auth,
    proxies from the environment."""
    import httpx

    verify: ssl.SSLContext | bool = True
    if config.cert or config.client_cert:
        verify = ssl.create_default_context(cafile=config.cert)
        if config.client_cert:  # pip's client-cert: one PEM file with the certificate and its private key
            verify.load_cert_chain(config.client_cert)
    # pip's trusted-host: that host's TLS certificate is not checked (and plain http to it is fine anyway).
    transport = httpx.AsyncHTTPTransport if asynchronous else httpx.HTTPTransport
    mounts = {f"all://{host}": transport(verify=False) for host in config.trusted_hosts}
    return {
        "mounts": mounts,
        "timeout": httpx.Timeout(config.timeout, connect=min(config.timeout, 10.0)),
        "verify": verify,
        "auth": make_auth(config.index_urls + config.find_links),
        "follow_redirects": True,
        "headers": {"User-Agent": _USER_AGENT},
        "trust_env": True,  # HTTPS_PROXY, NO_PROXY ... as pip honours them
        # pip's proxy setting (pip.conf or PIP_PROXY) takes precedence over the environment, as in pip.
        **({"proxy": config.proxy} if config.proxy else {}),
    }
