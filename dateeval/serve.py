"""A minimal OpenAI-compatible endpoint over the in-process model: ``python -m dateeval serve``.

Why it exists: the HTTP backend must be tested against a real server,
offline, and researchers want a local endpoint whose chat template *they*
choose. Served with a template that writes ``strftime_now`` into the system
message (GPT-OSS), it behaves like an API provider that injects today's date
server-side (paper App. B); served with the model's own template, it injects
nothing. Everything is computed by :class:`TransformersBackend`, so the
numbers are the in-process backend's numbers.

Endpoints: ``GET /v1/models``, ``POST /v1/completions`` (a text or token-id
prompt; top-k ``logprobs`` of the next token; ``echo`` with ``max_tokens`` 0
or 1 scores the prompt's own tokens, as vLLM does, which is how clients read
the exact log-probability of any continuation), ``POST /v1/chat/completions``
(the server's chat template, rendered with the real clock;
``logprobs``/``top_logprobs``).
This module is HTTP and the OpenAI protocol only: requests in flight go
to the model's scheduler (``backends.scheduler.queue``: one thread runs the
model, and the requests that queue while a batch computes share the next
one's forward passes), and the standard library's threading server keeps
connections concurrent. A request waits at most ``Served.wait_s`` to start
(then 503, which clients retry), and is refused (400) before any compute
when its prompt and reply would not fit the model's context
(:data:`UNSTATED_CONTEXT` tokens for a model that states none) or it asks
for more than the server bounds (stop strings, echo positions): a request's
memory is bounded by its batch's token budget, never by what it asks.

A client that hangs up stops its work at the next point where it can: a
queued request within the queue's ``POLL_S``, a generated reply at the next decoding
step (its batch-mates' replies go on exactly as they would have), a batch
whose clients all left at the next of its forward pass's
checkpoints (``backends.interrupt``: each part of each layer). That is within a second
inside the longest passes too: at the bounds at most 0.86 s on a quiet 2-core
machine (a whole pass, what a departure used to cost, 35 s;
``docs/benchmarks.md``); a loaded machine stretches it by its load.

The server's memory is bounded whatever the requests:

    model + largest pass + 29 x BODY_BUDGET + MAX_CONNECTIONS x (thread + 29 x SMALL_BODY + context x 36 B)

the model, loaded and warmed by a first request (SmolLM2-135M in float32:
0.98 GB); the largest batch's forward pass within the token budgets (a
prompt filling the context, or an echo of :data:`MAX_ECHO_POSITIONS` tokens,
whose full-vocabulary log-probabilities only the model thread holds, one
batch at a time: up to 1.2 GB); the request bodies held at once
(:class:`BodyBudget`), each byte with, at worst, 28 bytes of parsed JSON (a
list of empty lists; 3 for text); and per connection served (:class:`Server`)
a thread (23 KB), a body's first :data:`SMALL_BODY` bytes (read before the
budget is asked, so that small requests never wait behind large ones) with
their JSON, and a prompt's token ids. For SmolLM2-135M:
0.98 + 1.2 + 1.8 + 1024 x (0.02 + 0.46 + 0.29) MB = 4.8 GB; the hostile set of
``bench/serve_hostile.py`` peaked at 3.69 GB (``docs/benchmarks.md``).

What the server does not do (streaming, several choices) is refused
rather than answered differently. Every refusal, down to a malformed request
line, is a JSON error body, and a refused body is read to its end or the
connection closed, so that a keep-alive client's next request is read as a
request. Every response carries the HTTP ``Date`` header, as providers' do.
"""

from __future__ import annotations

import contextlib
import functools
import json
import select
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from dateeval.backends.base import GenerationSettings
from dateeval.backends.openai_api import MAX_API_STOPS
from dateeval.backends.scheduler.queue import BATCH_TOKENS, MAX_ECHO_POSITIONS, Best, Busy, Job, RequestQueue
from dateeval.backends.scheduler.queue import Cancelled as ClientGone  # a request whose client hung up
from dateeval.backends.transformers import TransformersBackend
from dateeval.errors import DateEvalError
from dateeval.limits import MAX_STOP_CHARS
from dateeval.prompting import ChatTemplate

