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
import hashlib
import inspect
import os
import platform
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby

import numpy as np

from dateeval import numerics
from dateeval.backends import packing
from dateeval.backends.base import (
    CONTINUATION_LOGPROBS, GENERATE, LABEL_LOGPROBS, Backend, BackendOptions, Capabilities, ContinuationRequest, FixedBatch, Generation,
    GenerationRequest, GenerationSettings, LabelRequest, ModelIdentity, continuation_tokens, register_backend,
)  # fmt: skip
from dateeval.errors import DateEvalError
from dateeval.models import ModelSource, converted_gguf_dir, resolve
from dateeval.prompting import ChatTemplate

DTYPES = ("auto", "bfloat16", "float16", "float32")
DEVICES = ("auto", "cuda", "mps", "cpu")
PADDING_SHARE = 0.05  # the most of a scoring forward's computed positions that may be padding (a longer prompt starts a batch)
MEMORY_SHARE = 0.5  # of the memory free when a unit is scored, what one scoring forward may hold (batches are split to fit)
PREFIX_CACHE_BYTES = 256 << 20  # KV caches of recent shared prefixes kept for reuse (SmolLM2-135M float32: 5,500 tokens)
UNKNOWN_FREE_MEMORY = 1 << 32  # bytes assumed free where the platform does not say (no CUDA, no /proc/meminfo, no sysconf)
GENERATE_TOP_K = 50  # the top-k ``generate`` samples with where the model's generation config sets none (transformers' default)
# Generation-config settings under which ``generate`` adds a logits processor (value: the setting that adds none);
# the continuous-batching scheduler applies only temperature, top-k and top-p, so a model setting one keeps static batches.
EXTRA_PROCESSORS = {"repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "bad_words_ids": None, "min_length": 0, "min_new_tokens": 0,
                    "suppress_tokens": None, "begin_suppress_tokens": None, "forced_bos_token_id": None, "forced_eos_token_id": None,
                    "sequence_bias": None, "min_p": None, "typical_p": 1.0}  # fmt: skip


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
        self.governor = numerics.govern(self.model) if self.device == "cpu" else None  # threads follow the machine's load
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
            versions={"torch": torch.__version__, "transformers": transformers.__version__, **(numerics.settings() if self.device == "cpu" else {})},
        )
        self.template = ChatTemplate.from_tokenizer(self.tokenizer, name=source.name)
        # transformers 5.x renamed the forward argument `past_key_values` to `cache`.
        self._cache_argument = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
        self._pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else (self.tokenizer.eos_token_id or 0)
        self._batches_continuously = _continuous_batching_fits(self.model)
        # On CUDA the per-prompt attention would launch kernels per prompt and layer: batches by length there (``packing``).
        self._packs = self.device == "cpu" and packing.install(self.model)
        self._prefixes: dict[tuple[int, ...], tuple[object, int]] = {}  # shared prefixes' KV caches and bytes, oldest first (``_prefix_cache``)

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

    def generate_units(self, units: list[list[GenerationRequest]], batch_size: int) -> list[list[Generation]]:
        """One continuous batch per generation settings over every unit, each unit's prompts after their own shared prefix."""
        flat = [(u, r) for u, unit in enumerate(units) for r in range(len(unit))]
        replies: list[list[Generation | None]] = [[None] * len(unit) for unit in units]
        key = lambda k: repr(units[flat[k][0]][flat[k][1]].settings)  # noqa: E731
        for _, group in groupby(sorted(range(len(flat)), key=key), key=key):
            indices = list(group)
            requests = [units[flat[k][0]][flat[k][1]] for k in indices]
            groups = [[j for j, k in enumerate(indices) if flat[k][0] == u] for u in range(len(units))]
            generated = self.generate_texts([r.prompt for r in requests], requests[0].settings, batch_size, groups=[g for g in groups if g])
            for k, reply in zip(indices, generated):
                replies[flat[k][0]][flat[k][1]] = reply
        return replies  # type: ignore[return-value]

    def continuation_logprobs(self, requests: list[ContinuationRequest], batch_size: int) -> list[float]:
        return self.continuation_texts([r.context for r in requests], [r.continuation for r in requests], batch_size)

    def next_token_logprobs(self, encoded: list[list[int]], token_ids: list[list[int]], batch_size: int = 32) -> list[np.ndarray]:
        """Log-probabilities (over the full vocabulary) of chosen next tokens after each prompt.

        ``token_ids[i]`` are the candidate tokens for prompt ``i`` (its option
        labels). Returns one float64 array per prompt, in input order. The
        prompts run after their shared prefix, packed (``_score_packed``: a
        prompt's values do not depend on its batch) where the model allows,
        else in batches by length; a :class:`FixedBatch` (the paper's
        batch-size factor) always in padded batches of exactly that size.
        """
        import torch

        if not encoded:
            return []
        prefix_len = common_prefix_length(encoded)
        results: list[np.ndarray | None] = [None] * len(encoded)
        lengths = [len(tokens) - prefix_len for tokens in encoded]
        budget = self._position_budget(prefix_len + max(lengths), logits=False)
        packed = self._packs and not isinstance(batch_size, FixedBatch)
        chunks = packing.batches(lengths, batch_size, max(1, budget - prefix_len)) if packed else scoring_batches(lengths, batch_size, budget, shared=prefix_len)
        with torch.inference_mode():
            prefix_cache = self._prefix_cache(encoded[0][:prefix_len])
            for chunk in chunks:
                logprobs = (self._score_packed if packed else self._score_batch)([encoded[i][prefix_len:] for i in chunk], prefix_cache, prefix_len)
                for row, index in enumerate(chunk):
                    results[index] = logprobs[row, token_ids[index]].astype(np.float64)
        return results  # type: ignore[return-value]

    def continuation_texts(self, contexts: list[str], continuations: list[str], batch_size: int = 16) -> list[float]:
        """Total log-probability of each continuation after its context (a generated answer's tokens, say).

        The continuation's tokens are those that tokenising context +
        continuation adds after the context's own tokens, so the split follows
        the model's tokenisation of the whole text. Packed where the model
        allows (``_packed_logits``: a text's total does not depend on its batch),
        else right-padded in batches as ``scoring_batches`` cuts them; a
        :class:`FixedBatch` always padded. Logits are computed at every
        position but the last (whose prediction is never read), as lm-eval's HF
        model does: the output layer's float32 sums depend on how many positions
        it is given, and this way a prompt scored alone equals lm-eval's to the
        last digit (tests/test_lmeval.py).
        """
        import torch

        # (tokens of the whole text, index of the first continuation token)
        pairs = [continuation_tokens(self.encode, ContinuationRequest(c, k)) for c, k in zip(contexts, continuations)]
        totals: list[float] = [0.0] * len(pairs)
        lengths = [len(tokens) - 1 for tokens, _ in pairs]
        budget = self._position_budget(max(lengths, default=1), logits=True)
        packed = self._packs and not isinstance(batch_size, FixedBatch)
        with torch.inference_mode():
            for chunk in packing.batches(lengths, batch_size, budget) if packed else scoring_batches(lengths, batch_size, budget):
                inputs = [pairs[i][0][:-1] for i in chunk]
                if packed:
                    logprobs = torch.log_softmax(self._packed_logits(inputs, None, 0, every_position=True), dim=-1)
                    starts = [sum(lengths[j] for j in chunk[:row]) for row in range(len(chunk))]
                    rows = [logprobs[start : start + lengths[i]] for start, i in zip(starts, chunk)]
                else:
                    ids, mask = self._pad(inputs, left=False)
                    rows = list(torch.log_softmax(self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits.float(), dim=-1))
                for row, i in zip(rows, chunk):
                    tokens, first = pairs[i]
                    positions = torch.arange(first - 1, len(tokens) - 1, device=row.device)
                    totals[i] = float(row[positions, torch.tensor(tokens[first:], device=row.device)].double().sum())
        return totals

    def generate_texts(
        self, prompts: list[str], settings: GenerationSettings = GenerationSettings(), batch_size: int = 8,
        should_stop: Callable[[int], bool] | None = None, groups: list[list[int]] | None = None,
    ) -> list[Generation]:  # fmt: skip
        """Generation with continuous batching; replies in input order, cut at the first stop sequence.

        At most ``batch_size`` prompts decode together, and a finished reply
        frees its slot for a waiting prompt at once, so no step is spent on
        a row that has ended (see ``_ContinuousBatch`` for why this is a
        scheduler of dateeval's own). Greedy replies equal the static
        batches' (``_generate_static``) to float32 rounding; sampled replies
        draw from one generator per prompt, seeded from the seed and the
        prompt, so the same seed gives the same replies whatever the
        batching. A :class:`FixedBatch` (the paper's batch-size factor)
        and models whose cache is not plain full attention (sliding windows)
        keep the static batches. ``should_stop(i)`` (``i`` a prompt's index)
        is asked after every decoding step: True ends prompt ``i``'s reply
        there, cut short, and leaves the other replies as they would be (a
        server stops the rows whose clients left). ``groups`` (lists of
        prompt indices, default all in one) are decoded together, each after
        its own shared prefix, run once: the units (dates) of
        :meth:`generate_units`, admitted one after the other.
        """
        import torch

        encoded = self.encode(prompts)
        with torch.inference_mode():
            if isinstance(batch_size, FixedBatch) or not self._batches_continuously:
                if groups is None:
                    return self._generate_static(encoded, settings, batch_size, should_stop)
                replies: list[Generation | None] = [None] * len(encoded)
                for group in groups:  # each group in its own static batches
                    stop = None if should_stop is None else (lambda i, group=group: should_stop(group[i]))
                    for index, reply in zip(group, self._generate_static([encoded[i] for i in group], settings, batch_size, stop)):
                        replies[index] = reply
                return replies  # type: ignore[return-value]
            return _ContinuousBatch(self, encoded, settings, batch_size, should_stop, groups).run()

    def _generate_static(
        self, encoded: list[list[int]], settings: GenerationSettings, batch_size: int, should_stop: Callable[[int], bool] | None = None,
    ) -> list[Generation]:  # fmt: skip
        """Static batches by length with left padding through ``model.generate``: each batch runs until its longest reply ends.

        At a fixed batch composition the output is identical run to run
        (greedy, or sampling with the seed reset before every batch).
        """
        import torch

        order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i]), i))
        replies: list[Generation | None] = [None] * len(encoded)
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

    def _position_budget(self, widest: int, *, logits: bool) -> int:
        """Padded positions one scoring forward may hold: ``MEMORY_SHARE`` of the free memory over what a position takes.

        A position holds its keys and values in every layer, a few hidden
        states and the MLP's intermediate ones at a time, one attention score
        per head for each of up to ``widest`` positions, and, where every
        position's prediction is read (``logits``), its float32 logits and
        their log-softmax.
        """
        import torch

        config = self.model.config.get_text_config()
        heads, hidden = config.num_attention_heads, config.hidden_size
        element = torch.empty((), dtype=self.model.dtype).element_size()
        head_dim = getattr(config, "head_dim", None) or hidden // heads
        cache = 2 * config.num_hidden_layers * (getattr(config, "num_key_value_heads", None) or heads) * head_dim * element
        working = element * (4 * hidden + 2 * (getattr(config, "intermediate_size", None) or 4 * hidden)) + 4 * heads * widest
        vocabulary = self.model.get_output_embeddings().weight.shape[0]
        return max(1, int(_free_memory(self.device) * MEMORY_SHARE) // (cache + working + (8 * vocabulary if logits else 0)))

    def _sampling_warpers(self):  # noqa: ANN202 - a transformers LogitsProcessorList
        """The model's own temperature, top-k and top-p, skipped where neutral and in ``generate``'s order (App. C.2)."""
        from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        config = self.model.generation_config
        temperature, top_k, top_p = config.temperature or 1.0, GENERATE_TOP_K if config.top_k is None else config.top_k, config.top_p or 1.0
        warpers = [TemperatureLogitsWarper(temperature)] if temperature != 1.0 else []
        warpers += [TopKLogitsWarper(top_k)] if top_k else []
        return LogitsProcessorList(warpers + ([TopPLogitsWarper(top_p)] if top_p < 1.0 else []))

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
        """The KV cache of a shared prefix, kept for the next call that shares it (``PREFIX_CACHE_BYTES`` of the latest).

        A server's batches of one date, or a unit scored again for its
        answers' confidence, share their prefix; one row run on the same
        tokens gives the same cache, so reusing it changes no value. Callers copy it before they extend it.
        """
        import torch

        if not prefix:
            return None
        key = tuple(prefix)
        kept = self._prefixes.pop(key, None)
        if kept is None:
            # only the cache is read: no logits over the whole prefix (an 8,191-token prefix held 1.6 GB of them)
            cache = _cache_of(self.model(input_ids=torch.tensor([prefix], device=self.device), use_cache=True, logits_to_keep=1))
            kept = (cache, sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers))
        self._prefixes[key] = kept  # the latest last
        while sum(size for _, size in self._prefixes.values()) > PREFIX_CACHE_BYTES:
            del self._prefixes[next(iter(self._prefixes))]
        return kept[0]

    def _run_suffixes(self, suffixes: list[list[int]], prefix_cache, prefix_len: int, *, keep_cache: bool = False):  # noqa: ANN001, ANN202
        """Run right-padded suffixes after the shared prefix: float32 logits at each row's last token, the mask, the cache.

        Scoring reads the logits; generation also keeps the cache (``keep_cache``)
        to decode from. Only the positions read go through the output layer.
        """
        import torch

        ids, suffix_mask = self._pad(suffixes, left=False)
        mask = torch.cat([torch.ones((len(suffixes), prefix_len), dtype=torch.long), suffix_mask], dim=1).to(self.device)
        last = torch.tensor([len(s) - 1 for s in suffixes])
        keep = torch.unique(last)
        kwargs = {}
        if prefix_cache is not None:
            cache = copy.deepcopy(prefix_cache)
            cache.batch_repeat_interleave(len(suffixes))
            kwargs[self._cache_argument] = cache
        out = self.model(
            input_ids=ids.to(self.device),
            attention_mask=mask,
            use_cache=keep_cache or prefix_cache is not None,
            logits_to_keep=keep.to(self.device),
            **kwargs,
        )
        column = torch.searchsorted(keep, last)
        logits = out.logits[torch.arange(len(suffixes)), column.to(self.device)].float()
        return logits, mask, _cache_of(out) if keep_cache else None

    def _score_packed(self, suffixes: list[list[int]], prefix_cache, prefix_len: int) -> np.ndarray:  # noqa: ANN001
        """Log-softmax at each suffix's last token, the suffixes packed after the shared prefix."""
        import torch

        return torch.log_softmax(self._packed_logits(suffixes, prefix_cache, prefix_len), dim=-1).cpu().numpy()

    def _packed_logits(self, suffixes: list[list[int]], prefix_cache, prefix_len: int, *, every_position: bool = False):  # noqa: ANN001, ANN202
        """float32 logits of suffixes packed end to end after the shared prefix (``packing``): at each suffix's last
        token, or at every position of the packed row in order (``every_position``; filler last).

        A segment of padding tokens tops the row up to ``packing.MIN_ROWS``
        positions, and the last suffix's logits are read again up to that many
        rows, so no matrix product runs on fewer rows than that.
        """
        import torch

        lengths = [len(s) for s in suffixes]
        filler = max(0, packing.MIN_ROWS - sum(lengths))
        segments = lengths + ([filler] if filler else [])
        ids = torch.tensor([[token for s in suffixes for token in s] + [self._pad_id] * filler], device=self.device)
        positions = torch.cat([torch.arange(prefix_len, prefix_len + length) for length in segments])[None].to(self.device)
        ends = (torch.tensor(lengths).cumsum(0) - 1).tolist()
        keep = 0 if every_position else torch.tensor(ends + ends[-1:] * max(0, packing.MIN_ROWS - len(ends)), device=self.device)
        kwargs = {self._cache_argument: copy.deepcopy(prefix_cache)} if prefix_cache is not None else {}
        with packing.segments(prefix_len, segments):
            out = self.model(input_ids=ids, position_ids=positions, use_cache=prefix_cache is not None, logits_to_keep=keep, **kwargs)
        return out.logits[0].float() if every_position else out.logits[0, : len(suffixes)].float()

    def _score_batch(self, suffixes: list[list[int]], prefix_cache, prefix_len: int) -> np.ndarray:  # noqa: ANN001
        """Log-softmax at each row's last token of suffixes run after the shared prefix."""
        import torch

        logits, _, _ = self._run_suffixes(suffixes, prefix_cache, prefix_len)
        return torch.log_softmax(logits, dim=-1).cpu().numpy()


