"""The vLLM backend: an offline ``vllm.LLM`` engine fed the prompt text that dateeval rendered.

``--model vllm:SPEC`` takes the same specs as the transformers backend (a
named model, a folder, a Hub id, a ``.gguf``, which is converted once to a
transformers folder). dateeval renders every prompt with the model's own chat
template and hands vLLM the token ids of that text, so every template kind
keeps full date control and both backends see identical tokens.

* Option labels: ``SamplingParams(max_tokens=1, logprob_token_ids=labels)``
  returns each label's log-probability under the *full* next-token
  distribution (vLLM's raw log-softmax in float32), so the label mass is
  recorded as with transformers. (``allowed_token_ids`` with processed
  log-probabilities would renormalise over the labels and lose the mass.)
* Generation: greedy, or the model's own temperature/top-p/top-k with a
  per-request seed, so a reply does not depend on what it was batched with.
* Continuations: prompt log-probabilities (vLLM reads no prefix cache for those).

Prefix caching is on: within one date every prompt shares the chat header,
system message and date, computed once. The engine runs in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so callers need no ``__main__`` guard
and :meth:`close` frees it. vLLM is imported only in :meth:`VLLMBackend.open`:
dateeval works without the optional extra (``requirements-vllm.txt``).

Settings beyond :class:`BackendOptions`, by environment variable:

* ``DATEEVAL_VLLM_KV_CACHE_GIB`` (CPU, default 2): host memory for the KV cache.
  On CPU vLLM's ``gpu_memory_utilization`` is a fraction of *host* memory and
  its default 0.92 is refused on a shared machine, so a fixed size is used.
* ``DATEEVAL_VLLM_MEMORY`` (GPU, default 0.9): ``gpu_memory_utilization``;
  on CPU it replaces the fixed KV cache size when set.
* ``DATEEVAL_VLLM_COMPILE`` (default 1 on GPU, 0 on CPU): torch.compile and
  CUDA graphs. On a 2-core CPU compiling took ~90 s of a ~105 s engine load
  for no measurable speed-up, so CPU runs eager (load ~15 s).
"""

from __future__ import annotations

import gc
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from dateeval.backends.base import (
    CONTINUATION_LOGPROBS,
    GENERATE,
    LABEL_LOGPROBS,
    Backend,
    BackendOptions,
    Capabilities,
    ContinuationRequest,
    FixedBatch,
    Generation,
    GenerationRequest,
    GenerationSettings,
    LabelRequest,
    LabelScores,
    ModelIdentity,
    continuation_tokens,
    register_backend,
)
from dateeval.backends.scheduler.plans import static_batches
from dateeval.errors import DateEvalError
from dateeval.models import ModelSource, converted_gguf_dir, resolve
from dateeval.prompting import ChatTemplate

if TYPE_CHECKING:
    from vllm import SamplingParams

INSTALL_HINT = "install the optional extra: pip install -r requirements-vllm.txt, then pip uninstall -y torchvision torchaudio torchcodec (see docs/serving.md)"


