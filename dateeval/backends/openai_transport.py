"""The HTTP side of an OpenAI-compatible endpoint: the official ``openai`` client on its own event loop, at most
``concurrency`` requests in flight, retries with exponential backoff and full jitter on 408/409/429/5xx, timeouts and
dropped connections, and the API key (read from the variable the user names) kept out of every message.
``openai_api.OpenAIBackend`` decides what to ask and reads the answers; this module only sends them.
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
from typing import TYPE_CHECKING, Any

from dateeval.backends.base import BackendOptions, GenerationRequest, Usage
from dateeval.errors import DateEvalError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

TOP_K = 20  # alternatives asked for per scored token: OpenAI's chat maximum and vLLM's default --max-logprobs
MAX_API_STOPS = 4  # OpenAI accepts at most four stop strings; the rest are cut here
BACKOFF_BASE_S, BACKOFF_CAP_S, RETRY_AFTER_CAP_S = 0.5, 30.0, 120.0
_RETRY_STATUS = frozenset({408, 409, 429})
NO_KEY = "not-needed"  # what a local server gets when no --api-key-env is given (the client insists on some key)


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
        raise DateEvalError(
            "the endpoint URL carries credentials: give the URL without them and the key's variable name with --api-key-env"
        )
    return Endpoint(url.rstrip("/"), model.strip())


def api_key(variable: str | None) -> str:
    """The key from the environment variable *named* by the user (a local server needs none)."""
    if variable is None:
        return NO_KEY
    value = os.environ.get(variable, "")
    if not value:
        raise DateEvalError(
            f"environment variable {variable} (--api-key-env) is not set or empty: export the API key in it"
        )
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
        return (
            email.utils.parsedate_to_datetime(value).astimezone(dt.timezone.utc).isoformat(timespec="seconds")
            if value
            else None
        )
    except (TypeError, ValueError):
        return None


class Refused(DateEvalError):
    """The server answered a request with a status that retrying cannot change (400, 404, 422...); ``reason`` is the status and its message."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def usage(body: Any) -> dict[str, int | None]:
    """Token counts as the server billed them (None where it reports none), as :class:`Usage` names them."""
    usage = body.get("usage") if isinstance(body, dict) else None
    usage = usage if isinstance(usage, dict) else {}

    def count(name: str) -> int | None:
        return usage.get(name) if isinstance(usage.get(name), int) else None

    return {"api_prompt_tokens": count("prompt_tokens"), "api_completion_tokens": count("completion_tokens")}


@dataclass(frozen=True)
class Answer:
    """One answered request: its JSON body and what every row records about it."""

    body: Any
    usage: Usage  # what every row records about it: when it was asked, the server's date, the tokens billed


class Transport:
    """One endpoint's requests: sent concurrently (bounded), retried on transient failures, answered in order."""

    def __init__(self, endpoint: Endpoint, options: BackendOptions) -> None:
        self.endpoint, self.options = endpoint, options
        self.key = api_key(options.api_key_env)
        self._loop = asyncio.new_event_loop()
        self._client = self._loop.run_until_complete(self._connect())

    async def _connect(self) -> AsyncOpenAI:  # bound to this transport's event loop
        import openai

        self._slots = asyncio.Semaphore(self.options.concurrency)
        return openai.AsyncOpenAI(
            base_url=self.endpoint.url, api_key=self.key, timeout=self.options.timeout_s, max_retries=0
        )

    def close(self) -> None:
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._client.close())
            self._loop.close()

    def server_clock(self) -> str | None:
        """The server's ``Date`` header (ISO 8601 UTC) on one ``GET /models`` (an error answer carries it too)."""
        import openai

        async def ask() -> Any:
            try:
                return (await self._client.models.with_raw_response.list()).headers
            except openai.APIStatusError as error:
                return error.response.headers
            except openai.APIConnectionError as error:
                raise self.failure(_connection_problem(error), 0) from None

        return server_date(self._loop.run_until_complete(ask()))

    def score(self, prompt: Any, chat: bool) -> Awaitable[Any]:
        """One next token's top-k alternatives of a prompt (text, or chat messages where ``chat``)."""
        model = self.endpoint.model
        if chat:
            return self._client.chat.completions.with_raw_response.create(
                model=model,
                messages=list(prompt),
                max_completion_tokens=1,
                temperature=0,
                logprobs=True,
                top_logprobs=TOP_K,
            )
        return self._client.completions.with_raw_response.create(
            model=model, prompt=prompt, max_tokens=1, temperature=0, logprobs=TOP_K
        )

    def echo(self, prompts: list[list[int]]) -> list[Answer]:
        """Token ids in (the server must not re-tokenise), the prompt echoed with each token's log-probability, nothing generated."""
        create = self._client.completions.with_raw_response.create
        return self.all(
            [
                lambda p=p: create(
                    model=self.endpoint.model, prompt=p, echo=True, max_tokens=0, logprobs=1, temperature=0
                )
                for p in prompts
            ]
        )

    def generate(self, request: GenerationRequest, chat: bool) -> Awaitable[Any]:
        """One reply to a prompt under its decoding settings (at most :data:`MAX_API_STOPS` stop strings sent)."""
        settings = request.settings
        # Greedy is temperature 0; sampling keeps the provider's own temperature/top-p, made repeatable by the seed.
        decoding = {"seed": settings.seed} if settings.sample else {"temperature": 0}
        common = {"model": self.endpoint.model, "stop": list(settings.stop[:MAX_API_STOPS]) or None, **decoding}
        if chat:
            create = self._client.chat.completions.with_raw_response.create
            return create(messages=list(request.prompt), max_completion_tokens=settings.max_new_tokens, **common)
        return self._client.completions.with_raw_response.create(
            prompt=request.prompt, max_tokens=settings.max_new_tokens, **common
        )

    def all(self, sends: list[Callable[[], Awaitable[Any]]]) -> list[Answer]:
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
                what = f"HTTP {error.status_code}: {_server_message(error)}"
                if not _retryable(error.status_code):
                    raise Refused(str(self.failure(what, attempt)), self.redacted(what)) from None
                if attempt == self.options.retries:
                    raise self.failure(what, attempt) from None
                delay = _retry_after(error.response.headers) or backoff_delay(attempt)
            except openai.APIConnectionError as error:  # timeouts, refused and dropped connections
                if attempt == self.options.retries:
                    raise self.failure(_connection_problem(error), attempt) from None
                delay = backoff_delay(attempt)
            except ValueError:
                raise self.failure("the answer is not JSON", attempt) from None
            else:
                return Answer(body, Usage(asked.isoformat(timespec="seconds"), server_date(raw.headers), **usage(body)))
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def failure(self, what: str, attempt: int) -> DateEvalError:
        """A failed request as one message naming the endpoint and the attempts, the key redacted."""
        tries = f" after {attempt + 1} attempts" if attempt else ""
        return DateEvalError(self.redacted(f"{self.endpoint.url} ({self.endpoint.model}) {what}{tries}"))

    def redacted(self, text: str) -> str:
        """The text with the key, should a server echo it, replaced by ***."""
        return text.replace(self.key, "***") if self.key != NO_KEY else text


def _connection_problem(error: Any) -> str:
    """What went wrong with an ``openai.APIConnectionError``, in words."""
    import openai

    return "timed out" if isinstance(error, openai.APITimeoutError) else f"connection failed ({error.message})"


def _server_message(error: Any) -> str:
    """The server's own error message (short), else the client's."""
    body = error.body
    message = body.get("message") if isinstance(body, dict) else None
    text = message if isinstance(message, str) and message else error.message
    return " ".join(str(text).split())[:300]
