"""The HTTP side of ``dateeval serve``: connections, routes, answers, and a client that leaves (bodies are read within
their budgets by :mod:`dateeval.serve.bodies`).

Every refusal, down to a malformed request line, is a JSON error body, and a
refused body is read to its end or the connection closed, so that a
keep-alive client's next request is read as a request. Every response
carries the HTTP ``Date`` header, as providers' do. The routes themselves
are the protocol's (``serve.protocol``).
"""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
import traceback
from http.server import ThreadingHTTPServer

from dateeval.errors import DateEvalError
from dateeval.serve.bodies import BODY_BUDGET, BODY_READ_S, BODY_WAIT_S, BodyBudget, BodyReader
from dateeval.serve.fields import RequestError
from dateeval.serve.protocol import ROUTES, Served
from dateeval.serve.queue import Cancelled as ClientGone  # a request whose client hung up

BACKLOG = 1024  # connections the kernel queues before the server accepts them (the standard library's 5 drops a burst of clients)
TCP_CLOSE = 7  # Linux's tcpi_state of a connection the peer reset (a half-closed one is CLOSE_WAIT, 8)
MAX_CONNECTIONS = 1024  # connections served at once, a thread each; the next ones wait in the kernel's queue (BACKLOG)


class Client:
    """The connection a request came on: whether whoever sent it is still waiting for the answer.

    A client that gave up (a timeout, Ctrl-C) closes its socket; the request
    must then stop holding the model, or every later request waits behind work nobody reads.
    """

    def __init__(self, connection: socket.socket | None) -> None:
        self.connection = connection
        self.left = False
        self.probed = False  # the peer's end-of-file was answered with an interim 100 (see gone)
        self.answering = False  # the final answer is being written: no interim response may come between its bytes
        self.writing = threading.Lock()

    def gone(self) -> bool:
        """True once the peer closed: its socket reset, or read as end-of-file and then reset when written to.

        End-of-file alone is not a hang-up: a client may half-close after its request (``shutdown(SHUT_WR)``) and still
        read the answer (RFC 9112 §9.6). So the first end-of-file is answered with an interim ``100 Continue``, which
        every HTTP/1.1 client parses and skips (RFC 9110 §15.2); a peer that closed altogether answers it with a reset,
        seen at the next look. An unread pipelined byte is not a hang-up either. Asked between the layers of every
        forward pass: once gone, the answer is kept rather than asked of the socket again.
        """
        if self.connection is None or self.left:
            return self.left
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                self.left = self.probed and self._reset()
                self._probe()
        except (OSError, ValueError):  # reset, or already closed
            self.left = True
        return self.left

    def _reset(self) -> bool:
        """After the probe: whether the peer reset (the socket is closed, not half-closed: TCP_INFO's state, Linux);
        where the state cannot be read, end-of-file counts as gone, as it always did."""
        try:
            return self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_CLOSE
        except (OSError, AttributeError):
            return True

    def _probe(self) -> None:
        """Answer a first end-of-file with ``100 Continue`` (a closed peer resets); before the final answer only."""
        with self.writing:
            if not self.probed and not self.answering:
                self.probed = True
                self.connection.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")

    def check(self, *_: object) -> None:
        """Raise :class:`ClientGone` if the client left."""
        if self.gone():
            raise ClientGone


