"""Request bodies as ``dateeval serve`` reads them: framed as RFC 9112 asks (a length, or chunks; anything else
refused and its connection closed), within their deadline, held against the server's :class:`BodyBudget`, and a
refused one read to its end where it can be, so that a keep-alive client's next request is read as a request.
:mod:`dateeval.serve.transport` answers them."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Protocol

from dateeval.serve.protocol import RequestError
from dateeval.serve.queue import Cancelled as ClientGone  # a request whose client hung up

MAX_BODY = 16 << 20
DRAIN_LIMIT = (
    4 * MAX_BODY
)  # an oversized body up to this is read and dropped (the connection lives on); beyond it, closed
IDLE_S = 60.0  # a connection that sends nothing for this long (idle keep-alive, a stalled body) is closed
BODY_BUDGET = (
    4 * MAX_BODY
)  # bytes of request bodies held at once, all connections together (each until its request is answered)
BODY_WAIT_S = 10.0  # how long a body waits for room in that budget before a 503
BODY_READ_S = 60.0  # the longest one body may take to arrive, however it trickles (a read each IDLE_S would hold a thread for ever)
SMALL_BODY = (
    16 << 10
)  # a body's first bytes, read before it asks the budget for room: ordinary requests (a few KB) never wait


class BodyBudget:
    """The bytes of request bodies the server holds at once, all connections together.

    Without it every connection could hold a body of :data:`MAX_BODY`, and
    its parsed JSON (up to about 28 times as many bytes: a list of empty
    lists), at once. A body reserves its length before it is read and keeps
    it until its request is answered, since what is made of it (the JSON,
    the prompt) lives that long. Bodies of ordinary requests (kilobytes)
    never wait: the budget is felt only by megabyte bodies, which no request
    the model can answer needs. One that finds no room waits, unread, rather
    than being refused at once, since a body refused or answered quickly
    frees its room within a second; but at most ``body_wait_s``, then 503
    naming the budget, since the room may be held by requests that compute
    for minutes.
    """

    def __init__(self, limit: int) -> None:
        self.limit, self.held = limit, 0
        self.room = threading.Condition()

    def take(self, size: int, wait_s: float) -> bool:
        """Reserve ``size`` bytes, waiting up to ``wait_s`` for room; False if none came."""
        with self.room:
            if not self.room.wait_for(lambda: self.held + size <= self.limit, wait_s):
                return False
            self.held += size
            return True

    def give(self, size: int) -> None:
        """Return ``size`` reserved bytes (and wake the bodies waiting for room)."""
        with self.room:
            self.held -= size
            self.room.notify_all()


class BodyLimits(Protocol):
    """What a server gives its connections' body reads: the budget all bodies share, and how long one may wait and take."""

    bodies: BodyBudget
    body_wait_s: float
    body_read_s: float


