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
Requests in flight are batched: one thread runs the model, and the
requests that queue while a batch computes share the next one's forward
passes (:class:`Batcher`); the standard library's threading server keeps
connections concurrent. A request waits at most ``Served.wait_s`` to start
(then 503, which clients retry), stops waiting as soon as its client hangs
up (and computing, unless it shares its batch with clients still there),
and is refused (400) before any compute when its prompt and reply would not
fit the model's context or it asks for more than the server bounds (stop
strings, echo positions): a request's memory is bounded by its batch's
token budget, never by what it asks. What the server does not do (streaming, several choices) is refused
rather than answered differently. Every refusal, down to a malformed request
line, is a JSON error body, and a refused body is read to its end or the
connection closed, so that a keep-alive client's next request is read as a
request. Every response carries the HTTP ``Date`` header, as providers' do.
"""

from __future__ import annotations

import functools
import json
import select
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from dateeval.backends.base import GenerationSettings
from dateeval.backends.openai_api import MAX_API_STOPS
from dateeval.backends.transformers import TransformersBackend
from dateeval.errors import DateEvalError
from dateeval.prompting import ChatTemplate

MAX_LOGPROBS = 20  # the most alternatives a request may ask for (vLLM's default, OpenAI's chat limit)
MAX_BODY = 16 << 20
DRAIN_LIMIT = 4 * MAX_BODY  # an oversized body up to this is read and dropped (the connection lives on); beyond it, closed
IDLE_S = 60.0  # a connection that sends nothing for this long (idle keep-alive, a stalled body) is closed
WAIT_S = 60.0  # how long a request may wait for the model before it is answered 503 (clients retry those)
BACKLOG = 1024  # connections the kernel queues before the server accepts them (the standard library's 5 drops a burst of clients)
POLL_S = 0.2  # how often a waiting request looks whether its client is still there
MAX_BATCH = 32  # requests one batch may hold
BATCH_TOKENS = 8192  # rows x longest prompt (and reply) one batch may hold: the memory of one full SmolLM2 context
GATHER_S = 0.01  # a batch starts once no request arrived for this long (or it is full)
MAX_STOP_CHARS = 64  # the longest stop string: transformers preprocesses stops against the whole vocabulary before the first forward pass (4 x 64 characters: 0.7 s here, 4 x 1024: 2.3 s)
MAX_ECHO_POSITIONS = 2048  # the most prompt tokens an echo scores: each holds a full-vocabulary row of logits (2,000 tokens: 1.4 GB)


class RequestError(Exception):
    """A request the server refuses: answered with ``status`` and an OpenAI-style error body."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code = status, code


class ClientGone(Exception):
    """The client hung up: its request is abandoned (nothing is computed further, nothing is sent)."""


@dataclass
class Served:
    """The model behind the endpoint, the name it answers to and the chat template it applies."""

    backend: TransformersBackend
    name: str
    template: ChatTemplate
    lock: threading.Lock  # held while a batch computes: whoever holds it has the model
    wait_s: float = WAIT_S  # the longest a request waits for the model before a 503
    batcher: Batcher = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.batcher = Batcher(self)

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

    def gone(self) -> bool:
        """True once the peer closed: the socket reads as end-of-file (an unread pipelined byte is not a hang-up)."""
        if self.connection is None:
            return False
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and not self.connection.recv(1, socket.MSG_PEEK)
        except (OSError, ValueError):  # reset, or already closed
            return True

    def check(self, *_: object) -> None:
        """Raise :class:`ClientGone` if the client left."""
        if self.gone():
            raise ClientGone


@dataclass(eq=False)
class Job:
    """One request's share of a batch: which backend call it joins, for whom, and once computed its answer."""

    kind: str  # "top" (next-token scoring), "echo" (every prompt token scored) or "generate"
    key: object  # jobs of one kind share a batch only with an equal key (generation: its settings)
    tokens: int  # its length: a batch holds at most its budget in rows x the longest
    work: object  # token ids to score, or the text to generate from
    client: Client
    shares: bool = True  # False: computed alone
    state: str = "queued"  # queued, then running, then done
    result: object = None
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)


