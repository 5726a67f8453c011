"""OpenAI-compatible HTTP endpoints (vLLM, SGLang, llama.cpp, OpenAI, OpenRouter...): ``--model openai:URL#MODEL``.

How much of the date a study controls depends on who renders the chat template, so the mode is explicit:

* ``completions``: dateeval renders the model's template locally and sends
  text to ``/completions``: full date control for every template kind, label
  probabilities from the next token's top-k ``logprobs``.
* ``chat``: the server applies its own template to the messages; only the
  system line dateeval injects (or leaves out) is ours.
* ``server-clock``: nothing dated is sent; the provider injects its own date
  (paper §5.2). Every row records when it was asked (``request_utc``) and the
  server's HTTP ``Date`` header, so daily runs build a longitudinal series.

Requests run concurrently (bounded), are retried with exponential backoff and
jitter on 408/409/429/5xx, timeouts and dropped connections, and every answer
is checked field by field: a malformed one ends the unit with one clear
error before anything is stored. The API key is read from the environment
variable the user names; it is never stored, logged or shown in an error.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import os
import random
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dateeval.backends.base import (
    GENERATE, LABEL_LOGPROBS, Backend, BackendOptions, Capabilities, Generation, GenerationRequest, Label, LabelRequest,
    ModelIdentity, register_backend,
)  # fmt: skip
from dateeval.errors import DateEvalError
from dateeval.prompting import ChatTemplate

MODES = ("completions", "chat", "server-clock")
TOP_K = 20  # alternatives asked for per scored token: OpenAI's chat maximum and vLLM's default --max-logprobs
MAX_API_STOPS = 4  # OpenAI accepts at most four stop strings; the rest are cut here
BACKOFF_BASE_S, BACKOFF_CAP_S, RETRY_AFTER_CAP_S = 0.5, 30.0, 120.0
_RETRY_STATUS = frozenset({408, 409, 429})
_DATE_CONTROL = {"completions": "full", "chat": "system-line", "server-clock": "server-clock"}
_NO_KEY = "not-needed"  # what a local server gets when no --api-key-env is given (the client insists on some key)


@dataclass(frozen=True)
class Endpoint:
    """Where the model is served: the API's base URL (``…/v1``) and the model name the server knows it by."""

    url: str
    model: str


def parse_endpoint(spec: str) -> Endpoint:
    """``URL#MODEL`` → :class:`Endpoint`; checked before anything connects."""
    url, hash_sign, model = spec.rpartition("#")
    example = "openai:http://127.0.0.1:8000/v1#smollm2-135m"
    if not hash_sign or not url or not model.strip():
        raise DateEvalError(f"model openai:{spec} names no model: write openai:URL#MODEL, e.g. {example}")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DateEvalError(f"openai:{url} is not an http(s) URL: write openai:URL#MODEL, e.g. {example}")
    if parts.username or parts.password:
        raise DateEvalError("the endpoint URL carries credentials: give the URL without them and the key's variable name with --api-key-env")
    return Endpoint(url.rstrip("/"), model.strip())


def api_key(variable: str | None) -> str:
    """The key from the environment variable *named* by the user (a local server needs none)."""
    if variable is None:
        return _NO_KEY
    value = os.environ.get(variable, "")
    if not value:
        raise DateEvalError(f"environment variable {variable} (--api-key-env) is not set or empty: export the API key in it")
    return value


def _retryable(status: int) -> bool:
    return status in _RETRY_STATUS or status >= 500


def backoff_delay(attempt: int, base: float = BACKOFF_BASE_S) -> float:
    """Exponential backoff with full jitter: many workers hitting a rate limit do not retry in lockstep."""
    return random.uniform(0, min(BACKOFF_CAP_S, base * 2**attempt))


def _retry_after(headers: Any) -> float | None:
    """The server's ``Retry-After`` in seconds, where it sends one we may honour."""
    try:
        seconds = float(headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None
    return seconds if 0 <= seconds <= RETRY_AFTER_CAP_S else None


def server_date(headers: Any) -> str | None:
    """The HTTP ``Date`` header as ISO 8601 UTC (the provider's own clock), or None when absent or malformed."""
    value = headers.get("date")
    try:
        return email.utils.parsedate_to_datetime(value).astimezone(dt.timezone.utc).isoformat(timespec="seconds") if value else None
    except (TypeError, ValueError):
        return None


def _field(body: Any, *path: str | int) -> Any:
    """``body[path[0]][path[1]]…``, or a clear error naming the first missing step."""
    value = body
    for depth, step in enumerate(path):
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            where = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in path[: depth + 1]).lstrip(".")
            raise MalformedAnswer(f"no {where}") from None
    return value


class MalformedAnswer(Exception):
    """An answer that parsed as JSON but lacks what the request asked for."""


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""  # a chat reply with no content (all of its budget spent elsewhere) is an empty reply
    if not isinstance(value, str):
        raise MalformedAnswer(f"{what} is not text")
    return value


