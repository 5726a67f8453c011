"""OpenAI-compatible HTTP endpoints (vLLM, SGLang, llama.cpp, OpenAI, OpenRouter...): ``--model openai:URL#MODEL``.

How much of the date a study controls depends on who renders the chat template, so the mode is explicit:

* ``completions``: dateeval renders the model's template locally and sends
  text to ``/completions``: full date control for every template kind, label
  probabilities from the next token's top-k ``logprobs``. A label outside the
  top-k, and a continuation (a GSM8K answer's confidence), are scored exactly
  by asking the server to *echo* the prompt's tokens with their
  log-probabilities (``echo=True, max_tokens=0``, token ids in, as
  lm-evaluation-harness does): vLLM and ``dateeval serve`` do. Whether the
  server echoes is asked once, when the backend opens; one that refuses
  leaves chain-of-thought and GSM8K answers without a confidence (NaN, the
  reason stored with each row in ``confidence_note``) and ends a next-token
  MCQA run whose label is outside the top-k with one clear error.
* ``chat``: the server applies its own template to the messages; only the
  system line dateeval injects (or leaves out) is ours.
* ``server-clock``: nothing dated is sent; the provider injects its own date
  (paper §5.2). Every row records when it was asked (``request_utc``) and the
  server's HTTP ``Date`` header, so daily runs build a longitudinal series.

Requests run concurrently (bounded), are retried with exponential backoff and
jitter on 408/409/429/5xx, timeouts and dropped connections (``openai_transport``), and every answer
is checked field by field: a malformed one ends the unit with one clear
error before anything is stored. The API key is read from the environment
variable the user names; it is never stored, logged or shown in an error.
"""

from __future__ import annotations

import datetime as dt
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from dateeval.backends.base import (
    CONTINUATION_LOGPROBS,
    GENERATE,
    LABEL_LOGPROBS,
    Backend,
    BackendOptions,
    Capabilities,
    ContinuationRequest,
    Generation,
    GenerationRequest,
    Label,
    LabelRequest,
    LabelScores,
    ModelIdentity,
    continuation_tokens,
    register_backend,
)
from dateeval.backends.openai_transport import TOP_K, Answer, Endpoint, Refused, Transport, parse_endpoint
from dateeval.errors import DateEvalError
from dateeval.prompting import ChatTemplate

# The API modes, each with who renders the chat template and whose date the model reads (the CLI, Run and Prompt pages show these).
MODES = {
    "completions": "completions: dateeval renders the template and sends text (also in this process, and vLLM offline)",
    "chat": "chat: the messages, with our date line; the server applies its template",
    "server-clock": "server-clock: the messages, no date of ours (an empty system prompt, as in the paper's §5.2); the provider's own date",
}
_DATE_CONTROL = {"completions": "full", "chat": "system-line", "server-clock": "server-clock"}
PROBE_TEXT = "The date today is"  # what the echo check asks the server to score when the backend opens


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


