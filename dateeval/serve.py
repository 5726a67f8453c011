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
Requests are answered one at a time (one model, one lock); the standard
library's threading server keeps connections concurrent. Every response
carries the HTTP ``Date`` header, as providers' do.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from dateeval.backends.base import GenerationSettings
from dateeval.backends.transformers import TransformersBackend
from dateeval.errors import DateEvalError
from dateeval.prompting import ChatTemplate

MAX_LOGPROBS = 20  # the most alternatives a request may ask for (vLLM's default, OpenAI's chat limit)
MAX_BODY = 16 << 20


class RequestError(Exception):
    """A request the server refuses: answered with ``status`` and an OpenAI-style error body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Served:
    """The model behind the endpoint, the name it answers to and the chat template it applies."""

    backend: TransformersBackend
    name: str
    template: ChatTemplate
    lock: threading.Lock


def _number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise RequestError(400, f"{name} must be a number between {low} and {high}")
    return value


def _stops(body: dict) -> tuple[str, ...]:
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else stop
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
        raise RequestError(400, "stop must be a string or a list of strings")
    return tuple(stop)


def _settings(body: dict, max_tokens: int) -> GenerationSettings:
    """Greedy at temperature 0; otherwise the model's own sampling settings with the request's seed."""
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


def top_logprobs(served: Served, prompt: list[int], k: int) -> dict[str, float]:
    """The ``k`` most likely next tokens (as text) with their full-vocabulary log-probabilities."""
    import torch

    vocabulary = list(range(len(served.backend.tokenizer)))
    with served.lock:
        logprobs = served.backend.next_token_logprobs([prompt], [vocabulary], batch_size=1)[0]
    return _top(served.backend.tokenizer, torch.from_numpy(logprobs), k)


@dataclass(frozen=True)
class Echo:
    """A prompt scored token by token: what ``echo`` returns in the OpenAI ``logprobs`` layout."""

    tokens: list[str]
    token_logprobs: list[float | None]  # each token's log-probability given those before it; the first has none
    top_logprobs: list[dict[str, float] | None]
    next_top: dict[str, float]  # the token after the prompt: its ``k`` most likely values


def score_prompt(served: Served, prompt: list[int], k: int) -> Echo:
    """One forward pass over the prompt: every token's log-probability after the ones before it, and the next token's top-k."""
    import torch

    backend, tokenizer = served.backend, served.backend.tokenizer
    with served.lock, torch.inference_mode():
        logits = backend.model(input_ids=torch.tensor([prompt], device=backend.device)).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1).cpu()
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


def _max_tokens(body: dict, *names: str) -> int:
    value = next((body[name] for name in names if body.get(name) is not None), 16)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RequestError(400, f"{names[0]} must be a whole number of at least 1")
    return value


def _top_k(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_LOGPROBS:
        raise RequestError(400, f"logprobs must be a whole number between 0 and {MAX_LOGPROBS}")
    return value


def _generate_or_score(served: Served, prompt: str, body: dict, max_tokens: int, k: int | None) -> tuple[str, int, int, dict | None]:
    """(text, prompt tokens, completion tokens, first token's alternatives): one token scored, or a decoded reply."""
    if k is not None:
        if max_tokens != 1:
            raise RequestError(400, "this server returns logprobs for max_tokens=1 only")
        encoded = served.backend.encode([prompt])[0]
        best = top_logprobs(served, encoded, max(k, 1))
        text = next(iter(best))
        return text, len(encoded), 1, dict(list(best.items())[: max(k, 1)])
    with served.lock:
        reply = served.backend.generate_texts([prompt], _settings(body, max_tokens), batch_size=1)[0]
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


def _echo(served: Served, prompt: str | list[int], body: dict, k: int | None) -> tuple[str, dict, int, int]:
    """``echo``: the prompt's tokens with their log-probabilities (and, with ``max_tokens=1``, the greedy next token)."""
    max_tokens = body.get("max_tokens")
    if k is None or max_tokens not in (0, 1) or isinstance(max_tokens, bool):
        raise RequestError(400, "this server echoes the prompt with logprobs and max_tokens 0 or 1 only")
    ids = served.backend.encode([prompt])[0] if isinstance(prompt, str) else prompt
    scored = score_prompt(served, ids, k)
    tokens, values, tops = scored.tokens, scored.token_logprobs, scored.top_logprobs
    if max_tokens == 1:
        token, value = next(iter(scored.next_top.items()))
        tokens, values, tops = [*tokens, token], [*values, value], [*tops, dict(list(scored.next_top.items())[:k])]
    offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
    logprobs = {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}
    return "".join(tokens), logprobs, len(ids), max_tokens


def completions(served: Served, body: dict) -> dict:
    """``/v1/completions``: the prompt is text (or token ids) the client rendered; ``logprobs=k`` scores the next token."""
    _check_model(served, body)
    prompt = _prompt(served, body)
    k = None if body.get("logprobs") is None else _top_k(body["logprobs"])
    if body.get("echo"):
        text, logprobs, prompt_tokens, completion_tokens = _echo(served, prompt, body, k)
        choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length"}
        return _envelope("text_completion", served, choice, _usage(prompt_tokens, completion_tokens))
    if not isinstance(prompt, str):
        raise RequestError(400, "this server takes token-id prompts with echo only")
    text, prompt_tokens, completion_tokens, best = _generate_or_score(served, prompt, body, _max_tokens(body, "max_tokens"), k)
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


def chat_completions(served: Served, body: dict) -> dict:
    """``/v1/chat/completions``: the server's own template, rendered as a provider would (the real clock, today)."""
    _check_model(served, body)
    try:
        prompt = served.template.render(_messages(body), mode="default").text
    except DateEvalError as error:
        raise RequestError(400, str(error)) from None
    k = _top_k(body.get("top_logprobs") or 0) if body.get("logprobs") else None
    text, prompt_tokens, completion_tokens, best = _generate_or_score(served, prompt, body, _max_tokens(body, "max_completion_tokens", "max_tokens"), k)
    logprobs = None
    if best is not None:
        entries = [{"token": token, "logprob": value, "bytes": list(token.encode())} for token, value in best.items()]
        logprobs = {"content": [{**entries[0], "top_logprobs": entries[: k or 0]}]}
    finish = _finish(completion_tokens, body, "max_completion_tokens", "max_tokens")
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": logprobs, "finish_reason": finish}
    return _envelope("chat.completion", served, choice, _usage(prompt_tokens, completion_tokens))


ROUTES = {"/v1/completions": completions, "/v1/chat/completions": chat_completions}


class Handler(BaseHTTPRequestHandler):
    """OpenAI-style routes; every refusal is a JSON error body, never a traceback page."""

    served: Served
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections

    def do_GET(self) -> None:  # noqa: N802 - the standard library's naming
        if self.path.rstrip("/") != "/v1/models":
            return self._send(404, _error(f"no route {self.path}"))
        self._send(200, {"object": "list", "data": [{"id": self.served.name, "object": "model", "created": 0, "owned_by": "dateeval"}]})

    def do_POST(self) -> None:  # noqa: N802
        route = ROUTES.get(self.path.rstrip("/"))
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if route is None:
                raise RequestError(404, f"no route {self.path}")
            if not 0 < length <= MAX_BODY:
                raise RequestError(400, "a JSON body is required")
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                raise RequestError(400, "the body is not JSON") from None
            if not isinstance(body, dict):
                raise RequestError(400, "the body must be a JSON object")
            self._send(200, route(self.served, body))
        except RequestError as error:
            self._send(error.status, _error(str(error)))

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)  # also writes the Date header
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the standard library's signature
        """Quiet: a sweep sends thousands of requests."""


def _error(message: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


def make_server(served: Served, host: str, port: int) -> ThreadingHTTPServer:
    """A server bound to ``host:port`` (port 0: a free one, read back from ``server_address``)."""
    handler = type("BoundHandler", (Handler,), {"served": served})
    try:
        server = ThreadingHTTPServer((host, port), handler)
    except OSError as error:
        raise DateEvalError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    server.daemon_threads = True
    return server


def load(model: str, *, name: str | None, chat_template: str | None, dtype: str, device: str) -> Served:
    """Load the model (and the template it should apply, if not its own)."""
    from dateeval.models import resolve

    backend = TransformersBackend(resolve(model), dtype=dtype, device=device)
    template = backend.template
    if chat_template:
        template = ChatTemplate.from_file(chat_template, bos_token=template.bos_token, eos_token=template.eos_token)
    return Served(backend, name or model, template, threading.Lock())
