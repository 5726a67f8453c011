"""Backends: the interface (:mod:`.base`) and the implementations, registered by importing them here."""

from dateeval.backends import openai_api as _openai_api  # noqa: F401  (registers "openai")
from dateeval.backends import transformers as _transformers  # noqa: F401  (registers "transformers")
from dateeval.backends import vllm as _vllm  # noqa: F401  (registers "vllm"; imports vLLM only when opened)
from dateeval.backends.base import BACKENDS, Backend, BackendOptions, locate, split_model

__all__ = ["BACKENDS", "Backend", "BackendOptions", "locate", "split_model"]
