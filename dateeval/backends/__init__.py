"""Backends: the interface (:mod:`.base`) and the implementations, registered by importing them here."""

# Importing an implementation registers it; each is imported for that alone (the `as` form: no unused-import warning).
from dateeval.backends import openai_api as openai_api  # registers "openai"
from dateeval.backends import transformers as transformers  # registers "transformers"
from dateeval.backends import vllm as vllm  # registers "vllm"; imports vLLM only when opened
from dateeval.backends.base import BACKENDS, Backend, BackendOptions, locate, split_model

__all__ = ["BACKENDS", "Backend", "BackendOptions", "locate", "split_model"]