class Batcher:
    """One thread runs the model: requests that arrive while a batch computes share the next batch's forward passes.

    A batch is the oldest queued job and every queued job that can join it
    (same kind and key, at most :data:`MAX_BATCH` rows, rows x longest
    within the kind's token budget, which bounds its memory). The backend's
    own batched methods compute it, so a batch of one is one request at a time.
    """

    def __init__(self, served: Served) -> None:
        self.served = served
        self.queue: list[Job] = []
        self.ready = threading.Condition()
        self.thread: threading.Thread | None = None

    def run(self, job: Job) -> object:
        """Queue ``job`` and wait for its answer: at most ``wait_s`` to start (then 503), never after its client left."""
        deadline = time.monotonic() + self.served.wait_s
        with self.ready:
            self.queue.append(job)
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="dateeval-batcher", daemon=True)
                self.thread.start()
            self.ready.notify()
        while not job.done.wait(POLL_S):
            if (job.client.gone() or time.monotonic() >= deadline) and self._withdraw(job):
                job.client.check()
                raise RequestError(503, f"the server is busy: this request waited {self.served.wait_s:g} s for the model; retry later",
                                   "server_busy")  # fmt: skip
        if job.error is not None:
            raise job.error
        return job.result

    def _withdraw(self, job: Job) -> bool:
        """Take a job that has not started off the queue (True); one that started is answered (False)."""
        with self.ready:
            if job.state != "queued":
                return False
            self.queue.remove(job)
            return True

    def _loop(self) -> None:
        while True:
            with self.ready:
                self.ready.wait_for(lambda: self.queue)
                while len(self.queue) < MAX_BATCH and self.ready.wait(GATHER_S):
                    pass  # requests still arriving (a burst of clients answered together sends its next ones together)
            with self.served.lock:
                batch = self._take()
                if batch:
                    self._compute(batch)

    def _take(self) -> list[Job]:
        """The next batch, marked running; jobs whose clients left are answered as gone instead."""
        with self.ready:
            for job in [job for job in self.queue if job.client.gone()]:
                self.queue.remove(job)
                self._finish([job], error=ClientGone())
            if not self.queue:
                return []
            first, budget = self.queue[0], MAX_ECHO_POSITIONS if self.queue[0].kind == "echo" else BATCH_TOKENS
            batch, longest = [first], first.tokens
            for job in self.queue[1:]:
                joins = first.shares and job.shares and (job.kind, job.key) == (first.kind, first.key)
                if joins and len(batch) < MAX_BATCH and (len(batch) + 1) * max(longest, job.tokens) <= budget:
                    batch.append(job)
                    longest = max(longest, job.tokens)
            for job in batch:
                self.queue.remove(job)
                job.state = "running"
            return batch

    def _compute(self, batch: list[Job]) -> None:
        """One backend call for the batch; before every forward pass, the batch stops if all its clients left."""

        def check(*_: object) -> None:
            if all(job.client.gone() for job in batch):
                raise ClientGone

        hook = self.served.backend.model.register_forward_pre_hook(check)
        try:
            results = COMPUTE[batch[0].kind](self.served, batch)
        except Exception as error:  # noqa: BLE001 - each request's handler answers it (a 500 with its traceback, or one log line)
            return self._finish(batch, error=error)
        finally:
            hook.remove()
        for job, result in zip(batch, results):
            job.result = result
        self._finish(batch)

    @staticmethod
    def _finish(jobs: list[Job], error: BaseException | None = None) -> None:
        for job in jobs:
            job.error, job.state = error, "done"
            job.done.set()


def _next_tokens(served: Served, batch: list[Job]) -> list:
    """Each prompt's full-vocabulary next-token log-probabilities (float64 arrays), one shared forward pass."""
    vocabulary = list(range(len(served.backend.tokenizer)))
    return served.backend.next_token_logprobs([job.work for job in batch], [vocabulary] * len(batch), batch_size=len(batch))