def scoring_batches(lengths: list[int], rows: int, positions: int, shared: int = 0) -> list[list[int]]:
    """Indices of prompts by length, in batches of at most ``rows`` prompts and ``positions`` positions in all.

    Each row takes ``shared`` positions (the shared prefix's cache) plus the
    batch's widest length. A batch also ends before a prompt that would make
    more than ``PADDING_SHARE`` of its computed positions padding, so a unit
    of short and long prompts does not pad the short ones to the longest,
    unless ``rows`` is a :class:`FixedBatch` (the paper's batch-size factor,
    Table 5): then every batch holds exactly that many prompts, padded to
    the longest as the paper's were, unless memory ends it first.
    """
    padding = 1.0 if isinstance(rows, FixedBatch) else PADDING_SHARE
    batches: list[list[int]] = []
    batch: list[int] = []
    tokens = 0  # the batch's real positions
    for index in sorted(range(len(lengths)), key=lambda i: (lengths[i], i)):
        width, grown = lengths[index], len(batch) + 1  # sorted, so the newcomer is the widest
        if batch and (grown > rows or grown * (shared + width) > positions or tokens + width < (1 - padding) * grown * width):
            batches.append(batch)
            batch, tokens = [], 0
        batch.append(index)
        tokens += width
    return batches + [batch] if batch else batches


