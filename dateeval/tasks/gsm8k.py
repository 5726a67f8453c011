"""GSM8K (paper Figure 8): step-by-step solution ending "Answer: {number}", graded on the final number."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from dateeval.conditions import Condition
from dateeval.data.files import parse_jsonl, read_lines, unique_ids
from dateeval.data.hub import load_hub_rows
from dateeval.errors import DateEvalError
from dateeval.metrics import KIND_METRICS
from dateeval.requests import (
    CONTINUATION_LOGPROBS,
    ContinuationRequest,
    GenerationSettings,
    ModelView,
    PromptInput,
    Steps,
)
from dateeval.tasks.base import GenerationTask, Prompt, Task, few_shot_chat, without_confidence
from dateeval.tasks.parsing import find_number, gsm8k_reference, parse_number
from dateeval.tasks.registry import GENERATION, Benchmark, TaskRequest

PROMPT_VERSION = "gsm8k-v1"
SETTINGS = GenerationSettings(max_new_tokens=320, stop=("\nQuestion:",))  # a reply that starts a new exemplar has ended
INSTRUCTION = (
    "Solve the following math problem step by step. End your response with a line of the form 'Answer: <number>'."
)
# The fixed few-shot set: the eight worked problems of Wei et al. (2022, chain-of-thought prompting),
# the standard GSM8K exemplars, ending in this task's answer line. The test split is never used for shots.
EXEMPLARS = (
    (
        "There are 15 trees in the grove. Grove workers will plant trees in the grove today. After they are done, there will be 21 trees. "
        "How many trees did the grove workers plant today?",
        "There are 15 trees originally. Then there were 21 trees after some more were planted. So there must have been 21 - 15 = 6.",
        6,
    ),
    (
        "If there are 3 cars in the parking lot and 2 more cars arrive, how many cars are in the parking lot?",
        "There are originally 3 cars. 2 more cars arrive. 3 + 2 = 5.",
        5,
    ),
    (
        "Leah had 32 chocolates and her sister had 42. If they ate 35, how many pieces do they have left in total?",
        "Originally, Leah had 32 chocolates. Her sister had 42. So in total they had 32 + 42 = 74. After eating 35, they had 74 - 35 = 39.",
        39,
    ),
    (
        "Jason had 20 lollipops. He gave Denny some lollipops. Now Jason has 12 lollipops. How many lollipops did Jason give to Denny?",
        "Jason started with 20 lollipops. Then he had 12 after giving some to Denny. So he gave Denny 20 - 12 = 8.",
        8,
    ),
    (
        "Shawn has five toys. For Christmas, he got two toys each from his mom and dad. How many toys does he have now?",
        "Shawn started with 5 toys. If he got 2 toys each from his mom and dad, then that is 4 more toys. 5 + 4 = 9.",
        9,
    ),
    (
        "There were nine computers in the server room. Five more computers were installed each day, from monday to thursday. "
        "How many computers are now in the server room?",
        "There were originally 9 computers. For each of 4 days, 5 more computers were added. So 5 * 4 = 20 computers were added. 9 + 20 is 29.",
        29,
    ),
    (
        "Michael had 58 golf balls. On tuesday, he lost 23 golf balls. On wednesday, he lost 2 more. How many golf balls did he have at the end of wednesday?",
        "Michael started with 58 golf balls. After losing 23 on tuesday, he had 58 - 23 = 35. After losing 2 more, he had 35 - 2 = 33 golf balls.",
        33,
    ),
    (
        "Olivia has $23. She bought five bagels for $3 each. How much money does she have left?",
        "Olivia had 23 dollars. 5 bagels for 3 dollars each will be 5 x 3 = 15 dollars. So she has 23 - 15 dollars left. 23 - 15 is 8.",
        8,
    ),
)


@dataclass(frozen=True)
class MathItem:
    id: str
    question: str
    reference: Decimal


def _item(row: dict) -> MathItem:
    return MathItem(
        f"gsm8k/{hashlib.sha1(row['question'].encode()).hexdigest()[:12]}",
        row["question"],
        gsm8k_reference(row["answer"]),
    )


def load_items(data_dir: Path | None = None) -> list[MathItem]:
    """The 1,319 test problems: ``DIR/gsm8k/test.jsonl`` (the original release), or the Hub."""
    if data_dir is None:
        rows = load_hub_rows("openai/gsm8k", "main", "test", "pass --data-dir DIR with DIR/gsm8k/test.jsonl")
        return unique_ids([_item(row) for row in rows], "the Hub copy of openai/gsm8k")
    path = Path(data_dir) / "gsm8k" / "test.jsonl"
    if not path.is_file():
        raise DateEvalError(f"no GSM8K file under {data_dir}: expected {path}")
    return unique_ids(parse_jsonl(read_lines(path, "GSM8K"), path, "GSM8K", _item), path)


def user_parts(item: MathItem, shots: int = 0) -> tuple[str, list[tuple[str, str]], str]:
    """The user turn's parts (``base.few_shot_chat``): the instruction, the first ``shots`` worked exemplars (the same
    for every item) as question and worked answer, then the question."""
    if shots > len(EXEMPLARS):
        raise DateEvalError(f"GSM8K has {len(EXEMPLARS)} fixed exemplars; {shots}-shot is not available")
    solved = [(f"Question: {q}", f"\n{solution}\nAnswer: {answer}") for q, solution, answer in EXEMPLARS[:shots]]
    return f"{INSTRUCTION}\n\n", solved, f"Question: {item.question}"


def grade(output: str, item: MathItem) -> tuple[Decimal | None, bool]:
    """The parsed number (None when unparseable, graded wrong) and whether it equals the reference."""
    number = parse_number(output)
    return number, number is not None and number == item.reference


class GSM8KTask(GenerationTask):
    """Grade-school math with a step-by-step reply; correct when the final number equals the reference."""

    kind = "gsm8k"
    prompt_version = PROMPT_VERSION

    def __init__(
        self, dataset: str, items: list[MathItem], shots: int = 0, settings: GenerationSettings = SETTINGS
    ) -> None:
        self.dataset, self.items, self.shots, self.settings = dataset, items, shots, settings
        user_parts(items[0], shots)  # fail early on an impossible shot count

    def prompt(self, item: MathItem, condition: Condition) -> Prompt:
        return few_shot_chat(condition, *user_parts(item, self.shots), self.multiturn)

    def item_record(self, item: MathItem) -> dict:
        return {"reference": str(item.reference)}

    def describe(self, item: MathItem) -> str:
        return f"**{item.question}**\n\nReference answer: **{item.reference}**"

    def steps(self, items: list, prompts: list[Prompt], inputs: list[PromptInput], model: ModelView) -> Steps:
        """Generate and grade, then the confidence of each final number: its probability where the model wrote it.

        One forward pass over prompt + reply reads the probability of the
        answer's own tokens (e.g. " 18") after the text before it; this puts
        GSM8K answers on ECE's and Table 7's confidence scale. Replies without
        a number have none (NaN), and so do all replies of a backend that cannot score a continuation.
        """
        results = yield from super().steps(items, prompts, inputs, model)
        if not (model.can(CONTINUATION_LOGPROBS) and model.capabilities.renders_locally):
            return without_confidence(model, results)
        indices, requests = [], []
        for index, (text, result) in enumerate(zip(inputs, results)):
            found = find_number(result["output"])
            if found is None:
                continue
            _, start, end = found
            split = len(result["output"][:start].rstrip(" "))  # the space before the number belongs to its first token
            indices.append(index)
            requests.append(ContinuationRequest(text + result["output"][:split], result["output"][split:end]))
        logprobs: list[float] = yield requests
        for index, logprob in zip(indices, logprobs):
            results[index]["confidence"] = math.exp(logprob)
        return results

    def grade(self, items: list, outputs: list[str], prompts: list[Prompt]) -> list[dict]:
        results = []
        for item, output in zip(items, outputs):
            number, correct = grade(output, item)
            results.append({"parsed": None if number is None else str(number), "correct": correct})
        return results


def _build(request: TaskRequest) -> Task:
    items = request.subset.select(load_items(request.data_dir), request.name)
    return GSM8KTask(request.name, items, request.shots, request.generation.apply(SETTINGS))


BENCHMARKS = (Benchmark("gsm8k", GENERATION, _build, few_shot=True, metrics=KIND_METRICS[GSM8KTask.kind]),)
