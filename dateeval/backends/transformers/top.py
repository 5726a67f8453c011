"""What a server's answer reads of a full-vocabulary row: a position's most likely tokens (:class:`TopTokens`), and a
prompt scored token by token (:class:`PromptScores`, OpenAI's ``echo``). The runner computes the rows; these read them
in torch, so a server's request queue (``dateeval.serve.queue``) handles plain lists and never a tensor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class TopTokens:
    """One position's most likely tokens, likeliest first, with their log-probabilities."""

    values: list[float]
    tokens: list[int]


@dataclass(frozen=True)
class PromptScores:
    """A prompt's tokens' log-probabilities, each after those before it (``chosen``), those positions' top tokens
    (``positions``), and the token after the prompt's (``following``: at least one)."""

    chosen: list[float]
    positions: list[TopTokens]
    following: TopTokens


def top_tokens(logprobs: torch.Tensor, k: int) -> list[TopTokens]:
    """Each row's ``k`` most likely tokens."""
    values, tokens = logprobs.topk(k)
    return [TopTokens(v, t) for v, t in zip(values.tolist(), tokens.tolist())]


def prompt_scores(logprobs: torch.Tensor, prompt: list[int], k: int) -> PromptScores:
    """What an echo answer reads of its prompt's rows of log-probabilities (one per prompt token)."""
    import torch

    following = torch.tensor(prompt[1:], dtype=torch.long, device=logprobs.device)
    chosen = logprobs[torch.arange(len(prompt) - 1, device=logprobs.device), following].tolist()
    return PromptScores(chosen, top_tokens(logprobs[:-1], k), top_tokens(logprobs[-1:], max(k, 1))[0])
