"""The OCI distribution API, the few calls a tree's image needs, over httpx.

- Blobs: HEAD before any upload (a blob the registry has is never sent again, as Spack and oras do), then one
  monolithic upload (POST, then PUT with the digest); GET streamed to a file, its digest and size checked.
- Manifests: GET (bounded, with the media types we read), PUT.
- Auth: a ``401`` with ``WWW-Authenticate: Bearer`` gets a token from its realm (with the credentials, if any),
  one with ``Basic`` gets the credentials; credentials refused are one line, and never shown.
- Redirects are followed by hand, a few at most, and the registry's ``Authorization`` goes only to the
  registry's own host (blob storage gets a presigned URL, not our credentials).
- ``plain_http`` for an HTTP registry on a private network; else TLS with the system's CAs, or ``ca`` (a PEM
  bundle), and ``client_cert`` (a PEM with the key and certificate, as pip's ``client-cert``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeVar

import httpx

from .. import _log
from .._errors import InstallError, InvalidInput
from .._redact import shown
from .image import ACCEPT, DOCUMENT_LIMIT, Blob, digest_of
from .layer import Refused
from .reference import DIGEST, TAG
from .settings import Settings

if TYPE_CHECKING:
    from .auth import Credentials
    from .reference import Reference

T = TypeVar("T")

_REDIRECTS = 5
_ATTEMPTS = 3
_CHUNK = 1 << 20
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
#: A tag listing's next page (the distribution spec's Link header), and how many pages of how many tags we read.
_NEXT = re.compile(r'^\s*<([^>]+)>\s*;\s*rel="?next"?')
_PAGE = 1000
_PAGES = 100


class RegistryError(InstallError):
    """The registry is down, slow, refuses us or answers what the API does not allow (exit 1)."""


class Response(NamedTuple):
    status: int
    headers: httpx.Headers
    body: bytes


class Registry:
    """One repository on one registry, for pulling (``push=False``) or pushing too."""

    def __init__(self, reference: Reference, settings: Settings, credentials: Credentials | None, *, push: bool):
        if (problem := settings.validate()) is not None:
            raise InvalidInput(problem)
        self.reference = reference
        self.settings = settings
        self.base = f"{'http' if settings.plain_http else 'https'}://{reference.host}"
        self._credentials = credentials
        self._actions = "pull,push" if push else "pull"
        self._authorization: str | None = None
        verify: ssl.SSLContext | bool = False
        if not settings.plain_http:
            try:
                verify = ssl.create_default_context(cafile=settings.ca)
                if settings.client_cert:
                    verify.load_cert_chain(settings.client_cert)
            except (OSError, ssl.SSLError) as error:
                raise InvalidInput(f"registry TLS settings cannot be used: {error}") from None
        timeout = httpx.Timeout(settings.timeout, connect=min(settings.timeout, 10.0))
        self._http = httpx.Client(verify=verify, timeout=timeout, follow_redirects=False, trust_env=False)
        self.uploaded = 0
        self.uploaded_bytes = 0
        self.skipped = 0

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _url(self, kind: str, name: str) -> str:
        return f"{self.base}/v2/{self.reference.repository}/{kind}/{name}"

    # ---- blobs ------------------------------------------------------------------------------------------------

    def has_blob(self, digest: str) -> bool:
        return self.blob_size(digest) is not None

    def blob_size(self, digest: str) -> int | None:
        """The size the registry gives a blob it has (HEAD; ``-1`` if it says none), ``None`` if it has none."""
        response = self._call("HEAD", self._url("blobs", digest), ok=(200, 404))
        if response.status == 404:
            return None
        said = response.headers.get("content-length", "")
        return int(said) if said.isdigit() else -1

    def push_blob(self, digest: str, size: int, path: str | None = None, data: bytes | None = None) -> bool:
        """Upload a blob unless the registry has it (HEAD first); whether it was uploaded."""
        if self.has_blob(digest):
            self.skipped += 1
            return False
        started = self._call("POST", f"{self.base}/v2/{self.reference.repository}/blobs/uploads/", ok=(202,))
        location = started.headers.get("location")
        if not location:
            raise RegistryError(f"registry {self.reference.host}: an upload began without a Location")
        url = urllib.parse.urljoin(self.base + "/", location)
        url += ("&" if "?" in url else "?") + urllib.parse.urlencode({"digest": digest})
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        if data is not None:
            self._call("PUT", url, ok=(201,), content=data, headers=headers)
        else:
            assert path is not None
            with (
                open(path, "rb") as handle,
                _log.phase(
                    "push.layer", f"pushing {digest[:19]}", "pushed %s, %d bytes", digest, size, total=size,
                    unit="bytes", registry=self.reference.host,
                ) as pushing,
            ):  # fmt: skip
                sent = _chunks(handle, pushing.advance)
                self._call("PUT", url, ok=(201,), content=sent, headers=headers, retry=False)
        self.uploaded += 1
        self.uploaded_bytes += size
        return True

    def fetch_blob(self, digest: str, size: int, out: str, what: str, *, missing_ok: bool = False) -> bool:
        """GET a blob into the new file ``out``: :class:`Refused` if ``size`` (as its manifest claims it) is
        past the layer bound, if more arrives than ``size``, or if its digest is not ``digest``; one line, and
        nothing asked for, if ``out``'s filesystem has less room than ``size``. ``missing_ok``: ``False`` (and no
        file) if the registry has no such blob (404)."""
        created = False

        def write(chunks: Iterator[bytes]) -> bool:
            nonlocal created
            if created:
                os.unlink(out)  # a failed attempt's: each starts over
            with open(out, "xb") as handle:
                created = True
                for chunk in chunks:
                    handle.write(chunk)
            return True

        try:
            return self.stream_blob(digest, size, what, write, os.path.dirname(os.path.abspath(out)),
                                    missing_ok=missing_ok)  # fmt: skip
        except BaseException:
            if created:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(out)
            raise

    def stream_blob(
        self,
        digest: str,
        size: int,
        what: str,
        consume: Callable[[Iterator[bytes]], T],
        scratch: str,
        *,
        missing_ok: bool = False,
    ) -> T | Literal[False]:
        """GET a blob and hand its bytes, as they arrive, to ``consume``; what it returns. Each chunk is counted
        and hashed on its way: :class:`Refused` if ``size`` (as its manifest claims it) is past the layer bound,
        if more arrives than ``size``, or, when the last chunk has been handed over, if its digest is not
        ``digest`` (so ``consume`` must write only where nothing is published, and read to the end). A GET that
        fails for a while (5xx, 429, a dropped connection) is asked again and ``consume`` called again, afresh.
        ``scratch``: where ``consume`` writes; one line, and nothing asked for, if its filesystem has less room
        than ``size``. ``missing_ok``: ``False``, and ``consume`` never called, if the registry has no such blob
        (404)."""
        if size > self.settings.max_layer_bytes:
            raise Refused(f"{what}: claims {size} bytes, more than {self.settings.max_layer_bytes} "
                          "(--registry-max-layer-bytes): refused")  # fmt: skip
        stat = os.statvfs(scratch)
        if size > (room := stat.f_bavail * stat.f_frsize):
            raise InstallError(f"{what}: claims {size} bytes, and {scratch} has {room} bytes free: not fetched")
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                return self._stream_blob_once(digest, size, what, consume, missing_ok)
            except RegistryError as error:
                if attempt == _ATTEMPTS or not getattr(error, "transient", False):
                    raise
            time.sleep(0.2 * attempt)
        raise AssertionError("unreachable")

    def _stream_blob_once(
        self, digest: str, size: int, what: str, consume: Callable[[Iterator[bytes]], T], missing_ok: bool
    ) -> T | Literal[False]:
        """One GET of a blob, its bytes to ``consume``. A 5xx or 429, or a connection dropped before the end of
        the body, is a transient :class:`RegistryError` (retried, as a manifest's GET is); a timeout or too slow
        is not (a slow registry stays slow), nor a whole answer that is not the blob (:class:`Refused`)."""
        ok = (200, 404) if missing_ok else (200,)
        with self._stream("GET", self._url("blobs", digest), ok=ok) as response:
            if response.status_code == 404:
                return False
            checked = _Checked(response, digest, size, what, self.reference.host, self.settings)
            with _log.phase(
                "pull.layer", f"pulling {digest[:19]}", "pulled %s, %d bytes", digest, size, total=size,
                unit="bytes", registry=self.reference.host, level=10,
            ) as pulling:  # fmt: skip
                checked.advance = pulling.advance  # a live display counts the bytes as they arrive
                chunks = iter(checked)
                try:
                    result = consume(chunks)
                except Refused:
                    # Refused before its end (not a tar, unsafe, over a bound): the rest is read, within its claimed
                    # size, so that a blob that is not its digest is refused as that, the truer of the two.
                    for _ in chunks:
                        pass
                    raise
                if not checked.finished:
                    raise AssertionError(f"{what}: blob {digest} was not read to its end, so never checked")
            return result

    def fetch_document(self, digest: str, size: int, what: str) -> bytes:
        """A small blob (a config) in memory, verified."""
        if size > DOCUMENT_LIMIT:
            raise Refused(f"{what}: a config of {size} bytes: refused")
        body = self._call("GET", self._url("blobs", digest), ok=(200,), limit=size).body
        if digest_of(body) != digest:
            raise Refused(f"{what}: blob {digest}: what the registry sent does not match its digest: refused")
        return body

    # ---- manifests --------------------------------------------------------------------------------------------

    def manifest_digest(self, reference: str) -> str | None:
        """The digest a tag (or digest) names now (HEAD), or ``None`` if the registry has none by that name."""
        response = self._call("HEAD", self._url("manifests", reference), ok=(200, 404), headers={"Accept": ACCEPT})
        if response.status == 404:
            return None
        digest: str | None = response.headers.get("docker-content-digest")
        if digest is None:  # the header is optional: the body's own digest then
            got = self.get_manifest(reference)
            return None if got is None else digest_of(got[0])
        if not DIGEST.match(digest):
            raise Refused(f"registry {self.reference.host}: {shown(reference)} is said to be '{shown(digest)}', "
                          "which is not a sha256 digest: refused")  # fmt: skip
        return digest

    def get_manifest(self, reference: str) -> tuple[bytes, str] | None:
        """A manifest or index (its bytes and Content-Type), ``None`` if there is none by that name. Fetched by
        digest, the bytes must hash to it: :class:`Refused` otherwise."""
        response = self._call("GET", self._url("manifests", reference), ok=(200, 404), headers={"Accept": ACCEPT},
                              limit=DOCUMENT_LIMIT)  # fmt: skip
        if response.status == 404:
            return None
        if reference.startswith("sha256:") and digest_of(response.body) != reference:
            raise Refused(
                f"{self.reference.pinned(reference)}: what the registry sent does not match its digest (the tag "
                "moved, or the registry is lying): refused"
            )
        return response.body, response.headers.get("content-type", "")

    def put_manifest(self, reference: str, blob: Blob) -> None:
        self._call("PUT", self._url("manifests", reference), ok=(201,), content=blob.data,
                   headers={"Content-Type": blob.media_type})  # fmt: skip

    def tags(self, prefix: str) -> list[str]:
        """The repository's tags that start with ``prefix``, from every page of its tag listing."""
        url = f"{self.base}/v2/{self.reference.repository}/tags/list?n={_PAGE}"
        found: list[str] = []
        for _ in range(_PAGES):
            response = self._call("GET", url, ok=(200, 404), limit=DOCUMENT_LIMIT)
            if response.status == 404:
                return found  # no repository yet: no tags
            try:
                listed = json.loads(response.body).get("tags") or []
            except (ValueError, UnicodeDecodeError, AttributeError):
                raise RegistryError(f"registry {self.reference.host}: its tag listing is not JSON") from None
            if not isinstance(listed, list):
                raise RegistryError(f"registry {self.reference.host}: its tag listing is not a list")
            # Only tags as the spec writes them: none carries a control character into a message.
            found += [tag for tag in listed if isinstance(tag, str) and TAG.match(tag) and tag.startswith(prefix)]
            following = _NEXT.match(response.headers.get("link", ""))
            if following is None:
                return found
            url = urllib.parse.urljoin(self.base + "/", following[1])
            if _origin(url) != _origin(self.base):
                raise RegistryError(f"registry {self.reference.host}: its tag listing points to another host")
        raise RegistryError(f"registry {self.reference.host}: a tag listing of more than {_PAGES} pages")

    # ---- requests ---------------------------------------------------------------------------------------------

    def _call(
        self,
        method: str,
        url: str,
        *,
        ok: tuple[int, ...],
        content: bytes | Iterator[bytes] | None = None,
        headers: dict[str, str] | None = None,
        limit: int = 1 << 16,
        retry: bool = True,
    ) -> Response:
        """One call, retried on a broken connection or a 5xx/429 (idempotent ones), with auth and redirects."""
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                with self._stream(method, url, content=content, headers=headers, ok=ok) as response:
                    body = b""
                    if method != "HEAD":
                        who = f"registry {self.reference.host}: {method} {_path(url)}"
                        pace = Pace(self.settings.min_rate, self.settings.rate_window, limit, who)
                        for chunk in response.iter_bytes():
                            pace.add(len(chunk))
                            body += chunk
                            if len(body) > limit:
                                raise Refused(f"registry {self.reference.host}: an answer larger than {limit} bytes "
                                              f"to {method} {_path(url)}: refused")  # fmt: skip
                    return Response(response.status_code, response.headers, body)
            except RegistryError as error:
                if not retry or attempt == _ATTEMPTS or not getattr(error, "transient", False):
                    raise
            except httpx.HTTPError as error:
                if not retry or attempt == _ATTEMPTS:
                    raise RegistryError(f"registry {self.reference.host}: {_worded(error)}") from None
            time.sleep(0.2 * attempt)
        raise AssertionError("unreachable")

    @contextmanager
    def _stream(
        self,
        method: str,
        url: str,
        *,
        content: bytes | Iterator[bytes] | None = None,
        headers: dict[str, str] | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> Iterator[httpx.Response]:
        """The response to one request once it is an ``ok`` status: credentials asked for are given, redirects
        followed (credentials only to the registry's own host), anything else one line."""
        authorized_once = False
        for _ in range(_REDIRECTS + 2):
            own = _origin(url) == _origin(self.base)
            sent = dict(headers or {})
            if own and self._authorization is not None:
                sent["Authorization"] = self._authorization
            try:
                request = self._http.build_request(method, url, content=content, headers=sent)
                response = self._http.send(request, stream=True)
            except httpx.HTTPError as error:
                raise RegistryError(f"registry {self.reference.host}: {_worded(error)}") from None
            try:
                if response.status_code == 401 and own and not authorized_once:
                    response.close()
                    self._authorize(response.headers.get("www-authenticate", ""))
                    authorized_once = True
                    continue
                if response.status_code in (301, 302, 303, 307, 308) and response.headers.get("location"):
                    response.close()
                    url = urllib.parse.urljoin(url, response.headers["location"])
                    if response.status_code == 303:
                        method, content = "GET", None
                    continue
                if response.status_code not in ok:
                    raise self._failure(method, url, response)
                yield response
                return
            finally:
                response.close()
        raise RegistryError(f"registry {self.reference.host}: too many redirects for {method} {_path(url)}")

    def _failure(self, method: str, url: str, response: httpx.Response) -> RegistryError:
        status = response.status_code
        if status == 401:
            said = "refused the credentials" if self._credentials is not None else "asks for credentials (none found)"
            return RegistryError(f"registry {self.reference.host} {said} for {self.reference.repository}")
        if status == 403:
            return RegistryError(f"registry {self.reference.host}: {self.reference.repository}: access denied")
        error = RegistryError(f"registry {self.reference.host}: {method} {_path(url)}: HTTP {status}")
        error.transient = status >= 500 or status == 429  # type: ignore[attr-defined]
        return error

    def _authorize(self, challenge: str) -> None:
        """Answer a ``401``'s challenge: a Bearer token from its realm, or Basic credentials."""
        import base64

        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            if self._credentials is None:
                raise RegistryError(f"registry {self.reference.host} asks for credentials (none found)")
            pair = f"{self._credentials.user}:{self._credentials.secret}".encode()
            self._authorization = "Basic " + base64.b64encode(pair).decode("ascii")
            return
        if scheme != "bearer":
            raise RegistryError(
                f"registry {self.reference.host}: an auth scheme not supported ({shown(scheme) or 'none'})"
            )
        fields = dict(_CHALLENGE.findall(challenge))
        realm = fields.get("realm", "")
        if not realm.startswith(("https://", "http://")):
            raise RegistryError(f"registry {self.reference.host}: a token realm that is not a URL")
        scopes = [f"repository:{self.reference.repository}:{self._actions}"]
        if fields.get("scope") and fields["scope"] not in scopes:
            scopes.append(fields["scope"])
        params = [("scope", scope) for scope in scopes] + (
            [("service", fields["service"])] if "service" in fields else []
        )
        auth = None if self._credentials is None else (self._credentials.user, self._credentials.secret)
        try:
            response = self._http.get(realm, params=params, auth=auth)  # type: ignore[arg-type]
        except httpx.HTTPError as error:
            raise RegistryError(f"registry {self.reference.host}: its token service: {_worded(error)}") from None
        if response.status_code in (401, 403):
            said = "refused the credentials" if auth else "asks for credentials (none found)"
            raise RegistryError(f"registry {self.reference.host}: its token service {said}")
        try:
            answer = response.json()
            token = answer.get("token") or answer.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if response.status_code != 200 or not isinstance(token, str) or not token:
            raise RegistryError(f"registry {self.reference.host}: its token service gave no token")
        self._authorization = f"Bearer {token}"


class _Checked:
    """A blob's body as it arrives: paced, counted against its claimed size and hashed on the way; its digest is
    checked once the last chunk is read, before the reader is told that was the last (:class:`Refused`)."""

    def __init__(self, response: httpx.Response, digest: str, size: int, what: str, host: str, settings: Settings):
        self.response, self.digest, self.size, self.what, self.host = response, digest, size, what, host
        self.pace = Pace(settings.min_rate, settings.rate_window, size, f"{what}: registry {host}")
        self.finished = False
        #: Told each chunk's size as it arrives (a live display's count).
        self.advance: Callable[[int], None] = lambda _count: None

    def __iter__(self) -> Iterator[bytes]:
        sha = hashlib.sha256()
        count = 0
        try:
            for chunk in self.response.iter_bytes():  # as each read gives them, so a trickle is seen as one
                self.pace.add(len(chunk))
                count += len(chunk)
                if count > self.size:
                    raise Refused(f"{self.what}: blob {self.digest} is larger than the {self.size} bytes its "
                                  "manifest says")  # fmt: skip
                sha.update(chunk)
                self.advance(len(chunk))
                yield chunk
        except httpx.HTTPError as error:
            dropped = RegistryError(f"registry {self.host}: {_worded(error)}")
            dropped.transient = not isinstance(error, httpx.TimeoutException)  # type: ignore[attr-defined]
            raise dropped from None
        if f"sha256:{sha.hexdigest()}" != self.digest or count != self.size:
            raise Refused(f"{self.what}: blob {self.digest}: what the registry sent does not match its digest: "
                          "refused")  # fmt: skip
        self.finished = True


class Pace:
    """A transfer's pace, as curl's ``--speed-limit``/``--speed-time`` bound it: :class:`RegistryError` once the
    bytes of a ``window`` (seconds) average under ``rate`` a second, or once the whole takes longer than
    ``window`` + ``size`` / ``rate`` (its cap, scaled by what it claims). A slow but live transfer passes; a
    trickle, which a timeout on each read never stops, fails within about a window of falling behind."""

    def __init__(self, rate: int, window: float, size: int, who: str, clock: Callable[[], float] = time.monotonic):
        self.rate, self.window, self.who, self.clock = rate, window, who, clock
        start = clock()
        self.cap = start + window + size / rate
        self.mark, self.since = start, 0

    def add(self, count: int) -> None:
        """``count`` bytes arrived now."""
        now = self.clock()
        self.since += count
        if now > self.cap:
            raise RegistryError(f"{self.who}: slower than {self.rate} bytes/s in all (--registry-min-rate)")
        if now - self.mark >= self.window:
            if self.since < self.rate * (now - self.mark):
                raise RegistryError(f"{self.who}: slower than {self.rate} bytes/s for "
                                    f"{now - self.mark:.1f}s (--registry-min-rate)")  # fmt: skip
            self.mark, self.since = now, 0


def _chunks(handle: object, sent: Callable[[int], None] | None = None) -> Iterator[bytes]:
    read = handle.read  # type: ignore[attr-defined]
    while chunk := read(_CHUNK):
        yield chunk
        if sent is not None:
            sent(len(chunk))  # once the client took it: what the live display counts as pushed


def _origin(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme, parts.netloc.lower()


def _path(url: str) -> str:
    """A URL's path as a message shows it (a redirect's is the registry's)."""
    return shown(urllib.parse.urlsplit(url).path)


def _worded(error: httpx.HTTPError) -> str:
    """A transport failure in a few words, with no URL (none of ours carries credentials, but one redirected to
    blob storage may carry a signature)."""
    if isinstance(error, httpx.TimeoutException):
        return "timed out (down or too slow)"
    if isinstance(error, httpx.ConnectError):
        return f"cannot connect ({str(error).split(']')[-1].strip() or 'refused'})"
    return type(error).__name__