MAX_LOGPROBS = 20  # the most alternatives a request may ask for (vLLM's default, OpenAI's chat limit)
MAX_BODY = 16 << 20
DRAIN_LIMIT = 4 * MAX_BODY  # an oversized body up to this is read and dropped (the connection lives on); beyond it, closed
IDLE_S = 60.0  # a connection that sends nothing for this long (idle keep-alive, a stalled body) is closed
WAIT_S = 60.0  # how long a request may wait for the model before it is answered 503 (clients retry those)
BACKLOG = 1024  # connections the kernel queues before the server accepts them (the standard library's 5 drops a burst of clients)
UNSTATED_CONTEXT = BATCH_TOKENS  # prompt plus reply, in tokens, for a model whose config states no context length
BODY_BUDGET = 4 * MAX_BODY  # bytes of request bodies held at once, all connections together (each until its request is answered)
BODY_WAIT_S = 10.0  # how long a body waits for room in that budget before a 503
BODY_READ_S = 60.0  # the longest one body may take to arrive, however it trickles (a read each IDLE_S would hold a thread for ever)
TCP_CLOSE = 7  # Linux's tcpi_state of a connection the peer reset (a half-closed one is CLOSE_WAIT, 8)
SMALL_BODY = 16 << 10  # a body's first bytes, read before it asks the budget for room: ordinary requests (a few KB) never wait
MAX_CONNECTIONS = 1024  # connections served at once, a thread each; the next ones wait in the kernel's queue (BACKLOG)


class RequestError(Exception):
    """A request the server refuses: answered with ``status`` and an OpenAI-style error body."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code = status, code


@dataclass
class Served:
    """The model behind the endpoint, the name it answers to and the chat template it applies."""

    backend: TransformersBackend
    name: str
    template: ChatTemplate
    lock: threading.Lock  # held while a batch computes: whoever holds it has the model
    wait_s: float = WAIT_S  # the longest a request waits for the model before a 503
    requests: RequestQueue = field(init=False, repr=False)  # the model's scheduler takes requests from here

    def __post_init__(self) -> None:
        self.requests = RequestQueue(self.backend, self.lock)

    def submit(self, job: Job) -> object:
        """Hand ``job`` to the model's scheduler and wait for its answer; a 503 after ``wait_s`` without starting."""
        try:
            return self.requests.run(job, self.wait_s)
        except Busy:
            raise RequestError(503, f"the server is busy: this request waited {self.wait_s:g} s for the model; retry later", "server_busy") from None

    @property
    def context(self) -> tuple[int, str]:
        """The most tokens a prompt and its reply may take, and whose limit that is, for the refusal's wording.

        A model whose config states no context length gets
        :data:`UNSTATED_CONTEXT`: without a bound, one request's prompt and
        ``max_tokens`` would size its forward passes.
        """
        limit = self.backend.context_length
        if limit is None:
            return UNSTATED_CONTEXT, "This server's maximum context length for this model (whose config states none)"
        return limit, "This model's maximum context length"

    @functools.cached_property
    def longest_token(self) -> int:
        """The most characters one token spells (counted on its stored form, which is never shorter than its text).

        A text longer than the context times this cannot fit, whatever its
        tokens: such a prompt is refused without tokenising it (a 10 MB prompt takes about 27 s to tokenise here).
        """
        return max(len(token) for token in self.backend.tokenizer.convert_ids_to_tokens(list(range(len(self.backend.tokenizer)))) if token)


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


def _number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise RequestError(400, f"{name} must be a number between {low} and {high}")
    return value


def _stops(body: dict) -> tuple[str, ...]:
    """At most OpenAI's four stop strings, each short: their preprocessing runs before any forward pass, where a hang-up cannot stop it."""
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else stop
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
        raise RequestError(400, "stop must be a string or a list of strings")
    if len(stop) > MAX_API_STOPS:
        raise RequestError(400, f"stop holds {len(stop):,} strings: this server takes at most {MAX_API_STOPS} stop strings, as OpenAI does")
    if not all(0 < len(s) <= MAX_STOP_CHARS for s in stop):
        raise RequestError(400, f"each stop string must be non-empty and at most {MAX_STOP_CHARS} characters")
    return tuple(stop)


def _settings(body: dict, max_tokens: int) -> GenerationSettings:
    """Greedy at temperature 0; otherwise the model's own sampling settings with the request's seed.

    Read for every request, scored ones included: a value this server would refuse for a generation is refused everywhere.
    """
    temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    seed = int(_number(body, "seed", 0, 0, 2**63 - 1))
    return GenerationSettings(max_new_tokens=max_tokens, stop=_stops(body), sample=temperature > 0, seed=seed)


def _top(tokenizer, best: Best) -> dict[str, float]:  # noqa: ANN001 - a tokenizer
    """The most likely tokens as text; a text two tokens share keeps the likelier."""
    named: dict[str, float] = {}
    for token, value in zip(best.tokens, best.values):
        named.setdefault(tokenizer.decode([token]), value)
    return named