def _import_vllm() -> Any:
    """vLLM, or one line saying how to get it. Its engine runs in this process (no spawned worker)."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    try:
        import vllm
    except ImportError:
        raise DateEvalError(f"backend vllm needs vLLM, which is not installed: {INSTALL_HINT}") from None
    except Exception as error:  # e.g. CUDA builds of torchvision next to a CPU torch
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise DateEvalError(f"vLLM is installed but fails to import ({first_line}): {INSTALL_HINT}") from None
    return vllm


def _device(requested: str) -> str:
    from vllm.platforms import current_platform

    device = str(current_platform.device_type or "cpu")
    if requested not in ("auto", device):
        raise DateEvalError(f"this vLLM build runs on {device}, not {requested}: use --device auto or {device}")
    return device


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value in (None, "") else value not in ("0", "false", "no")


def _number(name: str) -> float | None:
    value = os.environ.get(name)
    if value in (None, ""):
        return None
    try:
        return float(value)
    except ValueError:
        raise DateEvalError(f"{name}={value!r} is not a number") from None


def _memory_settings(device: str) -> dict:
    fraction = _number("DATEEVAL_VLLM_MEMORY")
    if device == "cpu" and fraction is None:
        gib = _number("DATEEVAL_VLLM_KV_CACHE_GIB") or 2.0
        return {"kv_cache_memory_bytes": int(gib * (1 << 30))}
    return {"gpu_memory_utilization": fraction if fraction is not None else 0.9}


@register_backend("vllm")
class VLLMBackend(Backend):
    """An offline vLLM engine with prefix caching; dateeval renders every prompt and sends its token ids."""

    capabilities = Capabilities(
        frozenset({LABEL_LOGPROBS, GENERATE, CONTINUATION_LOGPROBS}),
        renders_locally=True,
        deterministic=True,
        date_control="full",
    )

    @classmethod
    def locate(cls, spec: str) -> ModelSource:
        return resolve(spec)

    @classmethod
    def open(cls, located: ModelSource, options: BackendOptions) -> VLLMBackend:
        return cls(located, options)

    def __init__(self, source: ModelSource, options: BackendOptions = BackendOptions()) -> None:
        vllm = _import_vllm()
        import torch
        import transformers

        from dateeval.backends.devices import hardware, pick_dtype

        self.device = _device(options.device)
        self.dtype = pick_dtype(options.dtype, self.device)
        location, revision = source.location, None
        if source.kind == "gguf":
            location = str(converted_gguf_dir(source))
        elif source.kind == "hub":
            revision = source.revision
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                location, revision=revision, trust_remote_code=options.trust_remote_code
            )
            config = transformers.AutoConfig.from_pretrained(
                location, revision=revision, trust_remote_code=options.trust_remote_code
            )
            try:
                self._generation_config = transformers.GenerationConfig.from_pretrained(location, revision=revision)
            except OSError:
                self._generation_config = transformers.GenerationConfig.from_model_config(config)
        except (OSError, ValueError) as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise DateEvalError(f"cannot load model {source.name}: {first_line}") from None
        if self.device == "cpu":
            # vLLM drops torch to one thread "for serving" unless OMP_NUM_THREADS is set; in this process that
            # would slow everything else down, so the current count is kept.
            os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
        try:
            self.llm = vllm.LLM(
                model=location,
                tokenizer=location,
                revision=revision,
                dtype=self.dtype,
                trust_remote_code=options.trust_remote_code,
                enable_prefix_caching=True,
                seed=0,
                enforce_eager=not _flag("DATEEVAL_VLLM_COMPILE", self.device != "cpu"),
                **_memory_settings(self.device),
            )
        except (OSError, ValueError, RuntimeError) as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise DateEvalError(f"vLLM cannot load model {source.name}: {first_line}") from None
        self._sampling_params = vllm.SamplingParams
        self.identity = ModelIdentity(
            model=source.name,
            source=f"{source.kind}:{source.location if source.kind == 'hub' else (source.gguf_file or source.name)}",
            revision=source.revision or getattr(config, "_commit_hash", None),
            dtype=self.dtype,
            device=self.device,
            hardware=hardware(self.device),
            backend="vllm",
            versions={"vllm": vllm.__version__, "torch": torch.__version__, "transformers": transformers.__version__},
        )
        self.template = ChatTemplate.from_tokenizer(self.tokenizer, name=source.name)

    @property
    def context_length(self) -> int | None:
        return int(self.llm.llm_engine.model_config.max_model_len)

    def _run(self, prompts: list[list[int]], params: list, batch_size: int) -> list:
        """Outputs in input order. vLLM's engine is this backend's scheduler: every request goes to it at once and it
        batches them continuously (up to its ``max_num_seqs``), so a plain ``batch_size`` caps nothing here. A
        :class:`FixedBatch` (the batch-size factor) runs as the transformers backend's static batches do: the chunks
        :func:`~dateeval.backends.scheduler.plans.static_batches` plans, one engine call each."""
        plan = (
            static_batches([len(tokens) for tokens in prompts], batch_size)
            if isinstance(batch_size, FixedBatch)
            else [list(range(len(prompts)))]
        )
        outputs: list = [None] * len(prompts)
        for chunk in plan:
            answered = self.llm.generate(
                [{"prompt_token_ids": prompts[i]} for i in chunk], [params[i] for i in chunk], use_tqdm=False
            )
            for index, output in zip(chunk, answered):
                outputs[index] = output
        return outputs

    def label_logprobs(self, requests: list[LabelRequest], batch_size: int) -> list[LabelScores]:
        """Full-vocabulary log-probabilities of each request's label tokens at the next position."""
        ids = [[label.token_id for label in request.labels] for request in requests]
        if any(token is None for labels in ids for token in labels):
            raise DateEvalError("backend vllm scores option labels by token id, and a label has none")
        params = [
            self._sampling_params(max_tokens=1, temperature=0.0, logprob_token_ids=labels, detokenize=False)
            for labels in ids
        ]
        outputs = self._run(self.encode([r.prompt for r in requests]), params, batch_size)
        results = []
        for output, labels in zip(outputs, ids):
            found = output.outputs[0].logprobs[0]
            results.append(
                LabelScores(
                    np.array([found[token].logprob if token in found else np.nan for token in labels], dtype=np.float64)
                )
            )
        return results

    def generate(self, requests: list[GenerationRequest], batch_size: int) -> list[Generation]:
        encoded = self.encode([r.prompt for r in requests])
        outputs = self._run(encoded, [self._decoding(r.settings) for r in requests], batch_size)
        replies = []
        for output, tokens in zip(outputs, encoded):
            completion = output.outputs[0]
            replies.append(Generation(completion.text, len(completion.token_ids), len(tokens)))
        return replies

    def _decoding(self, settings: GenerationSettings) -> SamplingParams:
        """Greedy, or the model's own temperature/top-p/top-k (App. C.2) with the request's own seed; stop strings cut."""
        common = {
            "max_tokens": settings.max_new_tokens,
            "stop": list(settings.stop) or None,
            "skip_special_tokens": True,
        }
        if not settings.sample:
            return self._sampling_params(temperature=0.0, **common)
        config = self._generation_config
        return self._sampling_params(
            temperature=config.temperature or 1.0,
            top_p=config.top_p or 1.0,
            top_k=config.top_k or 0,
            seed=settings.seed,
            **common,
        )

    def continuation_logprobs(self, requests: list[ContinuationRequest], batch_size: int) -> list[float]:
        """Total log-probability of each continuation, split where tokenising context + continuation departs from the context."""
        splits = [continuation_tokens(self.encode, request) for request in requests]
        params = [
            self._sampling_params(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False) for _ in requests
        ]
        outputs = self._run([whole for whole, _ in splits], params, batch_size)
        totals = []
        for output, (whole, first) in zip(outputs, splits):
            scored = output.prompt_logprobs  # position i: the log-probability of prompt token i given those before it
            totals.append(float(sum(scored[i][whole[i]].logprob for i in range(first, len(whole)))))
        return totals

    def close(self) -> None:
        """Shut the engine down and free its memory (a later engine in this process starts clean)."""
        llm = getattr(self, "llm", None)
        if llm is None:
            return
        self.llm = None
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:  # already shut down
            pass
        try:
            from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel

            destroy_model_parallel()
            destroy_distributed_environment()
        except Exception:  # nothing to tear down
            pass
        del llm
        gc.collect()
