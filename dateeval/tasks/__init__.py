"""Which task a dataset name means, and building it.

Names follow one grammar, so every variant is stored and shown under its
own name: ``<benchmark>[_cot][_<k>shot][_multiturn|_singleturn]``, e.g. ``mmlu``
(next-token MCQA), ``mmlu_cot`` (chain-of-thought, §5.3), ``mmlu_5shot`` (Table 4),
``mmlu_5shot_multiturn`` (its exemplars as conversation turns), ``gsm8k_5shot``,
``humaneval``, ``wmt16_en_de``. The format suffix appears only where it is not
the benchmark's default (single-turn for dateeval's tasks, multi-turn for lm-eval's). The grammar is read and
written in one place (:mod:`dateeval.names`); what ``<benchmark>`` may be, and what
each supports, is read from the registry (:mod:`dateeval.tasks.registry`), which
this module fills from each task module's declared ``BENCHMARKS``; a user's own
file or spec (:mod:`dateeval.tasks.custom`) joins it under its own name when first named.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from dateeval.data import Subset
from dateeval.errors import DateEvalError
from dateeval.names import MULTI_TURN, DatasetName, split
from dateeval.requests import GenerationSettings
from dateeval.tasks import custom, gsm8k, humaneval, lmeval, lmeval_source, mcqa, translation
from dateeval.tasks.base import Task
from dateeval.tasks.registry import (
    GENERATION,
    MULTIPLE_CHOICE,
    REGISTRY,
    Benchmark,
    TaskRequest,
    builtin,
    register,
)


def parse_name(name: str) -> DatasetName:
    """Read ``<benchmark>[_cot][_<k>shot][_multiturn|_singleturn]`` and check it against the registry (:func:`check`);
    one clear error for anything else. The value keeps the format as written (:func:`stored` drops a default one)."""
    parsed = split(name)
    if parsed is None or parsed.base not in REGISTRY:
        raise DateEvalError(
            f"unknown dataset {name!r}: choose one of {', '.join(BENCHMARKS)}, optionally with _cot (multiple-choice ones) "
            "and/or _<k>shot (e.g. mmlu_cot, mmlu_5shot, gsm8k_5shot), or give a .jsonl/.csv/.parquet file, a .toml/.yaml spec "
            "or an lm-eval task (lmeval:NAME or lmeval:task.yaml)"
        )
    return check(parsed)


def check(parsed: DatasetName) -> DatasetName:
    """``parsed`` if its benchmark offers what it asks for (chain of thought, exemplars, a few-shot format); one clear
    error otherwise. Applied to every name a sweep runs, including those ``--cot`` and ``--shots`` made."""
    benchmark = REGISTRY[parsed.base]
    if parsed.cot and not benchmark.choice:
        raise DateEvalError(
            f"{parsed}: chain-of-thought (_cot) applies to the multiple-choice datasets ({', '.join(MULTIPLE_CHOICE_BENCHMARKS)})"
        )
    if (parsed.shots or parsed.turns) and not benchmark.few_shot:
        raise DateEvalError(
            f"{parsed}: few-shot prompting is available for {', '.join(builtin(few_shot=True))} and datasets whose spec names exemplars"
        )
    if (
        parsed.turns and not parsed.shots and not benchmark.multiturn
    ):  # lm-eval's tasks may take their shots from their YAML
        raise DateEvalError(f"{parsed}: a few-shot format needs exemplars: name them, e.g. {replace(parsed, shots=5)}")
    return parsed


def multiturn(parsed: DatasetName) -> bool:
    """Whether a (checked) name's exemplars are turns of a conversation: as its suffix says, else its benchmark's own."""
    return parsed.turns == MULTI_TURN if parsed.turns else REGISTRY[parsed.base].multiturn


def stored(parsed: DatasetName) -> DatasetName:
    """The name results are stored under: the few-shot format said only where it is not the benchmark's default, so
    ``mmlu_5shot_singleturn`` and ``mmlu_5shot`` are one dataset."""
    says_default = parsed.turns is not None and multiturn(parsed) == REGISTRY[parsed.base].multiturn
    return replace(parsed, turns=None) if says_default else parsed


def base_of(name: str) -> str | None:
    """The benchmark a dataset name is built on (``mmlu`` of ``mmlu_cot_5shot``); None for text that is no dataset
    name (a path, an ``lmeval:`` reference), which only the command line may give."""
    parsed = split(name)
    return parsed.base if parsed else None


def with_fewshot_format(parsed: DatasetName, fewshot_format: str | None) -> DatasetName:
    """The name with its exemplars in ``fewshot_format`` (the CLI's ``--fewshot-format``; None: the benchmark's own); a
    name that already says its format, and a dataset without few-shot prompting, keep theirs."""
    benchmark = REGISTRY[parsed.base]
    if fewshot_format is None or parsed.turns or not benchmark.few_shot or not (parsed.shots or benchmark.multiturn):
        return parsed
    return replace(parsed, turns=fewshot_format)


def resolve(reference: str, data_dir: str | Path | None = None, trust_task_code: bool = False) -> str:
    """The dataset name a ``--dataset`` value stands for.

    A registered name is itself. A file or spec (``bench.jsonl``,
    ``specs/bench.toml``) is registered under the name it declares. A name
    nobody registered is looked for as ``DATA_DIR/<name>.{toml,yaml,jsonl,...}``,
    so stored results of a custom dataset can be rebuilt (explorer, regrade)
    from the folder that holds it. ``lmeval:TASK`` (or an lm-eval task YAML)
    is registered from lm-eval (:mod:`dateeval.tasks.lmeval`); its YAML's
    ``!function`` helpers run only with ``trust_task_code`` (the CLI's
    ``--trust-task-code``: never the explorer's look-ups).
    """
    if lmeval_source.is_reference(reference):
        return lmeval.register_source(reference, trust_task_code)
    if custom.is_reference(reference):
        return custom.register_file(Path(reference))
    base = base_of(reference)
    if base and base not in REGISTRY and data_dir is not None:
        found = custom.find(Path(data_dir), base)
        if found is not None:
            custom.register_file(found)
    if base and base not in REGISTRY and (source := lmeval_source.find(Path(data_dir) if data_dir else None, base)):
        lmeval.register_source(source, trust_task_code)
    return reference


@dataclass(frozen=True)
class GenerationOptions:
    """Decoding choices a user may override; ``None`` keeps each task's own default length."""

    max_new_tokens: int | None = None
    sample: bool = False
    seed: int = 0

    def apply(self, default: GenerationSettings) -> GenerationSettings:
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise DateEvalError(f"--max-new-tokens must be at least 1, not {self.max_new_tokens}")
        return replace(
            default, max_new_tokens=self.max_new_tokens or default.max_new_tokens, sample=self.sample, seed=self.seed
        )


@dataclass(frozen=True)
class TaskSource:
    """A dataset as the driver resolved it, once: the name its results are stored under (parsed and checked), and the
    user's file or lm-eval task behind it (None: a built-in benchmark) with the trust its task code was given. Frozen
    and small, it travels to every worker (this process, a Ray actor), which builds the task from it (:meth:`build`)
    without resolving or parsing anything again."""

    name: DatasetName
    source: str | None = None
    trust_task_code: bool = False

    @classmethod
    def of(cls, name: DatasetName, trust_task_code: bool = False) -> TaskSource:
        """The source of a registered (stored) name: the file or lm-eval task its benchmark was registered from."""
        return cls(name, REGISTRY[name.base].source, trust_task_code)

    @property
    def benchmark(self) -> Benchmark:
        return REGISTRY[self.name.base]

    def register(self) -> None:
        """Make the name mean the same benchmark in this process (a Ray actor registers the user's file; the driver's
        process has it already, and does not read the file again)."""
        if self.source is None or (self.name.base in REGISTRY and self.benchmark.source == self.source):
            return
        if lmeval_source.is_reference(self.source):
            lmeval.register_source(self.source, self.trust_task_code)
        else:
            custom.register_file(Path(self.source))

    def build(
        self,
        data_dir: str | Path | None = None,
        subset: Subset = Subset(),
        generation: GenerationOptions = GenerationOptions(),
        label_style: str = "auto",
    ) -> Task:
        """Load the dataset's items (and exemplars) and wrap them in the task that evaluates them (in a process where
        the name means its benchmark: :meth:`register`)."""
        directory = _folder(data_dir)
        if subset.subjects and not self.benchmark.subjects:
            raise DateEvalError(
                f"--subjects applies to {', '.join(b.name for b in REGISTRY.values() if b.subjects)} only, not {self.name}"
            )
        on_turns = multiturn(self.name)
        request = TaskRequest(
            str(self.name), self.name.cot, self.name.shots, directory, subset, generation, label_style, on_turns
        )
        task = self.benchmark.build(request)
        task.subset, task.multiturn = subset.describe(), on_turns
        return task


def source_of(reference: str, data_dir: str | Path | None = None, trust_task_code: bool = False) -> TaskSource:
    """One ``--dataset`` value (a name, a file or spec, an lm-eval task) resolved and parsed, once, under its stored name."""
    return TaskSource.of(stored(parse_name(resolve(reference, _folder(data_dir), trust_task_code))), trust_task_code)


def resolve_all(
    references: Iterable[str], data_dir: str | Path | None = None, trust_task_code: bool = False
) -> tuple[TaskSource, ...]:
    """Each ``--dataset`` value resolved once (files and lm-eval tasks registered here), by stored name, in order."""
    return variants(references, data_dir, trust_task_code=trust_task_code)


def variants(
    references: Iterable[str],
    data_dir: str | Path | None = None,
    *,
    cot: bool = False,
    shots: int = 0,
    fewshot_formats: Iterable[str | None] = (None,),
    trust_task_code: bool = False,
) -> tuple[TaskSource, ...]:
    """The datasets a sweep runs: each reference resolved and parsed once, with chain of thought, ``shots`` exemplars
    and each few-shot format (None: the benchmark's own) where its name does not say its own, each variant checked."""
    formats = tuple(fewshot_formats)
    named = [
        parse_name(resolve(reference, data_dir, trust_task_code)).with_cot(cot).with_shots(shots)
        for reference in references
    ]
    chosen = (stored(check(with_fewshot_format(name, fewshot))) for name in named for fewshot in formats)
    return tuple(dict.fromkeys(TaskSource.of(name, trust_task_code) for name in chosen))


def build_task(
    reference: str,
    data_dir: str | Path | None = None,
    subset: Subset = Subset(),
    generation: GenerationOptions = GenerationOptions(),
    label_style: str = "auto",
) -> Task:
    """The task a dataset name, file or spec stands for (a stored name rebuilt by the explorer or ``regrade``, a bench):
    resolved and parsed once (:func:`source_of`), then built (:meth:`TaskSource.build`)."""
    return source_of(reference, data_dir).build(data_dir, subset, generation, label_style)


def _folder(data_dir: str | Path | None) -> Path | None:
    """The data folder as a path; one clear error where it does not exist."""
    directory = Path(data_dir) if data_dir is not None else None
    if directory is not None and not directory.is_dir():
        raise DateEvalError(f"data directory {directory} does not exist")
    return directory


# The built-in benchmarks, registered here and nowhere else (importing a task module registers nothing), in the order the
# CLI's help and the explorer's lists show them; users' files and lm-eval tasks join when first named (``resolve``).
for _benchmark in (*mcqa.BENCHMARKS, *gsm8k.BENCHMARKS, *humaneval.BENCHMARKS, *translation.BENCHMARKS):
    register(_benchmark)

MULTIPLE_CHOICE_BENCHMARKS = builtin(MULTIPLE_CHOICE)
GENERATION_BENCHMARKS = builtin(GENERATION)
BENCHMARKS = (*MULTIPLE_CHOICE_BENCHMARKS, *GENERATION_BENCHMARKS)