def _logprob(value: Any, token: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value <= 0:
        raise MalformedAnswer(f"the log-probability of {token!r} is {value!r}, not a number <= 0")
    return float(value)


def _alternatives(body: Any, chat: bool) -> dict[str, float]:
    """The first generated token's top-k alternatives, token text → log-probability."""
    if chat:
        entries = _field(body, "choices", 0, "logprobs", "content", 0, "top_logprobs")
        pairs = [(_field(entry, "token"), _field(entry, "logprob")) for entry in entries]
    else:
        top = _field(body, "choices", 0, "logprobs", "top_logprobs", 0)
        if not isinstance(top, dict):
            raise MalformedAnswer("top_logprobs[0] is not an object")
        pairs = list(top.items())
    best: dict[str, float] = {}
    for token, value in pairs:
        best.setdefault(_text(token, "a token"), _logprob(value, token))
    return best


def _usage(body: Any) -> dict:
    """Token counts as the server billed them (None where it reports none)."""
    usage = body.get("usage") if isinstance(body, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    count = lambda name: usage.get(name) if isinstance(usage.get(name), int) else None  # noqa: E731
    return {"api_prompt_tokens": count("prompt_tokens"), "api_completion_tokens": count("completion_tokens")}


@dataclass(frozen=True)
class Answer:
    """One answered request: its JSON body and what every row records about it."""

    body: Any
    record: dict  # request_utc, server_date, api token counts


def _local_template(name: str) -> tuple[Any, ChatTemplate]:
    """The tokenizer and chat template completions mode renders with: a known model, a folder or a Hub id (offline cache)."""
    import transformers

    from dateeval.models import converted_gguf_dir, resolve

    source = resolve(name)
    location = str(converted_gguf_dir(source)) if source.kind == "gguf" else source.location
    kwargs = {"revision": source.revision} if source.kind == "hub" and source.revision else {}
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(location, **kwargs)
    except (OSError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise DateEvalError(f"cannot load the tokenizer of {name}: {first_line}") from None
    return tokenizer, ChatTemplate.from_tokenizer(tokenizer, name=source.name)


@register_backend("openai")
class OpenAIBackend(Backend):
    """A model behind an OpenAI-compatible API, asked through the official ``openai`` client."""

    @classmethod
    def locate(cls, spec: str) -> Endpoint:
        return parse_endpoint(spec)

    @classmethod
    def open(cls, located: Endpoint, options: BackendOptions) -> OpenAIBackend:
        return cls(located, options)

    def __init__(self, endpoint: Endpoint, options: BackendOptions) -> None:
        import openai

        if options.mode not in MODES:
            raise DateEvalError(f"unknown API mode {options.mode!r}: choose one of {', '.join(MODES)}")
        if options.concurrency < 1 or options.retries < 0 or not options.timeout_s > 0:
            raise DateEvalError("concurrency must be at least 1, retries at least 0 and the request timeout above 0 seconds")
        self.endpoint, self.mode, self.options = endpoint, options.mode, options
        self.chat = options.mode != "completions"
        self.template, self.tokenizer = None, None
        if not self.chat:
            self.tokenizer, self.template = self._completions_template(options.tokenizer or endpoint.model)
        self._key = api_key(options.api_key_env)
        requests = frozenset({LABEL_LOGPROBS, GENERATE})
        self.capabilities = Capabilities(requests, renders_locally=not self.chat, deterministic=False, date_control=_DATE_CONTROL[self.mode])
        self.identity = ModelIdentity(
            model=endpoint.model,
            source=f"{endpoint.url}#{endpoint.model}",
            revision=None,
            dtype="remote",
            device=self.mode,
            hardware=f"remote {urllib.parse.urlsplit(endpoint.url).netloc}",
            backend=self.name,
            versions={"openai": openai.__version__},
        )
        self._loop = asyncio.new_event_loop()
        self._client = self._loop.run_until_complete(self._connect())

    @staticmethod
    def _completions_template(name: str) -> tuple[Any, ChatTemplate]:
        try:
            return _local_template(name)
        except DateEvalError as error:
            raise DateEvalError(
                f"completions mode renders prompts locally and needs the model's tokenizer and chat template ({error}): "
                "give --tokenizer NAME_OR_FOLDER, or use --api-mode chat"
            ) from None

    async def _connect(self):  # noqa: ANN202 - an openai.AsyncOpenAI bound to this backend's event loop
        import openai

        self._slots = asyncio.Semaphore(self.options.concurrency)
        return openai.AsyncOpenAI(base_url=self.endpoint.url, api_key=self._key, timeout=self.options.timeout_s, max_retries=0)

    def close(self) -> None:
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._client.close())
            self._loop.close()

    # Requests

    def label_logprobs(self, requests: list[LabelRequest], batch_size: int) -> list[np.ndarray]:
        return self.label_logprobs_with_usage(requests, batch_size)[0]

    def label_logprobs_with_usage(self, requests: list[LabelRequest], batch_size: int) -> tuple[list[np.ndarray], list[dict]]:
        """One max_tokens=1 request per prompt; the labels' log-probabilities are read from the top-k alternatives."""
        answers = self._all([lambda r=r: self._score(r.prompt) for r in requests])
        scores = []
        for request, answer in zip(requests, answers):
            best = self._checked(lambda answer=answer: _alternatives(answer.body, self.chat))
            scores.append(np.array([self._label_logprob(best, label) for label in request.labels], dtype=np.float64))
        return scores, [answer.record for answer in answers]

    def generate(self, requests: list[GenerationRequest], batch_size: int) -> list[Generation]:
        answers = self._all([lambda r=r: self._generate(r) for r in requests])
        return [self._generation(request, answer) for request, answer in zip(requests, answers)]

    def _label_logprob(self, best: dict[str, float], label: Label) -> float:
        """A label outside the top-k has no readable probability: one clear error rather than a guessed row."""
        if label.text in best:
            return best[label.text]
        seen = ", ".join(repr(token) for token in list(best)[:8])
        bare = "--label-style label (the bare letters are among them), " if label.text != label.text.strip() and label.text.strip() in best else ""
        raise DateEvalError(
            f"{self.endpoint.model}: option label {label.text!r} is not among the {len(best)} most likely next tokens the server "
            f"returns (top: {seen}), so the labels' probabilities cannot be read; use {bare}the dataset's _cot variant, "
            "or a server that returns more alternatives (vLLM --max-logprobs)"
        )

    def _generation(self, request: GenerationRequest, answer: Answer) -> Generation:
        path = ("choices", 0, "message", "content") if self.chat else ("choices", 0, "text")
        text = self._checked(lambda: _text(_field(answer.body, *path), "the reply"))
        cuts = [text.index(stop) for stop in request.settings.stop if stop in text]
        text = text[: min(cuts)] if cuts else text
        record = answer.record
        return Generation(text, record["api_completion_tokens"] or 0, record["api_prompt_tokens"], usage=record)

    def _checked(self, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except MalformedAnswer as error:
            raise DateEvalError(f"{self.endpoint.url} sent a malformed answer ({error})") from None

    # Transport

    def _score(self, prompt: Any) -> Awaitable[Any]:
        model = self.endpoint.model
        if self.chat:
            return self._client.chat.completions.with_raw_response.create(
                model=model, messages=list(prompt), max_completion_tokens=1, temperature=0, logprobs=True, top_logprobs=TOP_K
            )
        return self._client.completions.with_raw_response.create(model=model, prompt=prompt, max_tokens=1, temperature=0, logprobs=TOP_K)

    def _generate(self, request: GenerationRequest) -> Awaitable[Any]:
        settings = request.settings
        # Greedy is temperature 0; sampling keeps the provider's own temperature/top-p, made repeatable by the seed.
        decoding = {"seed": settings.seed} if settings.sample else {"temperature": 0}
        common = {"model": self.endpoint.model, "stop": list(settings.stop[:MAX_API_STOPS]) or None, **decoding}
        if self.chat:
            create = self._client.chat.completions.with_raw_response.create
            return create(messages=list(request.prompt), max_completion_tokens=settings.max_new_tokens, **common)
        return self._client.completions.with_raw_response.create(prompt=request.prompt, max_tokens=settings.max_new_tokens, **common)

    def _all(self, sends: list[Callable[[], Awaitable[Any]]]) -> list[Answer]:
        """Every request, at most ``concurrency`` in flight, answers in order; the first failure ends them all."""

        async def run() -> list[Answer]:
            tasks = [asyncio.ensure_future(self._ask(send)) for send in sends]
            try:
                return await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

        return self._loop.run_until_complete(run())

    async def _ask(self, send: Callable[[], Awaitable[Any]]) -> Answer:
        """One request, retried on transient failures; the key never reaches a message."""
        import openai

        for attempt in range(self.options.retries + 1):
            asked = dt.datetime.now(dt.timezone.utc)
            try:
                async with self._slots:
                    raw = await send()
                body = raw.http_response.json()
            except openai.APIStatusError as error:
                if not _retryable(error.status_code) or attempt == self.options.retries:
                    raise self._failure(f"HTTP {error.status_code}: {_server_message(error)}", attempt) from None
                delay = _retry_after(error.response.headers) or backoff_delay(attempt)
            except openai.APIConnectionError as error:  # timeouts, refused and dropped connections
                if attempt == self.options.retries:
                    raise self._failure("timed out" if isinstance(error, openai.APITimeoutError) else f"connection failed ({error.message})", attempt) from None
                delay = backoff_delay(attempt)
            except ValueError:
                raise self._failure("the answer is not JSON", attempt) from None
            else:
                record = {"request_utc": asked.isoformat(timespec="seconds"), "server_date": server_date(raw.headers), **_usage(body)}
                return Answer(body, record)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def _failure(self, what: str, attempt: int) -> DateEvalError:
        tries = f" after {attempt + 1} attempts" if attempt else ""
        message = f"{self.endpoint.url} ({self.endpoint.model}) {what}{tries}"
        return DateEvalError(message.replace(self._key, "***") if self._key != _NO_KEY else message)


def _server_message(error: Any) -> str:
    """The server's own error message (short), else the client's."""
    body = error.body
    message = body.get("message") if isinstance(body, dict) else None
    text = message if isinstance(message, str) and message else error.message
    return " ".join(str(text).split())[:300]