def _echoes(served: Served, batch: list[Job]) -> list:
    """Each prompt's log-probabilities at every position (float32 tensors), right-padded into one forward pass."""
    import torch

    width = max(len(job.work) for job in batch)
    ids = torch.zeros((len(batch), width), dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, job in enumerate(batch):
        ids[row, : len(job.work)], mask[row, : len(job.work)] = torch.tensor(job.work), 1
    backend = served.backend
    with torch.inference_mode():
        logits = backend.model(input_ids=ids.to(backend.device), attention_mask=mask.to(backend.device)).logits.float()
        logits -= torch.logsumexp(logits, dim=-1, keepdim=True)  # log-softmax in place: a batch holds one copy of its logits
        logprobs = logits.cpu()
    return [logprobs[row, : len(job.work)] for row, job in enumerate(batch)]


def _generations(served: Served, batch: list[Job]) -> list:
    """Replies of prompts that share their settings, generated together (left-padded, as the backend batches them)."""
    return served.backend.generate_texts([job.work for job in batch], batch[0].key, batch_size=len(batch))


COMPUTE: dict[str, Callable[[Served, list[Job]], list]] = {"top": _next_tokens, "echo": _echoes, "generate": _generations}


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


def _top(tokenizer, logprobs, k: int) -> dict[str, float]:  # noqa: ANN001 - a tokenizer and a 1-D torch tensor
    """The ``k`` most likely tokens as text; a text two tokens share keeps the likelier."""
    best: dict[str, float] = {}
    values, tokens = logprobs.topk(k)
    for token, value in zip(tokens.tolist(), values.tolist()):
        best.setdefault(tokenizer.decode([token]), value)
    return best


def top_logprobs(served: Served, client: Client, prompt: list[int], k: int) -> dict[str, float]:
    """The ``k`` most likely next tokens (as text) with their full-vocabulary log-probabilities."""
    import torch

    logprobs = served.batcher.run(Job("top", None, len(prompt), prompt, client))
    return _top(served.backend.tokenizer, torch.from_numpy(logprobs), k)


@dataclass(frozen=True)
class Echo:
    """A prompt scored token by token: what ``echo`` returns in the OpenAI ``logprobs`` layout."""

    tokens: list[str]
    token_logprobs: list[float | None]  # each token's log-probability given those before it; the first has none
    top_logprobs: list[dict[str, float] | None]
    next_top: dict[str, float]  # the token after the prompt: its ``k`` most likely values


def score_prompt(served: Served, client: Client, prompt: list[int], k: int) -> Echo:
    """Every token's log-probability after the ones before it, and the next token's top-k (one row of a batch's forward pass)."""
    import torch

    tokenizer = served.backend.tokenizer
    logprobs = served.batcher.run(Job("echo", None, len(prompt), prompt, client))
    chosen = logprobs[torch.arange(len(prompt) - 1), torch.tensor(prompt[1:], dtype=torch.long)].tolist()
    tops = [None] + [{tokenizer.decode([token]): value, **_top(tokenizer, row, k)} for token, value, row in zip(prompt[1:], chosen, logprobs)]
    return Echo([tokenizer.decode([token]) for token in prompt], [None, *chosen], tops, _top(tokenizer, logprobs[-1], max(k, 1)))


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
    limit = served.backend.context_length
    # The bound counts twice the characters a token can spell: a normaliser may merge characters (NFKC) before tokenising.
    if limit is not None and len(text) > 2 * limit and len(text) > 2 * (limit - max_tokens) * served.longest_token:
        raise RequestError(
            400,
            f"This model's maximum context length is {limit} tokens. However, your prompt of {len(text):,} characters is at least "
            f"{len(text) // (2 * served.longest_token):,} tokens. Please reduce the length of the prompt.",
            "context_length_exceeded",
        )
    encoded = served.backend.encode([text])[0]
    _check_context(served, len(encoded), max_tokens)
    return encoded


def _check_context(served: Served, prompt_tokens: int, max_tokens: int) -> None:
    """Refuse, before any compute, a prompt whose tokens and reply exceed the model's context (past it the numbers are wrong)."""
    limit = served.backend.context_length
    if limit is not None and prompt_tokens + max_tokens > limit:
        raise RequestError(
            400,
            f"This model's maximum context length is {limit} tokens. However, you requested {prompt_tokens + max_tokens} tokens "
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
    reply = served.batcher.run(Job("generate", settings, len(encoded) + max_tokens, prompt, client, shares=not settings.sample))
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
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
    timeout = IDLE_S  # a stalled client cannot hold a thread forever

    def do_GET(self) -> None:  # noqa: N802 - the standard library's naming
        try:
            self._body()
            if self.path.rstrip("/") != "/v1/models":
                raise RequestError(404, f"no route {self.path}")
        except RequestError as error:
            return self._refuse(error)
        self._send(200, {"object": "list", "data": [{"id": self.served.name, "object": "model", "created": 0, "owned_by": "dateeval"}]})

    def do_POST(self) -> None:  # noqa: N802
        try:
            data = self._body()
            route = ROUTES.get(self.path.rstrip("/"))
            if route is None:
                raise RequestError(404, f"no route {self.path}")
            self._send(200, route(self.served, _json_object(data), Client(self.connection)))
        except RequestError as error:
            self._refuse(error)
        except (ClientGone, ConnectionError):
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

    def _body(self) -> bytes:
        """The request body, read to its end so that the connection stays usable; where it cannot be, the connection closes after the answer."""
        coding = (self.headers.get("Transfer-Encoding") or "").strip().lower()
        if coding:
            if not coding.endswith("chunked"):
                self.close_connection = True
                raise RequestError(400, f"Transfer-Encoding {coding[:40]!r} is not supported: send the body with a Content-Length")
            return self._chunked()
        text = (self.headers.get("Content-Length") or "0").strip()
        if not (text.isascii() and text.isdigit()):
            self.close_connection = True
            raise RequestError(400, f"Content-Length {text[:40]!r} is not a number of bytes")
        if int(text) > MAX_BODY:
            self._discard(int(text))
            raise RequestError(413, f"the body is {int(text):,} bytes, over this server's limit of {MAX_BODY:,}", "request_too_large")
        return self.rfile.read(int(text))

    def _chunked(self) -> bytes:
        """A chunked body (RFC 9112 §7.1), up to :data:`MAX_BODY`; trailers are read and ignored."""
        parts, size = [], 0
        while True:
            try:
                length = int(self.rfile.readline(1024).split(b";")[0], 16)
            except ValueError:
                length = -1
            if length < 0:
                self.close_connection = True
                raise RequestError(400, "the chunked body is malformed")
            size += length
            if size > MAX_BODY:
                self.close_connection = True
                raise RequestError(413, f"the chunked body is over this server's limit of {MAX_BODY:,} bytes", "request_too_large")
            if length == 0:
                break
            parts.append(self.rfile.read(length))
            self.rfile.readline(1024)  # the CRLF after the chunk
        while self.rfile.readline(1024).strip():
            pass  # trailer fields, up to the empty line
        return b"".join(parts)

    def _discard(self, length: int) -> None:
        """Read and drop an oversized body (up to :data:`DRAIN_LIMIT`), so that the client reads the 413 and not a reset connection."""
        if length > DRAIN_LIMIT:
            self.close_connection = True
            return
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 16))
            if not chunk:
                self.close_connection = True
                return
            length -= len(chunk)

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


class Server(ThreadingHTTPServer):
    """A thread per connection, a burst of :data:`BACKLOG` connections queued by the kernel rather than refused."""

    request_queue_size = BACKLOG
    daemon_threads = True


def make_server(served: Served, host: str, port: int) -> ThreadingHTTPServer:
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
