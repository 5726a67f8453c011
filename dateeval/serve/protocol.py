"""The OpenAI protocol of ``dateeval serve``: what a request may ask, what it is answered, the model behind it.

Requests are checked and refused here (400 with the limit named, before any
compute), then submitted to the model's scheduler (``Served.submit``), and
their answers laid out as OpenAI's. Nothing here batches or touches the
model: the scheduler (``backends.scheduler``) plans, the backend computes.
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from dateeval.backends.transformers import TransformersBackend
from dateeval.errors import DateEvalError
from dateeval.prompting import ChatTemplate
from dateeval.serve import fields
from dateeval.serve.fields import RequestError
from dateeval.serve.queue import BATCH_TOKENS, MAX_ECHO_POSITIONS, Busy, Job, RequestQueue

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from dateeval.backends.transformers.top import TopTokens

WAIT_S = 60.0  # how long a request may wait for the model before it is answered 503 (clients retry those)
UNSTATED_CONTEXT = BATCH_TOKENS  # prompt plus reply, in tokens, for a model whose config states no context length


class Caller(Protocol):
    """Who sent a request (``transport.Client``): whether they are still waiting, and their connection."""

    connection: object

    def gone(self) -> bool: ...


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
            raise RequestError(
                503,
                f"the server is busy: this request waited {self.wait_s:g} s for the model; retry later",
                "server_busy",
            ) from None

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
        tokens: such a prompt is refused without tokenising it (tokenising megabytes of text would hold the server for
        seconds).
        """
        return max(
            len(token)
            for token in self.backend.tokenizer.convert_ids_to_tokens(list(range(len(self.backend.tokenizer))))
            if token
        )


def _top(tokenizer: PreTrainedTokenizerBase, best: TopTokens) -> dict[str, float]:
    """The most likely tokens as text; a text two tokens share keeps the likelier."""
    named: dict[str, float] = {}
    for token, value in zip(best.tokens, best.values):
        named.setdefault(tokenizer.decode([token]), value)
    return named


def top_logprobs(served: Served, client: Caller, prompt: list[int], k: int) -> dict[str, float]:
    """The ``k`` most likely next tokens (as text) with their full-vocabulary log-probabilities."""
    return _top(
        served.backend.tokenizer,
        served.submit(Job("top", None, len(prompt), prompt, client.gone, client.connection, k=k)),
    )


@dataclass(frozen=True)
class Echo:
    """A prompt scored token by token: what ``echo`` returns in the OpenAI ``logprobs`` layout."""

    tokens: list[str]
    token_logprobs: list[float | None]  # each token's log-probability given those before it; the first has none
    top_logprobs: list[dict[str, float] | None]
    next_top: dict[str, float]  # the token after the prompt: its ``k`` most likely values


def score_prompt(served: Served, client: Caller, prompt: list[int], k: int) -> Echo:
    """Every token's log-probability after the ones before it, and the next token's top-k (one row of a batch's forward pass)."""
    tokenizer = served.backend.tokenizer
    scores = served.submit(Job("echo", None, len(prompt), prompt, client.gone, client.connection, k=k))
    tops = [None] + [
        {tokenizer.decode([token]): value, **_top(tokenizer, best)}
        for token, value, best in zip(prompt[1:], scores.chosen, scores.positions)
    ]
    return Echo(
        [tokenizer.decode([token]) for token in prompt],
        [None, *scores.chosen],
        tops,
        _top(tokenizer, scores.following),
    )


def _usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _envelope(kind: str, served: Served, choice: dict, usage: dict) -> dict:
    return {
        "id": f"{kind}-{uuid.uuid4().hex[:16]}",
        "object": kind,
        "created": int(time.time()),
        "model": served.name,
        "choices": [choice],
        "usage": usage,
    }


def _finish(completion_tokens: int, body: dict, *names: str) -> str:
    """``length`` when the reply used its whole budget, else ``stop`` (end of sequence or a stop string)."""
    return "length" if completion_tokens >= fields.max_tokens(body, *names) else "stop"


def _check_model(served: Served, body: dict) -> None:
    if body.get("model") != served.name:
        raise RequestError(404, f"The model `{body.get('model')}` does not exist: this server serves `{served.name}`")


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


def _generate_or_score(
    served: Served, client: Caller, prompt: str, body: dict, max_tokens: int, k: int | None
) -> tuple[str, int, int, dict | None]:
    """(text, prompt tokens, completion tokens, first token's alternatives): one token scored, or a decoded reply."""
    if k is not None and max_tokens != 1:
        raise RequestError(400, "this server returns logprobs for max_tokens=1 only")
    settings = fields.settings(body, max_tokens)
    encoded = _encode(served, prompt, max_tokens)
    if k is not None:
        best = top_logprobs(served, client, encoded, max(k, 1))
        text = next(iter(best))
        return text, len(encoded), 1, dict(list(best.items())[: max(k, 1)])
    # Sampled replies depend on the batch they are drawn in (one seed per batch): each is drawn alone, as one request at a time would.
    reply = served.submit(
        Job(
            "generate",
            settings,
            len(encoded) + max_tokens,
            prompt,
            client.gone,
            client.connection,
            shares=not settings.sample,
        )
    )
    return reply.text, reply.prompt_tokens, reply.n_tokens, None


