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
import functools
import hashlib
import inspect
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import numpy as np

from dateeval import numerics
from dateeval.backends import interrupt, packing
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
    GenerationSettings,
    LabelRequest,
    ModelIdentity,
    continuation_tokens,
    register_backend,
)
from dateeval.backends.devices import free_memory, hardware, pick_device, pick_dtype
from dateeval.backends.scheduler import Scheduler
from dateeval.errors import DateEvalError
from dateeval.models import ModelSource, converted_gguf_dir, resolve
from dateeval.prompting import ChatTemplate

if TYPE_CHECKING:
    import torch
    from transformers import Cache, LogitsProcessorList, PreTrainedModel, StoppingCriteriaList
    from transformers.utils import ModelOutput

    from dateeval.backends.roomy_cache import RunningBatch

MEMORY_SHARE = (
    0.5  # of the memory free when a unit is scored, what one scoring forward may hold (batches are split to fit)
)
PREFIX_CACHE_BYTES = (
    256 << 20
)  # KV caches of recent shared prefixes kept for reuse (SmolLM2-135M float32: 5,500 tokens)
GENERATE_TOP_K = (
    50  # the top-k ``generate`` samples with where the model's generation config sets none (transformers' default)
)
# Generation-config settings under which ``generate`` adds a logits processor (value: the setting that adds none);
# the continuous-batching scheduler applies only temperature, top-k and top-p, so a model setting one keeps static batches.
EXTRA_PROCESSORS = {
    "repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "bad_words_ids": None,
    "min_length": 0,
    "min_new_tokens": 0,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_bos_token_id": None,
    "forced_eos_token_id": None,
    "sequence_bias": None,
    "min_p": None,
    "typical_p": 1.0,
}


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

    def __init__(
        self, source: ModelSource, *, dtype: str = "auto", device: str = "auto", trust_remote_code: bool = False
    ) -> None:
        import torch
        import transformers

        self.device = pick_device(device)
        self.dtype = pick_dtype(dtype, self.device)
        if self.device == "cpu":
            numerics.check_environment()
        location, kwargs = source.location, {}
        if source.kind == "gguf":
            location = str(converted_gguf_dir(source))
        elif source.kind == "hub" and source.revision:
            kwargs["revision"] = source.revision
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                location, trust_remote_code=trust_remote_code, **kwargs
            )
            self.model = transformers.AutoModelForCausalLM.from_pretrained(
                location, dtype=getattr(torch, self.dtype), trust_remote_code=trust_remote_code, **kwargs
            ).to(self.device)
        except (OSError, ValueError) as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise DateEvalError(f"cannot load model {source.name}: {first_line}") from None
        self.model.eval()
        self.governor = (
            numerics.govern(self.model, self.dtype) if self.device == "cpu" else None
        )  # threads follow the load (float32) or stay fixed
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
            hardware=hardware(self.device),
            versions={
                "torch": torch.__version__,
                "transformers": transformers.__version__,
                **(numerics.settings(self.dtype) if self.device == "cpu" else {}),
            },
        )
        self.template = ChatTemplate.from_tokenizer(self.tokenizer, name=source.name)
        # transformers 5.x renamed the forward argument `past_key_values` to `cache`.
        self._cache_argument = (
            "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"
        )
        self._pad_id = (
            self.tokenizer.pad_token_id
            if self.tokenizer.pad_token_id is not None
            else (self.tokenizer.eos_token_id or 0)
        )
        self.batches_continuously = _continuous_batching_fits(self.model)
        # On CUDA the per-prompt attention would launch kernels per prompt and layer: batches by length there (``packing``).
        self.packs = self.device == "cpu" and packing.install(self.model)
        self._prefixes: dict[
            tuple[int, ...], tuple[object, int]
        ] = {}  # shared prefixes' KV caches and bytes, oldest first (``prefix_cache``)

    @property
    def context_length(self) -> int | None:
        """The longest sequence (prompt plus reply) the model was trained on, where its config states it."""
        config = self.model.config
        lengths = (
            getattr(config, name, None) for name in ("max_position_embeddings", "n_positions", "max_sequence_length")
        )
        return next((length for length in lengths if isinstance(length, int)), None)

    @functools.cached_property
    def scheduler(self) -> Scheduler:
        """This model's scheduler: it plans every batch, this backend runs them."""
        return Scheduler(self)

    def label_logprobs(self, requests: list[LabelRequest], batch_size: int) -> list[np.ndarray]:
        return self.next_token_logprobs(
            self.encode([r.prompt for r in requests]),
            [[label.token_id for label in r.labels] for r in requests],
            batch_size,
        )

    def generate(self, requests: list[GenerationRequest], batch_size: int) -> list[Generation]:
        """Requests with the same settings are generated together (a task's requests all share theirs)."""
        return self.scheduler.generate_units([requests], self.encode, batch_size)[0]

    def generate_units(self, units: list[list[GenerationRequest]], batch_size: int) -> list[list[Generation]]:
        """One continuous batch per generation settings over every unit, each unit's prompts after their own shared prefix."""
        return self.scheduler.generate_units(units, self.encode, batch_size)

    def continuation_logprobs(self, requests: list[ContinuationRequest], batch_size: int) -> list[float]:
        return self.continuation_texts([r.context for r in requests], [r.continuation for r in requests], batch_size)

    def next_token_logprobs(
        self, encoded: list[list[int]], token_ids: list[list[int]], batch_size: int = 32
    ) -> list[np.ndarray]:
        """Log-probabilities (over the full vocabulary) of chosen next tokens after each prompt, as the scheduler batches them.

        ``token_ids[i]`` are the candidate tokens for prompt ``i`` (its option
        labels). Returns one float64 array per prompt, in input order; packed
        (``packing``: a prompt's values do not depend on its batch) where the
        model allows, else in batches by length; a :class:`FixedBatch` (the
        paper's batch-size factor) always in padded batches of exactly that size.
        """
        return self.scheduler.label_logprobs(encoded, token_ids, batch_size)

    def continuation_texts(self, contexts: list[str], continuations: list[str], batch_size: int = 16) -> list[float]:
        """Total log-probability of each continuation after its context (a generated answer's tokens, say).

        The continuation's tokens are those that tokenising context +
        continuation adds after the context's own tokens, so the split follows
        the model's tokenisation of the whole text (``continuation_tokens``).
        """
        pairs = [continuation_tokens(self.encode, ContinuationRequest(c, k)) for c, k in zip(contexts, continuations)]
        return self.scheduler.continuation_logprobs(pairs, batch_size)

    def generate_texts(
        self,
        prompts: list[str],
        settings: GenerationSettings = GenerationSettings(),
        batch_size: int = 8,
        should_stop: Callable[[int], bool] | None = None,
        groups: list[list[int]] | None = None,
    ) -> list[Generation]:
        """Replies in input order, cut at the first stop sequence, as the scheduler batches them (``Scheduler.generate``).

        Greedy replies equal the static batches' to float32 rounding; sampled
        replies draw from one generator per prompt, seeded from the seed and
        the prompt, so the same seed gives the same replies whatever the batching.
        """
        return self.scheduler.generate(self.encode(prompts), settings, batch_size, should_stop, groups)

    # The primitives the scheduler runs (``backends.scheduler``): it decides what runs together, these compute it.

    @property
    def end_ids(self) -> set[int]:
        ends = self.model.generation_config.eos_token_id
        return set(ends if isinstance(ends, list) else [ends]) - {None}

    def inference(self) -> torch.inference_mode:
        import torch

        return torch.inference_mode()

    def score_last(
        self, suffixes: list[list[int]], prefix_cache: Cache | None, prefix_len: int, *, packed: bool
    ) -> np.ndarray:
        """Log-softmax at each suffix's last token, the suffixes run after the shared prefix, packed or right-padded."""
        import torch

        logits = (
            self._packed_logits(suffixes, prefix_cache, prefix_len)
            if packed
            else self._run_suffixes(suffixes, prefix_cache, prefix_len)[0]
        )
        return torch.log_softmax(logits, dim=-1).cpu().numpy()

    def score_every_position(self, inputs: list[list[int]], *, packed: bool) -> list:
        """Each input's log-softmax at every one of its positions (one tensor per input), packed or right-padded."""
        import torch

        if not packed:
            ids, mask = self._pad(inputs, left=False)
            return list(
                torch.log_softmax(
                    self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits.float(),
                    dim=-1,
                )
            )
        logprobs = torch.log_softmax(self._packed_logits(inputs, None, 0, every_position=True), dim=-1)
        starts = [sum(len(s) for s in inputs[:row]) for row in range(len(inputs))]
        return [logprobs[start : start + len(s)] for start, s in zip(starts, inputs)]

    def echo_logprobs(self, prompts: list[list[int]]) -> torch.Tensor:  # float32 [prompts, longest, vocabulary]
        """Log-softmax at every position of prompts right-padded into one forward pass (a server's ``echo``), in place:
        the batch holds one copy of its logits."""
        import torch

        width = max(len(prompt) for prompt in prompts)
        ids = torch.zeros((len(prompts), width), dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, : len(prompt)], mask[row, : len(prompt)] = torch.tensor(prompt), 1
        with torch.inference_mode():
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits.float()
            logits -= torch.logsumexp(logits, dim=-1, keepdim=True)
        return logits

    def interruptible(self, stop: Callable[[], bool], error: type[BaseException]) -> AbstractContextManager[None]:
        """Raise ``error`` out of this model's forward passes once ``stop()`` (``interrupt.abandoned_when``)."""
        return interrupt.abandoned_when(self.model, stop, error)

    def generate_static(
        self, encoded: list[list[int]], settings: GenerationSettings, should_stop: Callable[[int], bool] | None = None
    ) -> list[Generation]:
        """One static batch through ``model.generate``, left-padded, running until its longest reply ends.

        At a fixed batch composition the output is identical run to run
        (greedy, or sampling with the seed reset before every batch).
        ``should_stop(r)`` ends row ``r`` after a decoding step.
        """
        import torch

        ids, mask = self._pad(encoded, left=True)
        width = ids.shape[1]
        torch.manual_seed(settings.seed)
        stopping = (
            {} if should_stop is None else {"stopping_criteria": _rows_stopping(should_stop, list(range(len(encoded))))}
        )
        out = self.model.generate(
            input_ids=ids.to(self.device), attention_mask=mask.to(self.device), **self._decoding(settings), **stopping
        )
        return [self.reply(out[row, width:].tolist(), settings.stop, len(tokens)) for row, tokens in enumerate(encoded)]

    def prefill(
        self, batch: RunningBatch | None, groups: list[tuple[list[list[int]], Cache | None, int]]
    ) -> tuple[torch.Tensor, RunningBatch]:
        """Run each group's suffixes after its prefix cache and join their cache rows to ``batch`` (a new one if None);
        the float32 logits of every admitted row's first reply token."""
        import torch

        from dateeval.backends.roomy_cache import RunningBatch  # imports transformers: only once a model generates

        logits = []
        for suffixes, prefix_cache, prefix_len in groups:
            first, mask, cache = self._run_suffixes(suffixes, prefix_cache, prefix_len, keep_cache=True)
            if batch is None:
                batch = RunningBatch(cache, mask)
            else:
                batch.join(cache, mask)
            logits.append(first)
        return torch.cat(logits), batch

    def decode(self, batch: RunningBatch, last_tokens: list[int], positions: list[int]) -> torch.Tensor:
        """One decoding step for every row of ``batch``: each fed its last token at its own position (float32 logits)."""
        import torch

        ids = torch.tensor([[token] for token in last_tokens], device=self.device)
        position_ids = torch.tensor([[position] for position in positions], device=self.device)
        batch.step()
        cache = {self._cache_argument: batch.cache}
        out = self.model(
            input_ids=ids,
            attention_mask=batch.mask,
            position_ids=position_ids,
            use_cache=True,
            logits_to_keep=1,
            **cache,
        )
        batch.cache = _cache_of(out)
        return out.logits[:, -1].float()

    def drop(self, batch: RunningBatch, keep: list[int]) -> RunningBatch:
        batch.keep(keep)
        return batch

    def sampler(self, settings: GenerationSettings) -> Callable[[object, list[object]], list[int]]:
        """Greedy: the argmax. Sampling: the model's temperature/top-k/top-p, one draw from each row's own generator."""
        import torch

        if not settings.sample:
            return lambda logits, _: logits.argmax(dim=-1).tolist()
        warpers = self._sampling_warpers()

        def draw(logits: torch.Tensor, generators: list[object]) -> list[int]:
            probs = torch.softmax(warpers(None, logits), dim=-1)
            return [int(torch.multinomial(probs[r], 1, generator=generator)) for r, generator in enumerate(generators)]

        return draw

    def generator(self, settings: GenerationSettings, prompt: list[int]) -> torch.Generator | None:  # None: greedy
        """One generator per prompt, seeded from the seed and the prompt's tokens, so a reply never depends on its batch."""
        import torch

        if not settings.sample:
            return None
        digest = hashlib.sha256(f"{settings.seed}:{prompt}".encode()).digest()
        return torch.Generator(device=self.device).manual_seed(int.from_bytes(digest[:8], "little") >> 1)

    def stop_checker(self, stop: tuple[str, ...]) -> Callable[[list[list[int]]], list[bool]]:
        """Whether each sequence ends in a stop string (as ``generate``'s ``StopStringCriteria`` checks)."""
        import torch
        from transformers import StopStringCriteria

        criteria = StopStringCriteria(self.tokenizer, list(stop))
        width = criteria.maximum_token_len

        def stopped(sequences: list[list[int]]) -> list[bool]:
            tails = torch.tensor([[self._pad_id] * (width - len(tokens)) + tokens[-width:] for tokens in sequences])
            return [bool(b) for b in criteria(tails, None)]

        return stopped

    def _decoding(self, settings: GenerationSettings) -> dict:
        """``generate`` options: greedy, or the model's own temperature/top-p (App. C.2); stop strings."""
        config = self.model.generation_config
        options = {
            "do_sample": settings.sample,
            "max_new_tokens": settings.max_new_tokens,
            "pad_token_id": self._pad_id,
        }
        if settings.sample:
            options.update(temperature=config.temperature or 1.0, top_p=config.top_p or 1.0)
        else:
            options.update(temperature=None, top_p=None, top_k=None)
        if settings.stop:
            options.update(stop_strings=list(settings.stop), tokenizer=self.tokenizer)
        return options

    def position_budget(self, widest: int, *, logits: bool) -> int:
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
        cache = (
            2 * config.num_hidden_layers * (getattr(config, "num_key_value_heads", None) or heads) * head_dim * element
        )
        working = (
            element * (4 * hidden + 2 * (getattr(config, "intermediate_size", None) or 4 * hidden)) + 4 * heads * widest
        )
        vocabulary = self.model.get_output_embeddings().weight.shape[0]
        return max(
            1, int(free_memory(self.device) * MEMORY_SHARE) // (cache + working + (8 * vocabulary if logits else 0))
        )

    def _sampling_warpers(self) -> LogitsProcessorList:
        """The model's own temperature, top-k and top-p, skipped where neutral and in ``generate``'s order (App. C.2)."""
        from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        config = self.model.generation_config
        temperature, top_k, top_p = (
            config.temperature or 1.0,
            GENERATE_TOP_K if config.top_k is None else config.top_k,
            config.top_p or 1.0,
        )
        warpers = [TemperatureLogitsWarper(temperature)] if temperature != 1.0 else []
        warpers += [TopKLogitsWarper(top_k)] if top_k else []
        return LogitsProcessorList(warpers + ([TopPLogitsWarper(top_p)] if top_p < 1.0 else []))

    def reply(self, tokens: list[int], stop: tuple[str, ...], prompt_tokens: int) -> Generation:
        """Decode generated tokens up to the end-of-sequence (finished rows are padded after it)."""
        ends = self.end_ids
        length = next((i + 1 for i, token in enumerate(tokens) if token in ends), len(tokens))
        text = self.tokenizer.decode(tokens[:length], skip_special_tokens=True)
        return Generation(_cut_at_stop(text, stop), length, prompt_tokens)

    def _pad(self, sequences: list[list[int]], *, left: bool) -> tuple[torch.Tensor, torch.Tensor]:  # (ids, mask)
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

    def prefix_cache(self, prefix: list[int]) -> Cache | None:
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
            cache = _cache_of(
                self.model(input_ids=torch.tensor([prefix], device=self.device), use_cache=True, logits_to_keep=1)
            )
            kept = (cache, sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers))
        self._prefixes[key] = kept  # the latest last
        while sum(size for _, size in self._prefixes.values()) > PREFIX_CACHE_BYTES:
            del self._prefixes[next(iter(self._prefixes))]
        return kept[0]

    def _run_suffixes(
        self, suffixes: list[list[int]], prefix_cache: Cache | None, prefix_len: int, *, keep_cache: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, Cache | None]:
        """Run right-padded suffixes after the shared prefix: float32 logits at each row's last token, the mask, the cache.

        Scoring reads the logits; generation also keeps the cache (``keep_cache``)
        to decode from. Only the positions read go through the output layer.
        """
        import torch

        ids, suffix_mask = self._pad(suffixes, left=False)
        mask = torch.cat([torch.ones((len(suffixes), prefix_len), dtype=torch.long), suffix_mask], dim=1).to(
            self.device
        )
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

    def _packed_logits(
        self, suffixes: list[list[int]], prefix_cache: Cache | None, prefix_len: int, *, every_position: bool = False
    ) -> torch.Tensor:
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
        positions = torch.cat([torch.arange(prefix_len, prefix_len + length) for length in segments])[None].to(
            self.device
        )
        ends = (torch.tensor(lengths).cumsum(0) - 1).tolist()
        keep = (
            0
            if every_position
            else torch.tensor(ends + ends[-1:] * max(0, packing.MIN_ROWS - len(ends)), device=self.device)
        )
        kwargs = {self._cache_argument: copy.deepcopy(prefix_cache)} if prefix_cache is not None else {}
        with packing.segments(prefix_len, segments):
            out = self.model(
                input_ids=ids, position_ids=positions, use_cache=prefix_cache is not None, logits_to_keep=keep, **kwargs
            )
        return out.logits[0].float() if every_position else out.logits[0, : len(suffixes)].float()


def _continuous_batching_fits(model: PreTrainedModel) -> bool:
    """Whether continuous batching (``scheduler.continuous``) decodes exactly as ``generate`` would for this model.

    It joins and drops cache rows along plain full-attention layers (a
    sliding-window layer keeps only its last tokens, so rows cannot be
    realigned), and it applies no logits processor but the sampling ones.
    """
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    config = model.generation_config
    plain = all(getattr(config, name, neutral) in (None, neutral) for name, neutral in EXTRA_PROCESSORS.items())
    return plain and all(type(layer) is DynamicLayer for layer in DynamicCache(config=model.config).layers)


def _rows_stopping(should_stop: Callable[[int], bool], indices: list[int]) -> StoppingCriteriaList:
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


def _cache_of(out: ModelOutput) -> Cache:
    """transformers 5.x names the returned cache ``cache``, 4.x ``past_key_values``."""
    return out.cache if hasattr(out, "cache") else out.past_key_values
