"""A request body's fields read and checked for ``dateeval serve``: each refusal a :class:`RequestError` naming the field
and its bound (OpenAI's 400), raised before any compute."""

from __future__ import annotations

from dateeval.backends.base import GenerationSettings
from dateeval.backends.openai_transport import MAX_API_STOPS
from dateeval.data.limits import MAX_STOP_CHARS

MAX_LOGPROBS = 20  # the most alternatives a request may ask for (vLLM's default, OpenAI's chat limit)


class RequestError(Exception):
    """A request the server refuses: answered with ``status`` and an OpenAI-style error body."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise RequestError(400, f"{name} must be a number between {low} and {high}")
    return value


def stops(body: dict) -> tuple[str, ...]:
    """At most OpenAI's four stop strings, each short: their preprocessing runs before any forward pass, where a hang-up cannot stop it."""
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else stop
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
        raise RequestError(400, "stop must be a string or a list of strings")
    if len(stop) > MAX_API_STOPS:
        raise RequestError(
            400,
            f"stop holds {len(stop):,} strings: this server takes at most {MAX_API_STOPS} stop strings, as OpenAI does",
        )
    if not all(0 < len(s) <= MAX_STOP_CHARS for s in stop):
        raise RequestError(400, f"each stop string must be non-empty and at most {MAX_STOP_CHARS} characters")
    return tuple(stop)


def settings(body: dict, max_tokens: int) -> GenerationSettings:
    """Greedy at temperature 0; otherwise the model's own sampling settings with the request's seed.

    Read for every request, scored ones included: a value this server would refuse for a generation is refused everywhere.
    """
    temperature = number(body, "temperature", 1.0, 0.0, 2.0)
    seed = int(number(body, "seed", 0, 0, 2**63 - 1))
    return GenerationSettings(max_new_tokens=max_tokens, stop=stops(body), sample=temperature > 0, seed=seed)


def check_supported(body: dict) -> None:
    """Refuse what this server does not do, rather than answer something else (an empty stream, one choice of two)."""
    if body.get("stream"):
        raise RequestError(400, "stream is not supported: this server answers each request whole (stream=false)")
    for name in ("n", "best_of"):
        if body.get(name) not in (None, 1) or isinstance(body.get(name), bool):
            raise RequestError(400, f"{name} must be 1: this server returns one choice per request")


def max_tokens(body: dict, *names: str) -> int:
    value = next((body[name] for name in names if body.get(name) is not None), 16)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RequestError(400, f"{names[0]} must be a whole number of at least 1")
    return value


def top_k(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_LOGPROBS:
        raise RequestError(400, f"logprobs must be a whole number between 0 and {MAX_LOGPROBS}")
    return value


def messages(body: dict) -> list[dict]:
    messages = body.get("messages")
    valid = (
        isinstance(messages, list)
        and messages
        and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages
        )
    )
    if not valid:
        raise RequestError(400, "messages must be a non-empty list of {role, content} objects with text content")
    return [{"role": m["role"], "content": m["content"]} for m in messages]