def top_logprobs(served: Served, client: Client, prompt: list[int], k: int) -> dict[str, float]:
    """The ``k`` most likely next tokens (as text) with their full-vocabulary log-probabilities."""
    return _top(served.backend.tokenizer, served.submit(Job("top", None, len(prompt), prompt, client.gone, client.connection, k=k)))


@dataclass(frozen=True)
class Echo:
    """A prompt scored token by token: what ``echo`` returns in the OpenAI ``logprobs`` layout."""

    tokens: list[str]
    token_logprobs: list[float | None]  # each token's log-probability given those before it; the first has none
    top_logprobs: list[dict[str, float] | None]
    next_top: dict[str, float]  # the token after the prompt: its ``k`` most likely values


def score_prompt(served: Served, client: Client, prompt: list[int], k: int) -> Echo:
    """Every token's log-probability after the ones before it, and the next token's top-k (one row of a batch's forward pass)."""
    tokenizer = served.backend.tokenizer
    chosen, bests, following = served.submit(Job("echo", None, len(prompt), prompt, client.gone, client.connection, k=k))
    tops = [None] + [{tokenizer.decode([token]): value, **_top(tokenizer, best)} for token, value, best in zip(prompt[1:], chosen, bests)]
    return Echo([tokenizer.decode([token]) for token in prompt], [None, *chosen], tops, _top(tokenizer, following))


def _usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}


def _envelope(kind: str, served: Served, choice: dict, usage: dict) -> dict:
    return {"id": f"{kind}-{uuid.uuid4().hex[:16]}", "object": kind, "created": int(time.time()), "model": served.name,
            "choices": [choice], "usage": usage}  # fmt: skip


def _finish(completion_tokens: int, body: dict, *names: str) -> str:
    """``length`` when the reply used its whole budget, else ``stop`` (end of sequence or a stop string)."""
    return "length" if completion_tokens >= _max_tokens(body, *names) else "stop"


def _check_model(served: Served, body: dict) -> None:
    if body.get("model") != served.name:
        raise RequestError(404, f"The model `{body.get('model')}` does not exist: this server serves `{served.name}`")


def _check_supported(body: dict) -> None:
    """Refuse what this server does not do, rather than answer something else (an empty stream, one choice of two)."""
    if body.get("stream"):
        raise RequestError(400, "stream is not supported: this server answers each request whole (stream=false)")
    for name in ("n", "best_of"):
        if body.get(name) not in (None, 1) or isinstance(body.get(name), bool):
            raise RequestError(400, f"{name} must be 1: this server returns one choice per request")


def _encode(served: Served, text: str, max_tokens: int) -> list[int]:
    """The prompt's tokens; a text too long to fit in any tokenisation is refused before it is tokenised."""
    limit, whose = served.context
    # The bound counts twice the characters a token can spell: a normaliser may merge characters (NFKC) before tokenising.
    if len(text) > 2 * limit and len(text) > 2 * (limit - max_tokens) * served.longest_token:
        raise RequestError(
            400,
            f"{whose} is {limit} tokens. However, your prompt of {len(text):,} characters is at least "
            f"{len(text) // (2 * served.longest_token):,} tokens. Please reduce the length of the prompt.",
            "context_length_exceeded",
        )
    encoded = served.backend.encode([text])[0]
    _check_context(served, len(encoded), max_tokens)
    return encoded


def _check_context(served: Served, prompt_tokens: int, max_tokens: int) -> None:
    """Refuse, before any compute, a prompt whose tokens and reply exceed the model's context (past it the numbers are wrong)."""
    limit, whose = served.context
    if prompt_tokens + max_tokens > limit:
        raise RequestError(
            400,
            f"{whose} is {limit} tokens. However, you requested {prompt_tokens + max_tokens} tokens "
            f"({prompt_tokens} in the prompt, {max_tokens} for the completion). Please reduce the length of the prompt or completion.",
            "context_length_exceeded",
        )


def _max_tokens(body: dict, *names: str) -> int:
    value = next((body[name] for name in names if body.get(name) is not None), 16)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RequestError(400, f"{names[0]} must be a whole number of at least 1")
    return value


