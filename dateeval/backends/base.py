"""The backend interface: the requests it answers, what a backend declares, and the registry.

Tasks build requests and grade answers; backends answer requests; nothing
else crosses (as lm-evaluation-harness's ``loglikelihood``/``generate_until``
and Inspect's ``ModelAPI``). The requests, their answers and
:class:`Capabilities` live in :mod:`dateeval.requests`, below both tasks and
backends (re-exported here); ``dateeval/engine/answers.py`` hands a task's requests
to a backend. Adding a backend is one module with a class decorated by
:func:`register_backend` plus its import in ``dateeval/backends/__init__.py``.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from dateeval.errors import DateEvalError
from dateeval.prompting import ChatTemplate
from dateeval.requests import (  # the requests and capabilities, re-exported here: the backend interface speaks them
    CONTINUATION_LOGPROBS as CONTINUATION_LOGPROBS,
    GENERATE as GENERATE,
    LABEL_LOGPROBS as LABEL_LOGPROBS,
    Capabilities as Capabilities,
    ContinuationRequest as ContinuationRequest,
    Generation as Generation,
    GenerationRequest as GenerationRequest,
    GenerationSettings as GenerationSettings,
    Label as Label,
    LabelRequest as LabelRequest,
    LabelScores as LabelScores,
    PromptInput as PromptInput,
    Usage as Usage,
)


def continuation_tokens(
    encode: Callable[[list[str]], list[list[int]]], request: ContinuationRequest
) -> tuple[list[int], int]:
    """The tokens of context + continuation and the index of the first that belongs to the continuation.

    The split is where tokenising the whole text departs from tokenising the
    context alone, so it follows the model's own tokenisation of the whole
    (a space before a number joins the number's token); the first token is never scored (nothing precedes it).
    """
    head, whole = encode([request.context, request.context + request.continuation])
    first = next((i for i, (a, b) in enumerate(zip(head, whole)) if a != b), min(len(head), len(whole)))
    return whole, max(first, 1)


class FixedBatch(int):
    """A batch size the condition fixes (the paper's batch-size factor, Table 5): exactly this many prompts per forward.

    A plain ``int`` batch size is the *most* prompts a forward may hold: a
    backend may cut batches shorter to spare padding, and generation batches
    continuously. A ``FixedBatch`` runs the way the paper's batch sizes ran,
    fixed chunks of prompts sorted by length and padded to the longest
    (static batches in generation), so that ``--batch-sizes`` measures what
    the paper measured; only memory may split a batch. An ``int`` subclass,
    so every backend signature keeps ``batch_size: int`` and a backend that
    does not batch (an API) needs no change.
    """


@dataclass(frozen=True)
class ModelIdentity:
    """What produced a result: recorded with every stored row and hashed into its key."""

    model: str
    source: str
    revision: str | None
    dtype: str
    device: str
    hardware: str
    backend: str = "transformers"
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        # Library versions and the exact hardware model are recorded, not keyed: keying them would discard a
        # whole store on every upgrade. The backend is keyed except for transformers (the first one), so
        # stores written before backends existed keep their keys.
        keyed = {k: v for k, v in asdict(self).items() if k not in ("hardware", "versions", "backend")}
        if self.backend != "transformers":
            keyed["backend"] = self.backend
        return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class BackendOptions:
    """Everything the user can set about how a model runs; each backend reads what applies to it."""

    dtype: str = "auto"
    device: str = "auto"
    trust_remote_code: bool = False
    api_key_env: str | None = None  # the *name* of the environment variable holding an API key
    concurrency: int = 8
    timeout_s: float = 120.0
    retries: int = 5
    mode: str = "completions"  # HTTP: completions (our template) | chat (server's template) | server-clock
    tokenizer: str | None = None  # HTTP completions: where the model's tokenizer and chat template come from


class Backend(ABC):
    """A model that answers requests. Subclasses set ``name`` and implement the requests they declare."""

    name: ClassVar[str]
    identity: ModelIdentity
    capabilities: Capabilities
    template: ChatTemplate | None  # the model's chat template, where dateeval renders prompts itself
    tokenizer: Any = None  # a Hugging Face tokenizer, where the backend has one (label tokens, prompt lengths)
    context_length: int | None = None

    @classmethod
    @abstractmethod
    def locate(cls, spec: str) -> Any:
        """Check ``spec`` (the part of ``--model`` after ``name:``) without loading anything: errors come first."""

    @classmethod
    @abstractmethod
    def open(cls, located: Any, options: BackendOptions) -> Backend:
        """Load or connect: the expensive step, once per sweep."""

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Token ids of rendered prompts (prompt lengths and context checks); needs a tokenizer."""
        if self.tokenizer is None:
            raise DateEvalError(f"backend {self.name} has no tokenizer to count prompt tokens with")
        return [self.tokenizer.encode(text, add_special_tokens=False) for text in texts]

    def label_logprobs(self, requests: list[LabelRequest], batch_size: int) -> list[LabelScores]:
        """Per request, each label's log-probability under the full next-token distribution (NaN where unknown), with
        what a server reported about it (:class:`Usage`; none in this process)."""
        raise self._unsupported(LABEL_LOGPROBS)

    def generate(self, requests: list[GenerationRequest], batch_size: int) -> list[Generation]:
        raise self._unsupported(GENERATE)

    def generate_units(self, units: list[list[GenerationRequest]], batch_size: int) -> list[list[Generation]]:
        """Several units' requests (one date each, say) answered together, so that one unit's last long replies decode
        beside the next unit's first ones instead of alone. Each reply must equal what :meth:`generate` gives its unit
        alone (greedy, or sampling seeded per request). By default one
        :meth:`generate` call over all of them; a backend that shares each unit's prompt prefix keeps units apart."""
        replies = iter(self.generate([request for unit in units for request in unit], batch_size))
        return [[next(replies) for _ in unit] for unit in units]

    def continuation_logprobs(self, requests: list[ContinuationRequest], batch_size: int) -> list[float]:
        raise self._unsupported(CONTINUATION_LOGPROBS)

    def supports(self, request: str) -> bool:
        return request in self.capabilities.requests

    def close(self) -> None:
        """Release engines, connections and worker processes."""

    def _unsupported(self, request: str) -> DateEvalError:
        return DateEvalError(f"backend {self.name} cannot answer {request} requests")


BACKENDS: dict[str, type[Backend]] = {}
DEFAULT_BACKEND = "transformers"


def register_backend(name: str) -> Callable[[type[Backend]], type[Backend]]:
    """Class decorator: ``@register_backend("vllm")`` makes ``--model vllm:PATH`` and ``--backend vllm`` work."""

    def register(cls: type[Backend]) -> type[Backend]:
        cls.name = name
        BACKENDS[name] = cls
        return cls

    return register


def split_model(model: str, backend: str | None = None) -> tuple[str, str]:
    """``vllm:PATH`` → (vllm, PATH); a plain model goes to ``backend`` (default transformers)."""
    prefix, _, rest = model.partition(":")
    if rest and prefix in BACKENDS:
        if backend is not None and backend != prefix:
            raise DateEvalError(f"model {model!r} names backend {prefix}, but --backend says {backend}")
        return prefix, rest
    name = backend or DEFAULT_BACKEND
    if name not in BACKENDS:
        raise DateEvalError(f"unknown backend {name!r}: choose one of {', '.join(sorted(BACKENDS))}")
    return name, model


def locate(model: str, backend: str | None = None) -> tuple[type[Backend], Any]:
    """Resolve ``--model`` (and ``--backend``) to a backend class and its checked spec, loading nothing."""
    name, spec = split_model(model, backend)
    cls = BACKENDS[name]
    return cls, cls.locate(spec)