def _free_memory(device: str) -> int:
    """Bytes free for the next forward: the GPU's, else the host's available memory."""
    import torch

    if device == "cuda":
        return torch.cuda.mem_get_info()[0]
    try:
        with open("/proc/meminfo") as meminfo:
            return next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (OSError, ValueError):
        return UNKNOWN_FREE_MEMORY


def _continuous_batching_fits(model) -> bool:  # noqa: ANN001 - a transformers model
    """Whether ``_ContinuousBatch`` decodes exactly as ``generate`` would for this model.

    It joins and drops cache rows along plain full-attention layers (a
    sliding-window layer keeps only its last tokens, so rows cannot be
    realigned), and it applies no logits processor but the sampling ones.
    """
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    config = model.generation_config
    plain = all(getattr(config, name, neutral) in (None, neutral) for name, neutral in EXTRA_PROCESSORS.items())
    return plain and all(type(layer) is DynamicLayer for layer in DynamicCache(config=model.config).layers)


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


def _cache_of(out):  # noqa: ANN001, ANN202 - a model output -> its transformers Cache
    """transformers 5.x names the returned cache ``cache``, 4.x ``past_key_values``."""
    return out.cache if hasattr(out, "cache") else out.past_key_values


def _left_pad(tensor, width: int, dim: int):  # noqa: ANN001, ANN202 - a torch tensor
    """Zeros before ``tensor``'s entries along ``dim`` (a negative index) up to ``width``: masked, never attended."""
    import torch.nn.functional as F

    missing = width - tensor.shape[dim]
    return F.pad(tensor, [0, 0] * (-dim - 1) + [missing, 0]) if missing else tensor