def _echoed(body: Any, prompt: list[int]) -> list[float]:
    """The log-probability of each prompt token after those before it (from the second on), as the server echoed them.

    The server must echo exactly the tokens it was sent: one that added a BOS
    token or re-tokenised would shift every position, and a shifted reading is a wrong number, so it is refused.
    """
    values = _field(body, "choices", 0, "logprobs", "token_logprobs")
    if not isinstance(values, list) or len(values) != len(prompt):
        got = len(values) if isinstance(values, list) else "no"
        raise MalformedAnswer(f"echo returned {got} prompt log-probabilities for a prompt of {len(prompt)} tokens")
    return [_logprob(value, f"prompt token {i}") for i, value in enumerate(values[1:], start=1)]


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
            raise DateEvalError(
                "concurrency must be at least 1, retries at least 0 and the request timeout above 0 seconds"
            )
        self.endpoint, self.mode, self.options = endpoint, options.mode, options
        self.chat = options.mode != "completions"
        self._warned_labels = False
        self.template, self.tokenizer = None, None
        if not self.chat:
            self.tokenizer, self.template = self._completions_template(options.tokenizer or endpoint.model)
        self.transport = Transport(endpoint, options)
        self.capabilities = Capabilities(
            frozenset({LABEL_LOGPROBS, GENERATE}),
            renders_locally=not self.chat,
            deterministic=False,
            date_control=_DATE_CONTROL[self.mode],
            exact_labels=False,
        )
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
        if not self.chat:
            self.capabilities = self._echo_capabilities()

    def _echo_capabilities(self) -> Capabilities:
        """Completions mode: exact labels and continuations where the server echoes prompt log-probabilities, else a stated reason."""
        refusal = self._echo_refusal()
        if refusal is None:
            return replace(
                self.capabilities, requests=self.capabilities.requests | {CONTINUATION_LOGPROBS}, exact_labels=True
            )
        note = (
            f"{self.endpoint.url} does not return prompt log-probabilities (echo: {refusal}), so a label outside its top {TOP_K} "
            "next tokens and a continuation cannot be scored"
        )
        return replace(self.capabilities, scoring_note=note)

    def _echo_refusal(self) -> str | None:
        """One small echo request: None when the server scores the prompt's own tokens, else why not (other failures end the run)."""
        prompt = self.encode([PROBE_TEXT])[0]
        try:
            _echoed(self.transport.echo([prompt])[0].body, prompt)
        except Refused as error:
            return error.reason
        except MalformedAnswer as error:
            return str(error)
        return None

    @staticmethod
    def _completions_template(name: str) -> tuple[Any, ChatTemplate]:
        try:
            return _local_template(name)
        except DateEvalError as error:
            raise DateEvalError(
                f"completions mode renders prompts locally and needs the model's tokenizer and chat template ({error}): "
                "give --tokenizer NAME_OR_FOLDER, or use --api-mode chat"
            ) from None

    # Requests

    def label_logprobs(self, requests: list[LabelRequest], batch_size: int) -> list[LabelScores]:
        """One max_tokens=1 request per prompt reads the labels among the top-k alternatives; an echo request scores each other one."""
        self._warn_bare_labels(requests)
        answers = self.transport.all([lambda r=r: self.transport.score(r.prompt, self.chat) for r in requests])
        tops = [self._checked(lambda answer=answer: _alternatives(answer.body, self.chat)) for answer in answers]
        scores = [
            np.array([best.get(label.text, np.nan) for label in r.labels], dtype=np.float64)
            for r, best in zip(requests, tops)
        ]
        missing = [(i, j) for i, score in enumerate(scores) for j in np.flatnonzero(np.isnan(score))]
        if missing and not self.capabilities.exact_labels:
            i, j = missing[0]
            raise self._unreadable(tops[i], requests[i].labels[j])
        prompts = {i: self.encode([requests[i].prompt])[0] for i in {i for i, _ in missing}}
        exact = self._echo_all([[*prompts[i], requests[i].labels[j].token_id] for i, j in missing])
        for (i, j), values in zip(missing, exact):
            scores[i][j] = values[-1]
        return [LabelScores(score, answer.usage) for score, answer in zip(scores, answers)]

    def continuation_logprobs(self, requests: list[ContinuationRequest], batch_size: int) -> list[float]:
        """Each continuation's total log-probability, read from the server's echo of context + continuation as token ids."""
        if CONTINUATION_LOGPROBS not in self.capabilities.requests:
            raise self._unsupported(CONTINUATION_LOGPROBS)
        splits = [continuation_tokens(self.encode, request) for request in requests]
        echoed = self._echo_all([whole for whole, _ in splits])
        return [float(sum(values[first - 1 :])) for (_, first), values in zip(splits, echoed)]

    def generate(self, requests: list[GenerationRequest], batch_size: int) -> list[Generation]:
        answers = self.transport.all([lambda r=r: self.transport.generate(r, self.chat) for r in requests])
        return [self._generation(request, answer) for request, answer in zip(requests, answers)]

    def _warn_bare_labels(self, requests: list[LabelRequest]) -> None:
        """Say once, loudly, that a chat endpoint reads other label tokens than this model does in-process.

        Without a tokenizer, ``--label-style auto`` reads the bare "A" (what a
        reply starts with); in this process and in completions mode it reads
        " A" wherever that is one token. The same model then scores
        differently (0.25 against 0.45 was seen) for a reason that is not the
        date, so the run says so when it starts scoring; each row keeps the
        style in ``label_variant``.
        """
        bare = sorted(
            {label.text for request in requests for label in request.labels if label.text == label.text.lstrip()}
        )
        if not self.chat or not bare or self._warned_labels:
            return
        self._warned_labels = True
        print(
            f"dateeval: warning: {self.mode} mode reads the option labels as the bare letters ({', '.join(map(repr, bare))}: a reply's "
            "first token), where in-process and completions runs with --label-style auto read ' A' wherever that is one token; "
            "scores differ between the two for that reason alone, so compare this run only with runs of label_variant 'label' "
            "(--label-style label)",
            file=sys.stderr,
            flush=True,
        )

    def server_now(self) -> dt.datetime | None:
        """The server's clock, from the HTTP ``Date`` header of one ``GET /models``; None without one."""
        stamp = self.transport.server_clock()
        return dt.datetime.fromisoformat(stamp) if stamp else None

    def close(self) -> None:
        self.transport.close()

    def _unreadable(self, best: dict[str, float], label: Label) -> DateEvalError:
        """A label outside the top-k, on a server that cannot score it otherwise: one clear error rather than a guessed row."""
        seen = ", ".join(repr(token) for token in list(best)[:8])
        bare = (
            "--label-style label (the bare letters are among them), "
            if label.text != label.text.strip() and label.text.strip() in best
            else ""
        )
        why = "a chat endpoint scores no given token" if self.chat else self.capabilities.scoring_note
        return DateEvalError(
            f"{self.endpoint.model}: option label {label.text!r} is not among the {len(best)} most likely next tokens the server "
            f"returns (top: {seen}), and {why}; use {bare}the dataset's _cot variant, "
            "or a server that echoes prompt log-probabilities (vLLM, dateeval serve) in completions mode"
        )

    def _generation(self, request: GenerationRequest, answer: Answer) -> Generation:
        path = ("choices", 0, "message", "content") if self.chat else ("choices", 0, "text")
        text = self._checked(lambda: _text(_field(answer.body, *path), "the reply"))
        cuts = [text.index(stop) for stop in request.settings.stop if stop in text]
        text = text[: min(cuts)] if cuts else text
        usage = answer.usage
        return Generation(text, usage.api_completion_tokens or 0, usage.api_prompt_tokens, usage=usage)

    def _checked(self, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except MalformedAnswer as error:
            raise DateEvalError(f"{self.endpoint.url} sent a malformed answer ({error})") from None

    def _echo_all(self, prompts: list[list[int]]) -> list[list[float]]:
        """Per token-id prompt, the log-probability of each of its tokens after the ones before it (from the second on)."""
        answers = self.transport.echo(prompts)
        return [
            self._checked(lambda answer=answer, prompt=prompt: _echoed(answer.body, prompt))
            for answer, prompt in zip(answers, prompts)
        ]
