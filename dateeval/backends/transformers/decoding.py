"""The token rules of a reply: where it ends, how its next token is chosen, how its tokens become text.

What ``generate`` would decide from the model's generation config and
tokenizer, without running the model: end-of-sequence tokens, greedy or the
model's own temperature/top-k/top-p (App. C.2), one seeded generator per
prompt, stop strings. The runner (``runner``) computes the logits; the
scheduler's continuous batches call these on them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from dateeval.backends.base import Generation, GenerationSettings

if TYPE_CHECKING:
    import torch
    from transformers import LogitsProcessorList, PreTrainedModel, PreTrainedTokenizerBase, StoppingCriteriaList

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


class Decoding:
    """A model's decoding rules (its generation config) and its tokenizer's text, for replies decoded step by step."""

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, device: str) -> None:
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)

    @property
    def end_ids(self) -> set[int]:
        ends = self.model.generation_config.eos_token_id
        return set(ends if isinstance(ends, list) else [ends]) - {None}

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
            tails = torch.tensor([[self.pad_id] * (width - len(tokens)) + tokens[-width:] for tokens in sequences])
            return [bool(b) for b in criteria(tails, None)]

        return stopped

    def options(self, settings: GenerationSettings) -> dict:
        """``generate`` options: greedy, or the model's own temperature/top-p (App. C.2); stop strings."""
        config = self.model.generation_config
        options = {
            "do_sample": settings.sample,
            "max_new_tokens": settings.max_new_tokens,
            "pad_token_id": self.pad_id,
        }
        if settings.sample:
            options.update(temperature=config.temperature or 1.0, top_p=config.top_p or 1.0)
        else:
            options.update(temperature=None, top_p=None, top_k=None)
        if settings.stop:
            options.update(stop_strings=list(settings.stop), tokenizer=self.tokenizer)
        return options

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


def continuous_batching_fits(model: PreTrainedModel) -> bool:
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


def rows_stopping(should_stop: Callable[[int], bool], indices: list[int]) -> StoppingCriteriaList:
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


def _cut_at_stop(text: str, stop: tuple[str, ...]) -> str:
    cuts = [text.index(s) for s in stop if s in text]
    return text[: min(cuts)] if cuts else text