def _top_k(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_LOGPROBS:
        raise RequestError(400, f"logprobs must be a whole number between 0 and {MAX_LOGPROBS}")
    return value


def _generate_or_score(served: Served, client: Client, prompt: str, body: dict, max_tokens: int, k: int | None) -> tuple[str, int, int, dict | None]:
    """(text, prompt tokens, completion tokens, first token's alternatives): one token scored, or a decoded reply."""
    if k is not None and max_tokens != 1:
        raise RequestError(400, "this server returns logprobs for max_tokens=1 only")
    settings = _settings(body, max_tokens)
    encoded = _encode(served, prompt, max_tokens)
    if k is not None:
        best = top_logprobs(served, client, encoded, max(k, 1))
        text = next(iter(best))
        return text, len(encoded), 1, dict(list(best.items())[: max(k, 1)])
    # Sampled replies depend on the batch they are drawn in (one seed per batch): each is drawn alone, as one request at a time would.
    reply = served.submit(Job("generate", settings, len(encoded) + max_tokens, prompt, client.gone, client.connection, shares=not settings.sample))
    return reply.text, reply.prompt_tokens, reply.n_tokens, None


def _prompt(served: Served, body: dict) -> str | list[int]:
    """One prompt: text, or token ids (``[1, 2]`` or ``[[1, 2]]``) of this server's vocabulary."""
    prompt = body.get("prompt")
    prompt = prompt[0] if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)) else prompt
    if isinstance(prompt, str) and prompt:
        return prompt
    size = len(served.backend.tokenizer)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < size for t in prompt):
        return prompt
    raise RequestError(400, f"prompt must be one non-empty string or one non-empty list of token ids below {size}")


def _echo(served: Served, client: Client, prompt: str | list[int], body: dict, k: int | None) -> tuple[str, dict, int, int]:
    """``echo``: the prompt's tokens with their log-probabilities (and, with ``max_tokens=1``, the greedy next token)."""
    max_tokens = body.get("max_tokens")
    if k is None or max_tokens not in (0, 1) or isinstance(max_tokens, bool):
        raise RequestError(400, "this server echoes the prompt with logprobs and max_tokens 0 or 1 only")
    _settings(body, 1)
    ids = _encode(served, prompt, max_tokens) if isinstance(prompt, str) else prompt
    _check_context(served, len(ids), max_tokens)
    if len(ids) > MAX_ECHO_POSITIONS:
        raise RequestError(400, f"echo scores at most {MAX_ECHO_POSITIONS:,} tokens, and this prompt has {len(ids):,}: score it in parts",
                           "echo_too_long")  # fmt: skip
    scored = score_prompt(served, client, ids, k)
    tokens, values, tops = scored.tokens, scored.token_logprobs, scored.top_logprobs
    if max_tokens == 1:
        token, value = next(iter(scored.next_top.items()))
        tokens, values, tops = [*tokens, token], [*values, value], [*tops, dict(list(scored.next_top.items())[:k])]
    offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
    logprobs = {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}
    return "".join(tokens), logprobs, len(ids), max_tokens


def completions(served: Served, body: dict, client: Client) -> dict:
    """``/v1/completions``: the prompt is text (or token ids) the client rendered; ``logprobs=k`` scores the next token."""
    _check_model(served, body)
    _check_supported(body)
    prompt = _prompt(served, body)
    k = None if body.get("logprobs") is None else _top_k(body["logprobs"])
    if body.get("echo"):
        text, logprobs, prompt_tokens, completion_tokens = _echo(served, client, prompt, body, k)
        choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length"}
        return _envelope("text_completion", served, choice, _usage(prompt_tokens, completion_tokens))
    if not isinstance(prompt, str):
        raise RequestError(400, "this server takes token-id prompts with echo only")
    text, prompt_tokens, completion_tokens, best = _generate_or_score(served, client, prompt, body, _max_tokens(body, "max_tokens"), k)
    logprobs = None
    if best is not None:
        logprobs = {"tokens": [text], "token_logprobs": [best[text]], "top_logprobs": [best], "text_offset": [len(prompt)]}
    choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": _finish(completion_tokens, body, "max_tokens")}
    return _envelope("text_completion", served, choice, _usage(prompt_tokens, completion_tokens))


def _messages(body: dict) -> list[dict]:
    messages = body.get("messages")
    valid = isinstance(messages, list) and messages and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages
    )
    if not valid:
        raise RequestError(400, "messages must be a non-empty list of {role, content} objects with text content")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def chat_completions(served: Served, body: dict, client: Client) -> dict:
    """``/v1/chat/completions``: the server's own template, rendered as a provider would (the real clock, today)."""
    _check_model(served, body)
    _check_supported(body)
    try:
        prompt = served.template.render(_messages(body), mode="default").text
    except DateEvalError as error:
        raise RequestError(400, str(error)) from None
    k = _top_k(body.get("top_logprobs") or 0) if body.get("logprobs") else None
    max_tokens = _max_tokens(body, "max_completion_tokens", "max_tokens")
    text, prompt_tokens, completion_tokens, best = _generate_or_score(served, client, prompt, body, max_tokens, k)
    logprobs = None
    if best is not None:
        entries = [{"token": token, "logprob": value, "bytes": list(token.encode())} for token, value in best.items()]
        logprobs = {"content": [{**entries[0], "top_logprobs": entries[: k or 0]}]}
    finish = _finish(completion_tokens, body, "max_completion_tokens", "max_tokens")
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": logprobs, "finish_reason": finish}
    return _envelope("chat.completion", served, choice, _usage(prompt_tokens, completion_tokens))