@dataclass
class _Row:
    """One prompt in a continuous batch: its tokens so far (prompt, then reply; the last is not yet in the cache)."""

    index: int
    tokens: list[int]
    prompt_len: int
    generator: object  # a torch.Generator when sampling, else None


class _ContinuousBatch:
    """Continuous batching over the model's own dynamic KV cache: a scheduler of dateeval's own.

    Why not transformers' ``generate_batch`` (continuous batching over a
    paged cache, in 5.x): on CPU it was slower than the static batches it
    would replace (41 s against 30 s for 6 GSM8K prompts x 48 tokens,
    SmolLM2-135M float32, one run), and it has no stop strings and no
    per-request seed, both of which the tasks need. This one keeps the
    model's forward pass: the prompts' shared prefix runs once; waiting
    prompts are prefilled together (right-padded, after the prefix) into the
    slots free at that step and their cache rows joined to the running batch
    (left-padded to one length, masked); each row is fed its own positions,
    so its tokens see the positions they have alone; a row that ends
    (end-of-sequence, a stop string, ``max_new_tokens``) leaves the batch at
    that step, so no token is computed for it afterwards.
    """

    def __init__(
        self, backend: TransformersBackend, encoded: list[list[int]], settings: GenerationSettings, slots: int,
        should_stop: Callable[[int], bool] | None = None, groups: list[list[int]] | None = None,
    ) -> None:  # fmt: skip
        from transformers import StopStringCriteria

        self.backend, self.encoded, self.settings, self.slots = backend, encoded, settings, max(slots, 1)
        self.should_stop = should_stop or (lambda _: False)
        groups = [group for group in groups or [list(range(len(encoded)))] if group]
        self.group_of = {i: g for g, group in enumerate(groups) for i in group}
        self.prefix_lens = [common_prefix_length([encoded[i] for i in group]) for group in groups]
        self.prefixes: dict[int, object] = {}  # a group's prefix cache, from its first admission to its last
        self.left = [len(group) for group in groups]  # prompts of each group not yet admitted
        self.waiting = deque(i for group in groups for i in sorted(group, key=lambda i: (len(encoded[i]), i)))
        self.rows: list[_Row] = []
        self.cache = self.mask = None
        self.replies: list[Generation | None] = [None] * len(encoded)
        self.stop = StopStringCriteria(backend.tokenizer, list(settings.stop)) if settings.stop else None
        self.warpers = backend._sampling_warpers() if settings.sample else None
        ends = backend.model.generation_config.eos_token_id
        self.ends = set(ends if isinstance(ends, list) else [ends]) - {None}

    def run(self) -> list[Generation]:
        """Admit waiting prompts whenever a slot is free, else decode one token for every running row."""
        while self.waiting or self.rows:
            if self.waiting and len(self.rows) < self.slots:
                first = len(self.rows)
                logits = self._admit()
            else:
                first, logits = 0, self._decode()
            self._advance(first, logits)
        return self.replies  # type: ignore[return-value]

    def _admit(self):  # noqa: ANN202 - float32 logits of the admitted rows' first reply token
        """Prefill waiting prompts into the free slots, one forward per group, each after its group's prefix cache."""
        import torch

        taken = [self.waiting.popleft() for _ in range(min(self.slots - len(self.rows), len(self.waiting)))]
        logits = []
        for group, indices in groupby(taken, key=self.group_of.__getitem__):
            indices = list(indices)
            prefix_len = self.prefix_lens[group]
            if group not in self.prefixes:
                self.prefixes[group] = self.backend._prefix_cache(self.encoded[indices[0]][:prefix_len])
            suffixes = [self.encoded[i][prefix_len:] for i in indices]
            first, mask, cache = self.backend._run_suffixes(suffixes, self.prefixes[group], prefix_len, keep_cache=True)
            self.left[group] -= len(indices)
            if not self.left[group]:
                del self.prefixes[group]  # its last prompt is in: the cache rows hold what it is needed for
            self._join(cache, mask)
            self.rows += [_Row(i, list(self.encoded[i]), len(self.encoded[i]), self._generator(self.encoded[i])) for i in indices]
            logits.append(first)
        return torch.cat(logits)

    def _decode(self):  # noqa: ANN202 - float32 logits of every running row's next token
        import torch

        device = self.backend.device
        ids = torch.tensor([[row.tokens[-1]] for row in self.rows], device=device)
        positions = torch.tensor([[len(row.tokens) - 1] for row in self.rows], device=device)
        self.mask = torch.cat([self.mask, torch.ones((len(self.rows), 1), dtype=self.mask.dtype, device=device)], dim=1)
        cache = {self.backend._cache_argument: self.cache}
        out = self.backend.model(input_ids=ids, attention_mask=self.mask, position_ids=positions, use_cache=True, logits_to_keep=1, **cache)
        self.cache = _cache_of(out)
        return out.logits[:, -1].float()

    def _join(self, cache, mask) -> None:  # noqa: ANN001
        """Append admitted rows' cache and mask to the running batch's, left-padding the shorter to one length."""
        import torch

        if not self.rows:
            from dateeval.backends.roomy_cache import RoomyLayer  # imports transformers: only once a model generates

            cache.layers = [RoomyLayer(layer.keys, layer.values) for layer in cache.layers]
            self.cache, self.mask = cache, mask
            return
        width = max(self.mask.shape[1], mask.shape[1])
        for mine, theirs in zip(self.cache.layers, cache.layers):
            mine.keys = torch.cat([_left_pad(mine.keys, width, -2), _left_pad(theirs.keys, width, -2)])
            mine.values = torch.cat([_left_pad(mine.values, width, -2), _left_pad(theirs.values, width, -2)])
        self.mask = torch.cat([_left_pad(self.mask, width, -1), _left_pad(mask, width, -1)])

    def _advance(self, first: int, logits) -> None:  # noqa: ANN001
        """Append each row's chosen token (rows from ``first`` on own ``logits``); rows that ended leave the batch."""
        rows = self.rows[first:]
        for row, token in zip(rows, self._choose(logits, rows)):
            row.tokens.append(token)
        ended = {first + r for r, done in enumerate(self._ended(rows)) if done}
        for r in ended:
            row = self.rows[r]
            self.replies[row.index] = self.backend._reply(row.tokens[row.prompt_len :], self.settings.stop, row.prompt_len)
        if ended:
            self._drop(ended)

    def _choose(self, logits, rows: list[_Row]) -> list[int]:  # noqa: ANN001
        """Greedy: the argmax. Sampling: the model's temperature/top-k/top-p, one draw from each row's own generator."""
        import torch

        if self.warpers is None:
            return logits.argmax(dim=-1).tolist()
        probs = torch.softmax(self.warpers(None, logits), dim=-1)
        return [int(torch.multinomial(probs[r], 1, generator=row.generator)) for r, row in enumerate(rows)]

    def _ended(self, rows: list[_Row]) -> list[bool]:
        """End-of-sequence, ``max_new_tokens`` reached, ``should_stop``, or a stop string at the end of prompt + reply (as ``generate`` checks)."""
        import torch

        done = [row.tokens[-1] in self.ends or len(row.tokens) - row.prompt_len >= self.settings.max_new_tokens or self.should_stop(row.index)
                for row in rows]  # fmt: skip
        if self.stop is None:
            return done
        width = self.stop.maximum_token_len
        tails = torch.tensor([[self.backend._pad_id] * (width - len(row.tokens)) + row.tokens[-width:] for row in rows])
        return [a or bool(b) for a, b in zip(done, self.stop(tails, None))]

    def _drop(self, ended: set[int]) -> None:
        """Remove ended rows from the batch and the cache columns no remaining row uses."""
        import torch

        keep = [r for r in range(len(self.rows)) if r not in ended]
        self.rows = [self.rows[r] for r in keep]
        if not keep:
            self.cache = self.mask = None
            return
        index = torch.tensor(keep, device=self.backend.device)
        self.cache.batch_select_indices(index)
        self.mask = self.mask[index]
        unused = int(self.mask.any(dim=0).int().argmax())  # leading columns only the dropped rows used
        if unused:
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[..., unused:, :], layer.values[..., unused:, :]
            self.mask = self.mask[:, unused:]

    def _generator(self, prompt: list[int]):  # noqa: ANN202 - a torch.Generator, or None for greedy decoding
        """One generator per prompt, seeded from the seed and the prompt's tokens, so a reply never depends on its batch."""
        import torch

        if not self.settings.sample:
            return None
        digest = hashlib.sha256(f"{self.settings.seed}:{prompt}".encode()).digest()
        return torch.Generator(device=self.backend.device).manual_seed(int.from_bytes(digest[:8], "little") >> 1)


def common_prefix_length(encoded: list[list[int]]) -> int:
    """Tokens shared by every prompt, leaving at least one token of each prompt to run."""
    first = encoded[0]
    length = min(len(e) for e in encoded) - 1
    for tokens in encoded[1:]:
        limit = min(length, len(tokens))
        mismatch = next((i for i in range(limit) if tokens[i] != first[i]), limit)
        length = mismatch
    return max(length, 0)