class BodyReader(BaseHTTPRequestHandler):
    """A connection's request bodies, read within their budget and deadline (the handler's routes read them here)."""

    server: BodyLimits  # type: ignore[assignment]  # the standard library's server, with the body limits above
    timeout = IDLE_S  # a stalled client cannot hold a thread forever

    @contextlib.contextmanager
    def _receiving(self) -> Iterator[Callable[[], bytes]]:
        """A reader of the request body, whose bytes are held against the server's :class:`BodyBudget` until the request is answered.

        Room is asked for once the body's bytes come, not at the length it declares: a body's first
        :data:`SMALL_BODY` bytes are read first (ordinary requests end there and never wait), and only a body that goes
        on asks for the rest of its length (a chunked one for :data:`MAX_BODY`), so clients that declare megabytes
        and send a byte hold nothing that others wait for. A body must arrive within ``body_read_s`` in all, however
        it trickles. One that finds no room waits at most ``body_wait_s``, then is answered 503 and dropped (read to
        its end where it can be, so the connection stays usable; else the connection closes after the answer).
        """
        size, budget, held = self._declared_size(), self.server.bodies, 0
        deadline = time.monotonic() + self.server.body_read_s

        def room(wanted: int, drop: Callable[[], None]) -> None:
            nonlocal held
            if not budget.take(wanted, self.server.body_wait_s):
                drop()
                raise RequestError(
                    503,
                    f"the server holds at most {budget.limit:,} bytes of request bodies at once, and this body of "
                    f"{'up to ' if size is None else ''}{wanted + SMALL_BODY:,} bytes waited {self.server.body_wait_s:g} s for "
                    "room; retry later",
                    "server_busy",
                )
            held = wanted

        def read() -> bytes:
            nonlocal held
            if size is None:
                data = self._chunked(deadline, lambda: room(MAX_BODY - SMALL_BODY, self._close))
            else:
                head = self._read_exact(min(size, SMALL_BODY), deadline)
                if size > SMALL_BODY:
                    room(size - SMALL_BODY, lambda: self._discard(size - SMALL_BODY, deadline))
                data = head + self._read_exact(size - len(head), deadline)
            kept = max(0, len(data) - SMALL_BODY)
            budget.give(held - kept)
            held = kept
            return data

        try:
            yield read
        finally:
            budget.give(held)
            with contextlib.suppress(OSError):
                self.connection.settimeout(
                    self.timeout
                )  # the body's deadline no longer applies: the keep-alive idle bound does

    def _close(self) -> None:
        self.close_connection = True

    def _await(self, deadline: float) -> None:
        """Let the next read wait until ``deadline`` at most (and :data:`IDLE_S`); past it, the body is abandoned."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.connection.settimeout(min(left, self.timeout))

    def _read_exact(self, count: int, deadline: float) -> bytes:
        """``count`` body bytes, read as they come until ``deadline``; a client that closes before them is gone."""
        parts = []
        while count > 0:
            self._await(deadline)
            chunk = self.rfile.read1(min(count, 1 << 16))
            if not chunk:
                raise ClientGone
            parts.append(chunk)
            count -= len(chunk)
        return b"".join(parts)

    def _declared_size(self) -> int | None:
        """The body's Content-Length (None: chunked); a body that cannot be read is refused, dropped or its connection closed.

        Framing as RFC 9112 §6 asks: a request with both Transfer-Encoding and Content-Length, a transfer coding
        other than ``chunked`` (``xchunked``, ``gzip, chunked``), or Content-Lengths that disagree is refused and its
        connection closed, since where its body ends is not known (a smuggled request could follow it).
        """
        codings = ",".join(self.headers.get_all("Transfer-Encoding") or []).strip().lower()
        lengths = {
            value.strip() for header in self.headers.get_all("Content-Length") or [] for value in header.split(",")
        }
        if codings and lengths:
            self._close()
            raise RequestError(400, "the request has both Transfer-Encoding and Content-Length: send one of them")
        if codings:
            if codings != "chunked":
                self._close()
                raise RequestError(
                    501,
                    f"Transfer-Encoding {codings[:40]!r} is not supported: send the body chunked or with a Content-Length",
                )
            return None
        if len(lengths) > 1:
            self._close()
            raise RequestError(
                400, f"the request has Content-Lengths that disagree ({', '.join(sorted(lengths))[:60]})"
            )
        text = next(iter(lengths), "0")
        if not (text.isascii() and text.isdigit()):
            self._close()
            raise RequestError(400, f"Content-Length {text[:40]!r} is not a number of bytes")
        if int(text) > MAX_BODY:
            self._discard(int(text), time.monotonic() + self.server.body_read_s)
            raise RequestError(
                413, f"the body is {int(text):,} bytes, over this server's limit of {MAX_BODY:,}", "request_too_large"
            )
        return int(text)

    def _line(self, deadline: float) -> bytes:
        self._await(deadline)
        return self.rfile.readline(1024)

    def _chunked(self, deadline: float, room: Callable[[], None]) -> bytes:
        """A chunked body (RFC 9112 §7.1), up to :data:`MAX_BODY`, until ``deadline``; trailers are read and ignored.
        ``room`` is asked once the body passes :data:`SMALL_BODY`."""
        parts, size = [], 0
        while True:
            try:
                length = int(self._line(deadline).split(b";")[0], 16)
            except ValueError:
                length = -1
            if length < 0:
                self._close()
                raise RequestError(400, "the chunked body is malformed")
            if size <= SMALL_BODY < size + length:
                room()
            size += length
            if size > MAX_BODY:
                self._close()
                raise RequestError(
                    413, f"the chunked body is over this server's limit of {MAX_BODY:,} bytes", "request_too_large"
                )
            if length == 0:
                break
            parts.append(self._read_exact(length, deadline))
            self._line(deadline)  # the CRLF after the chunk
        while self._line(deadline).strip():
            pass  # trailer fields, up to the empty line
        return b"".join(parts)

    def _discard(self, length: int | None, deadline: float) -> None:
        """Read and drop a refused body (up to :data:`DRAIN_LIMIT`, until ``deadline``), so that the client reads the answer
        and not a reset connection. A chunked one (``length`` None) is not read: its connection closes after the answer."""
        if length is None or length > DRAIN_LIMIT:
            self._close()
            return
        try:
            while length > 0:
                self._await(deadline)
                chunk = self.rfile.read1(min(length, 1 << 16))
                if not chunk:
                    break
                length -= len(chunk)
        except (TimeoutError, OSError):
            pass
        if length > 0:
            self._close()