def _prompt(served: Served, body: dict) -> str | list[int]:
    """One prompt: text, or token ids (``[1, 2]`` or ``[[1, 2]]``) of this server's vocabulary."""
    prompt = body.get("prompt")
    prompt = (
        prompt[0] if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)) else prompt
    )
    if isinstance(prompt, str) and prompt:
        return prompt
    size = len(served.backend.tokenizer)
    if (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < size for t in prompt)
    ):
        return prompt
    raise RequestError(400, f"prompt must be one non-empty string or one non-empty list of token ids below {size}")


def _echo(
    served: Served, client: Caller, prompt: str | list[int], body: dict, k: int | None
) -> tuple[str, dict, int, int]:
    """``echo``: the prompt's tokens with their log-probabilities (and, with ``max_tokens=1``, the greedy next token)."""
    max_tokens = body.get("max_tokens")
    if k is None or max_tokens not in (0, 1) or isinstance(max_tokens, bool):
        raise RequestError(400, "this server echoes the prompt with logprobs and max_tokens 0 or 1 only")
    fields.settings(body, 1)
    ids = _encode(served, prompt, max_tokens) if isinstance(prompt, str) else prompt
    _check_context(served, len(ids), max_tokens)
    if len(ids) > MAX_ECHO_POSITIONS:
        raise RequestError(
            400,
            f"echo scores at most {MAX_ECHO_POSITIONS:,} tokens, and this prompt has {len(ids):,}: score it in parts",
            "echo_too_long",
        )
    scored = score_prompt(served, client, ids, k)
    tokens, values, tops = scored.tokens, scored.token_logprobs, scored.top_logprobs
    if max_tokens == 1:
        token, value = next(iter(scored.next_top.items()))
        tokens, values, tops = [*tokens, token], [*values, value], [*tops, dict(list(scored.next_top.items())[:k])]
    offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
    logprobs = {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}
    return "".join(tokens), logprobs, len(ids), max_tokens


def completions(served: Served, body: dict, client: Caller) -> dict:
    """``/v1/completions``: the prompt is text (or token ids) the client rendered; ``logprobs=k`` scores the next token."""
    _check_model(served, body)
    fields.check_supported(body)
    prompt = _prompt(served, body)
    k = None if body.get("logprobs") is None else fields.top_k(body["logprobs"])
    if body.get("echo"):
        text, logprobs, prompt_tokens, completion_tokens = _echo(served, client, prompt, body, k)
        choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length"}
        return _envelope("text_completion", served, choice, _usage(prompt_tokens, completion_tokens))
    if not isinstance(prompt, str):
        raise RequestError(400, "this server takes token-id prompts with echo only")
    text, prompt_tokens, completion_tokens, best = _generate_or_score(
        served, client, prompt, body, fields.max_tokens(body, "max_tokens"), k
    )
    logprobs = None
    if best is not None:
        logprobs = {
            "tokens": [text],
            "token_logprobs": [best[text]],
            "top_logprobs": [best],
            "text_offset": [len(prompt)],
        }
    choice = {
        "index": 0,
        "text": text,
        "logprobs": logprobs,
        "finish_reason": _finish(completion_tokens, body, "max_tokens"),
    }
    return _envelope("text_completion", served, choice, _usage(prompt_tokens, completion_tokens))


def chat_completions(served: Served, body: dict, client: Caller) -> dict:
    """``/v1/chat/completions``: the server's own template, rendered as a provider would (the real clock, today)."""
    _check_model(served, body)
    fields.check_supported(body)
    try:
        prompt = served.template.render(fields.messages(body), mode="default").text
    except DateEvalError as error:
        raise RequestError(400, str(error)) from None
    k = fields.top_k(body.get("top_logprobs") or 0) if body.get("logprobs") else None
    max_tokens = fields.max_tokens(body, "max_completion_tokens", "max_tokens")
    text, prompt_tokens, completion_tokens, best = _generate_or_score(served, client, prompt, body, max_tokens, k)
    logprobs = None
    if best is not None:
        entries = [{"token": token, "logprob": value, "bytes": list(token.encode())} for token, value in best.items()]
        logprobs = {"content": [{**entries[0], "top_logprobs": entries[: k or 0]}]}
    finish = _finish(completion_tokens, body, "max_completion_tokens", "max_tokens")
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "logprobs": logprobs,
        "finish_reason": finish,
    }
    return _envelope("chat.completion", served, choice, _usage(prompt_tokens, completion_tokens))


ROUTES = {"/v1/completions": completions, "/v1/chat/completions": chat_completions}


def load(model: str, *, name: str | None, chat_template: str | None, dtype: str, device: str) -> Served:
    """Load the model (and the template it should apply, if not its own)."""
    from dateeval.models import resolve

    backend = TransformersBackend(resolve(model), dtype=dtype, device=device)
    template = backend.template
    if chat_template:
        template = ChatTemplate.from_file(chat_template, bos_token=template.bos_token, eos_token=template.eos_token)
    return Served(backend, name or model, template, threading.Lock())
