"""The transformers backend: load a model once, score next-token distributions fast.

Speed matters because a sweep is hundreds of dates times thousands of items.
Within one date every prompt starts with the same tokens (chat header,
system message, the date), so that shared prefix runs once and its KV cache
is reused by every batch; the item-specific suffixes run batched, sorted by
length to keep padding small, and only the positions whose logits are read
go through the output layer.
"""

from __future__ import annotations

import copy
import inspect
import os
import platform
from collections.abc import Callable
from itertools import groupby

import numpy as np

from dateeval.backends.base import (
    CONTINUATION_LOGPROBS, GENERATE, LABEL_LOGPROBS, Backend, BackendOptions, Capabilities, ContinuationRequest, Generation,
    GenerationRequest, GenerationSettings, LabelRequest, ModelIdentity, continuation_tokens, register_backend,
)  # fmt: skip
from dateeval.errors import DateEvalError
from dateeval.models import ModelSource, converted_gguf_dir, resolve
from dateeval.prompting import ChatTemplate

DTYPES = ("auto", "bfloat16", "float16", "float32")
DEVICES = ("auto", "cuda", "mps", "cpu")
LOGITS_BUDGET = 1 << 30  # bytes of float32 logits one continuation-scoring forward may hold (batches are split to fit)


def _pick_device(device: str) -> str:
    import torch

    if device not in DEVICES:
        raise DateEvalError(f"unknown device {device!r}: choose one of {', '.join(DEVICES)}")
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if torch.backends.mps.is_available() else "cpu"
    available = {"cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available(), "cpu": True}
    if not available[device]:
        raise DateEvalError(f"device {device} is not available on this machine")
    return device


def _pick_dtype(dtype: str, device: str) -> str:
    """``auto``: bfloat16 on a GPU that supports it, float16 on other GPUs, float32 on CPU.

    float32 on CPU because half precision there is emulated on many
    processors and because it is the reference precision of the paper's
    comparison (Table 5); pass ``--dtype bfloat16`` for speed.
    """
    import torch

    if dtype not in DTYPES:
        raise DateEvalError(f"unknown dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    if dtype != "auto":
        return dtype
    if device == "cuda":
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    return "float16" if device == "mps" else "float32"


def _hardware(device: str) -> str:
    import torch

    if device == "cuda":
        return torch.cuda.get_device_name()
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def _cut_at_stop(text: str, stop: tuple[str, ...]) -> str:
    cuts = [text.index(s) for s in stop if s in text]
    return text[: min(cuts)] if cuts else text


@register_backend("transformers")
class TransformersBackend(Backend):
    """A causal LM and its tokenizer in this process, loaded once per sweep; dateeval renders every prompt."""

    capabilities = Capabilities(frozenset({LABEL_LOGPROBS, GENERATE, CONTINUATION_LOGPROBS}))

    @classmethod
    def locate(cls, spec: str) -> ModelSource:
        return resolve(spec)

    @classmethod
    def open(cls, located: ModelSource, options: BackendOptions) -> TransformersBackend:
        return cls(located, dtype=options.dtype, device=options.device, trust_remote_code=options.trust_remote_code)

    def __init__(self, source: ModelSource, *, dtype: str = "auto", device: str = "auto", trust_remote_code: bool = False) -> None:
        import torch
        import transformers

        self.device = _pick_device(device)
        self.dtype = _pick_dtype(dtype, self.device)
        location, kwargs = source.location, {}
        if source.kind == "gguf":
            location = str(converted_gguf_dir(source))
        elif source.kind == "hub" and source.revision:
            kwargs["revision"] = source.revision
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(location, trust_remote_code=trust_remote_code, **kwargs)
            self.model = transformers.AutoModelForCausalLM.from_pretrained(
                location, dtype=getattr(torch, self.dtype), trust_remote_code=trust_remote_code, **kwargs
            ).to(self.device)
        except (OSError, ValueError) as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise DateEvalError(f"cannot load model {source.name}: {first_line}") from None
        self.model.eval()
        if self.device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            # Deterministic CUDA kernels (App. C.2); cuBLAS needs its workspace setting for that.
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
            torch.use_deterministic_algorithms(True, warn_only=True)
        revision = source.revision or getattr(self.model.config, "_commit_hash", None)
        self.identity = ModelIdentity(
            model=source.name,
            source=f"{source.kind}:{source.location if source.kind == 'hub' else (source.gguf_file or source.name)}",
            revision=revision,
            dtype=self.dtype,
            device=self.device,
            hardware=_hardware(self.device),
            versions={"torch": torch.__version__, "transformers": transformers.__version__},
        )
        self.template = ChatTemplate.from_tokenizer(self.tokenizer, name=source.name)
        # transformers 5.x renamed the forward argument `past_key_values` to `cache`.
        self._cache_argument = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
        self._pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else (self.tokenizer.eos_token_id or 0)

    @property
    def context_length(self) -> int | None:
        """The longest sequence (prompt plus reply) the model was trained on, where its config states it."""
        config = self.model.config
        lengths = (getattr(config, name, None) for name in ("max_position_embeddings", "n_positions", "max_sequence_length"))
        return next((length for length in lengths if isinstance(length, int)), None)

    def label_logprobs(self, requests: list[LabelRequest], batch_size: int) -> list[np.ndarray]:
        return self.next_token_logprobs(self.encode([r.prompt for r in requests]), [[label.token_id for label in r.labels] for r in requests], batch_size)

    def generate(self, requests: list[GenerationRequest], batch_size: int) -> list[Generation]:
        """Requests with the same settings are generated together (a task's requests all share theirs)."""
        replies: list[Generation | None] = [None] * len(requests)
        by_settings = sorted(range(len(requests)), key=lambda i: repr(requests[i].settings))
        for _, group in groupby(by_settings, key=lambda i: repr(requests[i].settings)):
            indices = list(group)
            texts = [requests[i].prompt for i in indices]
            for index, reply in zip(indices, self.generate_texts(texts, requests[indices[0]].settings, batch_size)):
                replies[index] = reply
        return replies  # type: ignore[return-value]

    def continuation_logprobs(self, requests: list[ContinuationRequest], batch_size: int) -> list[float]:
        return self.continuation_texts([r.context for r in requests], [r.continuation for r in requests], batch_size)

    def next_token_logprobs(self, encoded: list[list[int]], token_ids: list[list[int]], batch_size: int = 32) -> list[np.ndarray]:
        """Log-probabilities (over the full vocabulary) of chosen next tokens after each prompt.

        ``token_ids[i]`` are the candidate tokens for prompt ``i`` (its option
        labels). Returns one float64 array per prompt, in input order.
        """
        import torch

        if not encoded:
            return []
        prefix_len = common_prefix_length(encoded)
        results: list[np.ndarray | None] = [None] * len(encoded)
        order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i]), i))
        with torch.inference_mode():
            prefix_cache = self._prefix_cache(encoded[0][:prefix_len])
            for start in range(0, len(order), batch_size):
                chunk = order[start : start + batch_size]
                logprobs = self._score_batch([encoded[i][prefix_len:] for i in chunk], prefix_cache, prefix_len)
                for row, index in enumerate(chunk):
                    results[index] = logprobs[row, token_ids[index]].astype(np.float64)
        return results  # type: ignore[return-value]

    def continuation_texts(self, contexts: list[str], continuations: list[str], batch_size: int = 16) -> list[float]:
        """Total log-probability of each continuation after its context (a generated answer's tokens, say).

        The continuation's tokens are those that tokenising context +
        continuation adds after the context's own tokens, so the split follows
        the model's tokenisation of the whole text. Batched and right-padded.
        Logits are computed at every position but the last (whose prediction is
        never read), as lm-eval's HF model does: the output layer's float32
        sums depend on how many positions it is given, and this way a prompt
        scored alone equals lm-eval's to the last digit (tests/test_lmeval.py).
        Fewer rows go through at once where the logits would exceed
        ``LOGITS_BUDGET`` bytes.
        """
        import torch

        # (tokens of the whole text, index of the first continuation token)
        pairs = [continuation_tokens(self.encode, ContinuationRequest(c, k)) for c, k in zip(contexts, continuations)]
        totals: list[float] = [0.0] * len(pairs)
        order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]), i))
        vocabulary = self.model.get_output_embeddings().weight.shape[0]
        with torch.inference_mode():
            start = 0
            while start < len(order):
                longest = len(pairs[order[min(start + batch_size, len(order)) - 1]][0])
                chunk = order[start : start + max(1, min(batch_size, LOGITS_BUDGET // (4 * vocabulary * longest)))]
                start += len(chunk)
                ids, mask = self._pad([pairs[i][0][:-1] for i in chunk], left=False)
                logprobs = torch.log_softmax(self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits.float(), dim=-1)
                for row, i in enumerate(chunk):
                    tokens, first = pairs[i]
                    positions = torch.arange(first - 1, len(tokens) - 1, device=logprobs.device)
                    totals[i] = float(logprobs[row, positions, torch.tensor(tokens[first:], device=logprobs.device)].double().sum())
        return totals

    def generate_texts(
        self, prompts: list[str], settings: GenerationSettings = GenerationSettings(), batch_size: int = 8,
        should_stop: Callable[[int], bool] | None = None,
    ) -> list[Generation]:  # fmt: skip
        """Batched generation with the KV cache; replies in input order, cut at the first stop sequence.

        Prompts are batched by length with left padding. At a fixed batch
        composition the output is identical run to run (greedy, or sampling
        with the seed reset before every batch). ``should_stop(i)`` (``i`` a
        prompt's index) is asked after every decoding step: True ends prompt
        ``i``'s reply there, cut short, and leaves the other replies as they
        would be (a server stops the rows whose clients left).
        """
        import torch

        encoded = self.encode(prompts)
        order = sorted(range(len(prompts)), key=lambda i: (len(encoded[i]), i))
        replies: list[Generation | None] = [None] * len(prompts)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                chunk = order[start : start + batch_size]
                ids, mask = self._pad([encoded[i] for i in chunk], left=True)
                width = ids.shape[1]
                torch.manual_seed(settings.seed)
                stopping = {} if should_stop is None else {"stopping_criteria": _rows_stopping(should_stop, chunk)}
                out = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), **self._decoding(settings), **stopping)
                for row, index in enumerate(chunk):
                    replies[index] = self._reply(out[row, width:].tolist(), settings.stop, len(encoded[index]))
        return replies  # type: ignore[return-value]

    def _decoding(self, settings: GenerationSettings) -> dict:
        """``generate`` options: greedy, or the model's own temperature/top-p (App. C.2); stop strings."""
        config = self.model.generation_config
        options = {"do_sample": settings.sample, "max_new_tokens": settings.max_new_tokens, "pad_token_id": self._pad_id}
        if settings.sample:
            options.update(temperature=config.temperature or 1.0, top_p=config.top_p or 1.0)
        else:
            options.update(temperature=None, top_p=None, top_k=None)
        if settings.stop:
            options.update(stop_strings=list(settings.stop), tokenizer=self.tokenizer)
        return options

    def _reply(self, tokens: list[int], stop: tuple[str, ...], prompt_tokens: int) -> Generation:
        """Decode generated tokens up to the end-of-sequence (finished rows are padded after it)."""
        ends = self.model.generation_config.eos_token_id
        ends = set(ends if isinstance(ends, list) else [ends]) - {None}
        length = next((i + 1 for i, token in enumerate(tokens) if token in ends), len(tokens))
        text = self.tokenizer.decode(tokens[:length], skip_special_tokens=True)
        return Generation(_cut_at_stop(text, stop), length, prompt_tokens)

    def _pad(self, sequences: list[list[int]], *, left: bool):  # noqa: ANN202 - (ids, mask) tensors
        """Pad token sequences to one width: left for generation, right for scoring after a shared prefix."""
        import torch

        width = max(len(tokens) for tokens in sequences)
        ids = torch.full((len(sequences), width), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, tokens in enumerate(sequences):
            span = slice(width - len(tokens), width) if left else slice(0, len(tokens))
            ids[row, span] = torch.tensor(tokens)
            mask[row, span] = 1
        return ids, mask

    def _prefix_cache(self, prefix: list[int]):  # noqa: ANN202 - a transformers Cache or None
        import torch

        if not prefix:
            return None
        ids = torch.tensor([prefix], device=self.device)
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1)  # only the cache is read: no logits over the whole prefix
        return out.cache if hasattr(out, "cache") else out.past_key_values

    def _score_batch(self, suffixes: list[list[int]], prefix_cache, prefix_len: int) -> np.ndarray:  # noqa: ANN001
        """Run right-padded suffixes after the shared prefix; log-softmax at each row's last token."""
        import torch

        ids, suffix_mask = self._pad(suffixes, left=False)
        mask = torch.cat([torch.ones((len(suffixes), prefix_len), dtype=torch.long), suffix_mask], dim=1)
        last = torch.tensor([len(s) - 1 for s in suffixes])
        keep = torch.unique(last)
        kwargs = {}
        if prefix_cache is not None:
            cache = copy.deepcopy(prefix_cache)
            cache.batch_repeat_interleave(len(suffixes))
            kwargs[self._cache_argument] = cache
        out = self.model(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            use_cache=prefix_cache is not None,
            logits_to_keep=keep.to(self.device),
            **kwargs,
        )
        column = torch.searchsorted(keep, last)
        logits = out.logits[torch.arange(len(suffixes)), column.to(self.device)].float()
        return torch.log_softmax(logits, dim=-1).cpu().numpy()


def _rows_stopping(should_stop: Callable[[int], bool], indices: list[int]):  # noqa: ANN202 - a transformers StoppingCriteriaList
    """Stopping criteria that end batch row ``r`` once ``should_stop(indices[r])``, one boolean per row (transformers >= 4.39).

    A row that stops is padded from then on; every row's tokens depend on
    its own tokens only, so the rows that go on get the replies they would get anyway.
    """
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopRows(StoppingCriteria):
        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: object) -> torch.Tensor:
            return torch.tensor([should_stop(index) for index in indices], dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([StopRows()])


def common_prefix_length(encoded: list[list[int]]) -> int:
    """Tokens shared by every prompt, leaving at least one token of each prompt to run."""
    first = encoded[0]
    length = min(len(e) for e in encoded) - 1
    for tokens in encoded[1:]:
        limit = min(length, len(tokens))
        mismatch = next((i for i in range(limit) if tokens[i] != first[i]), limit)
        length = mismatch
    return max(length, 0)