ROUTES = {"/v1/completions": completions, "/v1/chat/completions": chat_completions}


class Handler(BaseHTTPRequestHandler):
    """OpenAI-style routes; every refusal is a JSON error body, never a traceback or an HTML page.

    A body is read to its end before any answer, or, where it cannot be
    (chunked, too large, a length that is not a number), the connection is
    closed after the answer: otherwise its unread bytes would be parsed as
    the keep-alive connection's next request.
    """

    served: Served
    server: Server  # its body budget and its connection slots
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
    timeout = IDLE_S  # a stalled client cannot hold a thread forever

    def do_GET(self) -> None:  # noqa: N802 - the standard library's naming
        try:
            with self._receiving() as read:
                read()
                path = self.path.rstrip("/")
                if path == "/v1/stats":  # how requests were batched: whether concurrent clients really share forward passes
                    self._send(200, {"batches": self.served.requests.sizes})
                    return
                if path != "/v1/models":
                    raise RequestError(404, f"no route {self.path}")
                self._send(200, {"object": "list", "data": [{"id": self.served.name, "object": "model", "created": 0, "owned_by": "dateeval"}]})
        except RequestError as error:
            self._refuse(error)

    def do_POST(self) -> None:  # noqa: N802
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
        except Exception as error:  # noqa: BLE001 - a bug or the model failing: the client gets an answer, the operator the traceback
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
        print(f"{self.address_string()}:{self.client_address[1]} left before its answer{request}", file=sys.stderr, flush=True)

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
                raise RequestError(503, f"the server holds at most {budget.limit:,} bytes of request bodies at once, and this body of "
                                   f"{'up to ' if size is None else ''}{wanted + SMALL_BODY:,} bytes waited {self.server.body_wait_s:g} s for "
                                   "room; retry later", "server_busy")  # fmt: skip
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
                self.connection.settimeout(self.timeout)  # the body's deadline no longer applies: the keep-alive idle bound does

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
        lengths = {value.strip() for header in self.headers.get_all("Content-Length") or [] for value in header.split(",")}
        if codings and lengths:
            self._close()
            raise RequestError(400, "the request has both Transfer-Encoding and Content-Length: send one of them")
        if codings:
            if codings != "chunked":
                self._close()
                raise RequestError(501, f"Transfer-Encoding {codings[:40]!r} is not supported: send the body chunked or with a Content-Length")
            return None
        if len(lengths) > 1:
            self._close()
            raise RequestError(400, f"the request has Content-Lengths that disagree ({', '.join(sorted(lengths))[:60]})")
        text = next(iter(lengths), "0")
        if not (text.isascii() and text.isdigit()):
            self._close()
            raise RequestError(400, f"Content-Length {text[:40]!r} is not a number of bytes")
        if int(text) > MAX_BODY:
            self._discard(int(text), time.monotonic() + self.server.body_read_s)
            raise RequestError(413, f"the body is {int(text):,} bytes, over this server's limit of {MAX_BODY:,}", "request_too_large")
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
                raise RequestError(413, f"the chunked body is over this server's limit of {MAX_BODY:,} bytes", "request_too_large")
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

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the standard library's signature
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
        raise RequestError(400, "the body holds a lone surrogate escape (such as \\ud800): strings must be valid Unicode") from None
    return body


def _error(message: str, code: str | None = None) -> dict:
    kind = "server_error" if code == "server_error" else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "code": code}}


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
    dated = {"clock": f"today's date from this machine's clock (strftime_now, `{support.format}`), as a provider that injects it",
             "variable": f"the fixed date {support.default!r} (`{support.variable}`, the template's default)"}.get(support.kind, "no date")  # fmt: skip
    return f"serving {served.name} (its chat template writes {dated} into chat requests) on http://{host}:{port}/v1"


def load(model: str, *, name: str | None, chat_template: str | None, dtype: str, device: str) -> Served:
    """Load the model (and the template it should apply, if not its own)."""
    from dateeval.models import resolve

    backend = TransformersBackend(resolve(model), dtype=dtype, device=device)
    template = backend.template
    if chat_template:
        template = ChatTemplate.from_file(chat_template, bos_token=template.bos_token, eos_token=template.eos_token)
    return Served(backend, name or model, template, threading.Lock())