class Handler(BodyReader):
    """OpenAI-style routes; every refusal is a JSON error body, never a traceback or an HTML page.

    A body is read to its end before any answer, or, where it cannot be
    (chunked, too large, a length that is not a number), the connection is
    closed after the answer: otherwise its unread bytes would be parsed as
    the keep-alive connection's next request.
    """

    served: Served
    server: Server  # its body budget and its connection slots
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections

    def do_GET(self) -> None:  # the standard library's naming
        try:
            with self._receiving() as read:
                read()
                path = self.path.rstrip("/")
                if (
                    path == "/v1/stats"
                ):  # how requests were batched: whether concurrent clients really share forward passes
                    self._send(200, {"batches": self.served.requests.sizes})
                    return
                if path != "/v1/models":
                    raise RequestError(404, f"no route {self.path}")
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": [{"id": self.served.name, "object": "model", "created": 0, "owned_by": "dateeval"}],
                    },
                )
        except RequestError as error:
            self._refuse(error)

    def do_POST(self) -> None:  # the standard library's naming
        try:
            with self._receiving() as read:
                body = _json_object(read())  # the raw bytes are dropped once parsed
                route = ROUTES.get(self.path.rstrip("/"))
                if route is None:
                    raise RequestError(404, f"no route {self.path}")
                client = Client(self.connection)
                answer = route(self.served, body, client)
                with client.writing:
                    client.answering = True
                self._send(200, answer)
        except RequestError as error:
            self._refuse(error)
        except (ClientGone, ConnectionError, TimeoutError):  # gone, or its body stalled for IDLE_S
            self._left()
        except Exception as error:  # a bug or the model failing: the client gets an answer, the operator the traceback
            traceback.print_exc(file=sys.stderr)
            self.close_connection = True
            self._send(500, _error(f"internal error: {type(error).__name__}: {error}", "server_error"))

    def handle_one_request(self) -> None:
        """One request; a client that hangs up or resets mid-request is one log line, never a traceback."""
        try:
            super().handle_one_request()
        except ConnectionError:
            self._left()

    def _left(self) -> None:
        """A client gone before its answer: nobody reads one, so the connection closes and the operator reads one line."""
        self.close_connection = True
        request = f" ({self.command} {self.path})" if getattr(self, "path", None) else ""
        print(
            f"{self.address_string()}:{self.client_address[1]} left before its answer{request}",
            file=sys.stderr,
            flush=True,
        )

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals (a bad request line, an unsupported method) as JSON, and the connection closed."""
        self.close_connection = True
        self._send(code, _error(message or explain or f"HTTP {code}"))

    def _refuse(self, error: RequestError) -> None:
        self._send(error.status, _error(str(error), error.code))

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)  # also writes the Date header
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # `format`: the standard library's signature
        """Quiet: a sweep sends thousands of requests."""


def _json_object(data: bytes) -> dict:
    if not data:
        raise RequestError(400, "a JSON body is required")
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        raise RequestError(400, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise RequestError(400, "the body must be a JSON object")
    try:
        json.dumps(body, ensure_ascii=False).encode()
    except UnicodeEncodeError:  # JSON may escape half a UTF-16 pair (\\ud800); no tokenizer or template takes it
        raise RequestError(
            400, "the body holds a lone surrogate escape (such as \\ud800): strings must be valid Unicode"
        ) from None
    return body


def _error(message: str, code: str | None = None) -> dict:
    kind = "server_error" if code == "server_error" else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "code": code}}


class Server(ThreadingHTTPServer):
    """A thread per connection, at most :data:`MAX_CONNECTIONS` of them; a burst of :data:`BACKLOG` more is queued by the kernel, not refused.

    Each thread holds its stack and its request (a body within
    :data:`BODY_BUDGET`, all threads together): bounding the threads bounds
    what connections cost however many clients come. A connection past the
    bound waits, accepted, until one ends, as the kernel's queue waits
    (an idle keep-alive connection ends after :data:`IDLE_S`).
    """

    request_queue_size = BACKLOG
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[Handler]) -> None:
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.bodies = BodyBudget(BODY_BUDGET)
        self.body_wait_s = BODY_WAIT_S
        self.body_read_s = BODY_READ_S

    def process_request(self, request: socket.socket, client_address: tuple[str, int]) -> None:
        self.slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()  # no thread started: the standard library closes the connection
            raise

    def process_request_thread(self, request: socket.socket, client_address: tuple[str, int]) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def make_server(served: Served, host: str, port: int) -> Server:
    """A server bound to ``host:port`` (port 0: a free one, read back from ``server_address``)."""
    handler = type("BoundHandler", (Handler,), {"served": served})
    try:
        return Server((host, port), handler)
    except OSError as error:
        raise DateEvalError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None


def banner(served: Served, host: str, port: int) -> str:
    """The line ``serve`` prints when ready: which date chat requests get from its template, and (last, for scripts) where it listens."""
    support = served.template.support
    dated = {
        "clock": f"today's date from this machine's clock (strftime_now, `{support.format}`), as a provider that injects it",
        "variable": f"the fixed date {support.default!r} (`{support.variable}`, the template's default)",
    }.get(support.kind, "no date")
    return f"serving {served.name} (its chat template writes {dated} into chat requests) on http://{host}:{port}/v1"
