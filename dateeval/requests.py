"""What a task may ask of a model, and what it gets back: the one vocabulary tasks and backends share.

Tasks build requests and grade answers; backends answer requests; nothing
else crosses (as lm-evaluation-harness's ``Instance`` requests and its
``LM``). This module sits below both, so a task never imports a backend.
Three request kinds exist:

* :class:`LabelRequest`: next-token log-probabilities of given option labels
  (MCQA, and a chain-of-thought answer's confidence), answered as :class:`LabelScores`;
* :class:`GenerationRequest`: a decoded reply, greedy or seeded sampling, cut
  at stop strings, answered as a :class:`Generation`;
* :class:`ContinuationRequest`: the total log-probability of a given
  continuation (a GSM8K answer's confidence), answered as a float.

A task states its work as :data:`Steps`: a generator that yields one batch
of requests of one kind at a time, receives their answers (``send``), and
returns the rows. Multi-round tasks (generate, then score the answer's
confidence) are one generator; ``dateeval/engine/answers.py`` runs it on a backend.
What a task may know about the model answering it is a :class:`ModelView`
(capabilities, and the tokenizer as :class:`Tokens`), never the backend.

A prompt is either text that dateeval's own templating rendered (every
template kind keeps full date control) or the chat messages themselves (the
*server* applies its own template: only the system line is ours).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

LABEL_LOGPROBS, GENERATE, CONTINUATION_LOGPROBS = "label_logprobs", "generate", "continuation_logprobs"
Messages = tuple[dict, ...]
PromptInput = str | Messages  # rendered text, or chat messages for a server that applies its own template


@dataclass(frozen=True)
class GenerationSettings:
    """Decoding for open-ended tasks: greedy by default; sampling uses the model's own temperature/top-p and a fixed seed (App. C.2)."""

    max_new_tokens: int = 256
    stop: tuple[str, ...] = ()
    sample: bool = False
    seed: int = 0


@dataclass(frozen=True)
class Usage:
    """What a server reported about one request, stored with its row (as Inspect's ``ModelUsage`` travels on its
    output): when it was asked (UTC, ISO), the server's ``Date`` header, and the tokens it billed (None where it reports
    none). An answer computed in this process has none of it."""

    request_utc: str | None = None
    server_date: str | None = None
    api_prompt_tokens: int | None = None
    api_completion_tokens: int | None = None

    def columns(self) -> dict[str, Any]:
        """The row's columns: none for an answer computed in this process, so its rows are as they were."""
        return {} if self == NO_USAGE else asdict(self)


NO_USAGE = Usage()


@dataclass(frozen=True)
class Generation:
    """One generated reply: the text (cut at the first stop sequence), tokens generated, the prompt's length, usage."""

    text: str
    n_tokens: int
    prompt_tokens: int
    usage: Usage = NO_USAGE


@dataclass(frozen=True)
class Label:
    """An option label as the model writes it (``" A"``) and, where the backend tokenizes, its single token."""

    text: str
    token_id: int | None = None


@dataclass(frozen=True)
class LabelRequest:
    prompt: PromptInput
    labels: tuple[Label, ...]


@dataclass(frozen=True)
class GenerationRequest:
    prompt: PromptInput
    settings: GenerationSettings


@dataclass(frozen=True)
class ContinuationRequest:
    context: str
    continuation: str


@dataclass(frozen=True)
class LabelScores:
    """The answer to a :class:`LabelRequest`: each label's log-probability (NaN where unknown) and what a server reported."""

    logprobs: np.ndarray
    usage: Usage = NO_USAGE


Request = LabelRequest | GenerationRequest | ContinuationRequest
Steps = Generator[
    list[Request], list[Any], list[dict]
]  # yields a batch of one kind, is sent its answers, returns the rows


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do: the requests it answers, who renders the chat template, whether results repeat."""

    requests: frozenset[str]
    renders_locally: bool = True  # dateeval renders the template and sends text (else: the server applies its own)
    deterministic: bool = True
    date_control: str = "full"  # full | system-line (chat endpoints) | server-clock (the provider sets the date)
    exact_labels: bool = (
        True  # any label's log-probability can be read, not only those among a server's top-k alternatives
    )
    scoring_note: str | None = (
        None  # why this backend's server scores less than its kind could: stored with rows that lack a confidence
    )


@dataclass(frozen=True)
class Needs:
    """What a task cannot run without, declared so that the request loop (``engine/answers.py``) refuses a backend
    before any item (``refusal``: the one line it says, with ``{backend}`` for the backend's name)."""

    requests: frozenset[str]
    refusal: str
    renders_locally: bool = False  # the task continues the rendered prompt text itself

    def met_by(self, capabilities: Capabilities) -> bool:
        return self.requests <= capabilities.requests and (capabilities.renders_locally or not self.renders_locally)


class Tokens(Protocol):
    """The model's tokenizer as far as a task uses it (a Hugging Face tokenizer is one): label token ids, prompt lengths."""

    name_or_path: str

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...


@dataclass(frozen=True)
class ModelView:
    """What a task may know about the model answering its requests: what it can do, and its tokenizer where it has one."""

    capabilities: Capabilities
    tokens: Tokens | None = None

    def can(self, request: str) -> bool:
        return request in self.capabilities.requests

    def prompt_lengths(self, inputs: list[PromptInput]) -> list[int | None]:
        """Prompt lengths in tokens where the model tokenizes the text it is sent (None for a server's own template)."""
        if self.tokens is None or not all(isinstance(prompt, str) for prompt in inputs):
            return [None] * len(inputs)
        return [len(self.tokens.encode(text, add_special_tokens=False)) for text in inputs]
