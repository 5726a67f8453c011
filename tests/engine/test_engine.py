"""End to end with the real default model on real ARC-Challenge and MMLU items."""

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, run_cli

from dateeval.backends import BackendOptions
from dateeval.conditions import expand
from dateeval.data import Subset
from dateeval.engine.sweep import Sweep, SweepSpec
from dateeval.requests import LabelScores
from dateeval.schema import ROW_KEY
from dateeval.store import Store
from dateeval.store import tables as store_tables
from dateeval.tasks import mcqa

DATES = "2024-01-01,2024-06-15,2024-12-31"


def _spec(data_dir, **overrides):
    values = dict(
        models=("smollm2-135m",),
        datasets=("arc_challenge", "mmlu"),
        conditions=tuple(expand([dt.date(2024, 1, 1), dt.date(2024, 6, 15), dt.date(2024, 12, 31)], no_date=True)),
        data_dir=str(data_dir),
        subset=Subset(subjects=("high_school_geography",), limit=6),
        dtypes=("float32",),
        options=BackendOptions(device="cpu"),
        batch_size=4,
    )
    values.update(overrides)
    return SweepSpec(**values)


def test_label_tokens_for_the_default_tokenizer(backend):
    tokens = mcqa.label_tokens(backend.tokenizer, 5)
    assert tokens.variant == "space+label"
    assert [backend.tokenizer.decode([t]) for t in tokens.token_ids] == [" A", " B", " C", " D", " E"]
    bare = mcqa.label_tokens(backend.tokenizer, 4, style="label")
    assert [backend.tokenizer.decode([t]) for t in bare.token_ids] == ["A", "B", "C", "D"]


def test_sweep_summary_and_rerun_does_nothing(data_dir, tmp_path, monkeypatch):
    store = tmp_path / "store"
    args = [
        "run",
        "--dataset",
        "arc_challenge",
        "--dataset",
        "mmlu",
        "--subjects",
        "high_school_geography",
        "--data-dir",
        str(data_dir),
        "--limit",
        "6",
        "--dates",
        DATES,
        "--no-date",
        "--dtype",
        "float32",
        "--store",
        str(store),
    ]
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr
    assert "8 units (0 already in the store), 48 item-dates scored" in first.stdout
    frame, problems = Store(store).read()
    assert len(frame) == 48 and not problems.corrupted
    assert set(frame["condition"]) == {"2024-01-01", "2024-06-15", "2024-12-31", "no-date"}
    assert frame["probs"].map(lambda p: abs(sum(p) - 1) < 1e-9).all()
    assert (frame["confidence"] == frame["probs"].map(max)).all()
    assert ((frame["pred"] == frame["answer"]) == frame["correct"]).all()
    assert (
        set(frame["model_revision"]) == {frame["model_revision"].iloc[0]} and len(frame["model_revision"].iloc[0]) == 64
    )
    _assert_statistics_kept_by_the_sweep(Store(store), monkeypatch)
    second = run_cli(*args)
    assert "8 units (8 already in the store), 0 item-dates scored" in second.stdout
    summary = run_cli("summary", "--store", str(store), "--json")
    table = pd.DataFrame(json.loads(summary.stdout))
    assert set(table["dataset"]) == {"arc_challenge", "mmlu"}
    assert (table["n_dates"] == 3).all() and (table["n_items"] == 6).all()
    for row in table.to_dict(orient="records"):
        sub = frame[(frame["dataset"] == row["dataset"]) & (frame["date_mode"] == "date")]
        accuracy = sub.groupby("condition")["correct"].mean()
        assert row["accuracy_delta"] == pytest.approx(accuracy.max() - accuracy.min())
        assert row["no_date_accuracy"] == pytest.approx(
            frame[(frame["dataset"] == row["dataset"]) & (frame["condition"] == "no-date")]["correct"].mean()
        )
    text = run_cli("summary", "--store", str(store)).stdout
    assert "smollm2-135m (float32, cpu) on arc_challenge: 6 items x 3 dates" in text and "no-date" in text


def _assert_statistics_kept_by_the_sweep(store: Store, monkeypatch) -> None:
    """The sweep left the explorer's costly statistics with the store: a new view reads them without computing,
    and they equal what a computation from scratch gives."""
    from dateeval import results
    from dateeval.results.chance import chance
    from dateeval.results import descriptive, inference
    from dateeval.results.sources import item_matrices, stored

    stored._KEPT.clear()
    with monkeypatch.context() as patched:
        for module, name in ((chance, "null_tests"), (inference, "entry_factors")):
            patched.setattr(
                module, name, lambda *args, name=name, **kwargs: pytest.fail(f"{name} computed after the sweep")
            )
        patched.setattr(item_matrices, "flips", lambda *args: pytest.fail("flips computed after the sweep"))
        view = results.open(store)[0]
        kept = view.chance.headline(), view.entry_statistics()
        for entry, dataset in view.sums[["entry", "dataset"]].drop_duplicates().itertuples(index=False):
            assert (
                len(view.flips.flips(entry, dataset, *descriptive.date_range(view.metrics, dataset))[0]) == 6
            )  # the Flips page's default view
    assert kept[0].n_dates == 3 and kept[0].n_items == 6 and len(kept[1][1]) == 2  # a null band per dataset
    shutil.rmtree(store.root / ".aggregates" / store_tables.KEPT_FOLDER)
    stored._KEPT.clear()
    fresh = results.open(store)[0]
    for computed, read in zip(
        [[fresh.chance.headline()], *fresh.entry_statistics()], [[kept[0]], *kept[1]], strict=True
    ):
        pd.testing.assert_frame_equal(pd.DataFrame(computed), pd.DataFrame(read))


def test_determinism_and_batch_independence(data_dir, tmp_path, monkeypatch):
    """Through whole sweeps: the same run twice, another batch size at a fixed single thread (``DATEEVAL_THREADS=1``,
    against the governed default), all bit-identical; each row records the math library's settings it ran with."""
    spec = _spec(data_dir, datasets=("arc_challenge",), subset=Subset(limit=8))
    runs = []
    for name, batch_size, threads in (("a", 4, "auto"), ("b", 4, "auto"), ("c", 1, "1")):
        monkeypatch.setenv("DATEEVAL_THREADS", threads)
        Sweep(
            _spec(data_dir, datasets=("arc_challenge",), subset=Subset(limit=8), batch_size=batch_size),
            Store(tmp_path / name),
        ).run()
        frame, _ = Store(tmp_path / name).read()
        runs.append(frame.sort_values(["condition", "item_id"], ignore_index=True))
    assert spec.batch_size == 4
    first, again, unbatched = runs
    # Same date, same batch: bit-identical probabilities.
    assert (np.vstack(first["probs"]) == np.vstack(again["probs"])).all()
    # Another batch size and thread count: packed scoring gives every item what it gets alone, bit for bit.
    assert (np.vstack(first["probs"]) == np.vstack(unbatched["probs"])).all()
    recorded = [json.loads(frame["backend_versions"].iloc[0]) for frame in (first, unbatched)]
    assert (
        recorded[0]["mkl_cbwr"].endswith(",STRICT")
        and recorded[0]["threads"].startswith("auto")
        and recorded[1]["threads"] == "1"
    )
    assert {"cpu", "cpu_capability"} <= set(recorded[0])


def test_dates_that_render_the_same_prompt_are_refused(data_dir, tmp_path):
    result = run_cli(
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "2",
        "--dates",
        "2024-01-01,2024-01-02",
        "--date-format",
        "%B %Y",
        "--store",
        str(tmp_path),
    )
    assert result.returncode == 2 and "render identical prompts" in result.stderr


def test_killed_sweep_resumes_without_duplicates(data_dir, tmp_path):
    store = tmp_path / "store"
    args = [
        sys.executable,
        "-m",
        "dateeval",
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "12",
        "--dates",
        "2024-03-01..2024-03-06",
        "--dtype",
        "float32",
        "--batch-size",
        "4",
        "--store",
        str(store),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and len(Store(store).files()) < 2:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = len(Store(store).files())
    assert 2 <= finished < 6, "the sweep should have been killed part-way"
    result = run_cli(*args[3:])
    assert result.returncode == 0, result.stderr
    assert f"6 units ({finished} already in the store)" in result.stdout
    frame, problems = Store(store).read()
    assert not problems.corrupted and len(frame) == 72 and not frame.duplicated(ROW_KEY).any()
    assert not list(store.rglob("*.tmp")) or all(p.name.startswith(".") for p in store.rglob("*.tmp"))


def test_corrupted_store_file_is_reported_not_fatal(data_dir, tmp_path):
    Sweep(_spec(data_dir, datasets=("arc_challenge",), subset=Subset(limit=3)), Store(tmp_path)).run()
    victim = Store(tmp_path).files()[0]
    victim.write_bytes(b"garbage")
    result = run_cli("summary", "--store", str(tmp_path))
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert f"cannot read {victim}" in result.stderr and victim.exists()
    rerun = run_cli(
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "3",
        "--dates",
        DATES,
        "--no-date",
        "--dtype",
        "float32",
        "--batch-size",
        "4",
        "--store",
        str(tmp_path),
    )
    assert rerun.returncode == 0 and "4 units (3 already in the store), 3 item-dates scored" in rerun.stdout
    aside = list(victim.parent.glob(f"{victim.name}.damaged-*"))
    assert f"{victim} is damaged" in rerun.stderr and len(aside) == 1 and aside[0].read_bytes() == b"garbage"


def test_a_unit_damaged_by_one_flipped_bit_is_computed_again(data_dir, tmp_path):
    """A bit flipped inside a data page: the next run moves the file aside, says so, and recomputes the same values."""
    store = Store(tmp_path)
    spec = _spec(
        data_dir, datasets=("arc_challenge",), subset=Subset(limit=3), conditions=tuple(expand([dt.date(2024, 1, 1)]))
    )
    Sweep(spec, store).run()
    (victim,) = store.files()
    before, _ = store.read()
    metadata = pq.ParquetFile(victim).metadata.row_group(0)
    probs = next(
        metadata.column(i)
        for i in range(metadata.num_columns)
        if metadata.column(i).path_in_schema.startswith("probs.")
    )
    data = bytearray(victim.read_bytes())
    start = probs.dictionary_page_offset if probs.has_dictionary_page else probs.data_page_offset
    data[start + probs.total_compressed_size - 2] ^= 0x04
    victim.write_bytes(bytes(data))
    progress = Sweep(spec, store).run()
    assert progress.items_scored == 3 and any(f"{victim} is damaged" in message for message in progress.messages)
    after, problems = store.read()
    assert not problems.corrupted and len(list(victim.parent.glob("*.damaged-*"))) == 1
    pd.testing.assert_frame_equal(before[["item_id", "probs", "pred"]], after[["item_id", "probs", "pred"]])


def test_option_permutations_map_back_to_the_original_options():
    from dateeval.data.items import MCItem

    item = MCItem("q1", "Which?", ("w", "x", "y", "z"), 2)
    for order in range(4):
        shown, shown_from = mcqa.permute(item, order)
        assert sorted(shown.options) == sorted(item.options) and shown.options[shown.answer] == "y"
        one_hot = np.eye(4)[shown.answer]
        assert np.array_equal(mcqa.to_original_order(one_hot, shown_from), np.eye(4)[item.answer])
        assert mcqa.permute(item, order) == (shown, shown_from)  # seeded: identical every time
    assert mcqa.permute(item, 0)[1] == [0, 1, 2, 3]
    assert len({mcqa.permute(item, order)[0].options for order in range(1, 6)}) > 1


def test_factor_sweep_end_to_end(data_dir, tmp_path):
    """Two batch sizes, two precisions, two option orders, two wordings, a repeat: one sweep, same items."""
    store = tmp_path / "store"
    result = run_cli(
        "run",
        "--dataset",
        "arc_challenge",
        "--data-dir",
        str(data_dir),
        "--limit",
        "4",
        "--dates",
        "2024-02-01,2024-02-02",
        "--batch-sizes",
        "1,4",
        "--option-orders",
        "1",
        "--system-prompts",
        "|You are an expert multiple-choice question answerer.",
        "--repeat",
        "1",
        "--dtype",
        "float32",
        "--dtype",
        "bfloat16",
        "--store",
        str(store),
    )
    assert result.returncode == 0, result.stderr
    frame, _ = Store(store).read()
    # Per precision: 2 dates + 2 batch sizes + 1 permutation + 2 wordings + 1 repeat = 8 conditions x 4 items.
    assert len(frame) == 2 * 8 * 4
    assert set(frame["factor"]) == {"date", "batch_size", "option_order", "system_prompt", "repeat"}
    assert set(frame["dtype"]) == {"float32", "bfloat16"}
    permuted = frame[frame["factor"] == "option_order"]
    base_answers = frame[frame["condition"] == "2024-02-01"].set_index(["dtype", "item_id"])["answer"]
    assert (
        permuted.set_index(["dtype", "item_id"])["answer"]
        == base_answers.loc[permuted.set_index(["dtype", "item_id"]).index]
    ).all()
    assert permuted["shown_order"].map(lambda order: sorted(order) == [0, 1, 2, 3]).all()
    assert permuted["shown_order"].map(lambda order: list(order) != [0, 1, 2, 3]).any()  # really permuted
    repeat = frame[frame["factor"] == "repeat"].sort_values(["dtype", "item_id"])
    base = frame[(frame["condition"] == "2024-02-01")].sort_values(["dtype", "item_id"])
    difference = np.abs(np.vstack(repeat["probs"]) - np.vstack(base["probs"])).max()
    assert difference == 0, (
        f"run-to-run difference {difference} ({repeat['dtype'].tolist()})"
    )  # identical on a deterministic setup
    assert set(frame[frame["factor"] == "batch_size"]["batch_size"]) == {1, 4}
    summary = json.loads(run_cli("summary", "--store", str(store), "--json").stdout)
    factors = {(record["entry"], factor["factor"]) for record in summary for factor in record["factors"]}
    assert ("smollm2-135m (float32, cpu)", "batch_size") in factors and (
        "smollm2-135m (bfloat16, cpu)",
        "option_order",
    ) in factors
    assert all(0 < record["delta_p_value"] <= 1 for record in summary), [record["delta_p_value"] for record in summary]
    report = run_cli("report", "--store", str(store), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Table 5: coefficient of variation per factor" in page and "Run-to-run variation" in page
    assert "Table 2 (GSM8K, HumanEval, WMT16 deltas)" in page  # listed as missing, with why


def test_generation_is_deterministic_and_stops(backend):
    from dateeval.backends.base import GenerationSettings

    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Count from 1 to 20, separated by commas."},
    ]
    prompts = [backend.template.render(messages, day=dt.date(2024, month, 1)).text for month in (1, 6)]
    settings = GenerationSettings(max_new_tokens=24)
    first, again = backend.generate_texts(prompts, settings), backend.generate_texts(prompts, settings)
    assert first == again and all(reply.text for reply in first) and all(0 < reply.n_tokens <= 24 for reply in first)
    first = [reply.text for reply in first]
    stopped = [
        reply.text for reply in backend.generate_texts(prompts, GenerationSettings(max_new_tokens=24, stop=("5",)))
    ]
    assert all("5" not in text for text in stopped)
    assert all(full.startswith(cut) for full, cut in zip(first, stopped))
    sampled = GenerationSettings(max_new_tokens=16, sample=True, seed=3)
    assert backend.generate_texts(prompts, sampled) == backend.generate_texts(prompts, sampled)


def test_open_ended_tasks_end_to_end(data_dir, tmp_path):
    """Real generation on two real items of every open-ended task (and 5-shot MCQA) over two dates: stored, graded, resumable."""
    store = tmp_path / "store"
    datasets = ["gsm8k", "mmlu_cot", "humaneval", "wmt16_en_fi", "mmlu_5shot"]
    args = [
        "run",
        *(arg for name in datasets for arg in ("--dataset", name)),
        "--subjects",
        "anatomy",
        "--data-dir",
        str(data_dir),
        "--limit",
        "2",
        "--dates",
        "2024-01-01,2024-06-15",
        "--repeat",
        "1",
        "--max-new-tokens",
        "40",
        "--dtype",
        "float32",
        "--batch-size",
        "2",
        "--store",
        str(store),
    ]
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr
    assert "15 units (0 already in the store), 30 item-dates scored" in first.stdout
    frame, problems = Store(store).read()
    assert not problems.corrupted and set(frame["dataset"]) == set(datasets)
    generated = frame[frame["dataset"] != "mmlu_5shot"]
    assert generated["output"].map(len).gt(0).all() and generated["output_tokens"].between(1, 40).all()
    assert (
        generated[generated["dataset"].isin(["humaneval", "wmt16_en_fi"])]["confidence"].isna().all()
        and (generated["decoding"] == "greedy").all()
    )
    # A parsed reasoned answer or final number has a confidence: its probability where the model wrote it.
    for rows in (frame[frame["dataset"] == "mmlu_cot"], frame[frame["dataset"] == "gsm8k"]):
        assert (rows["confidence"].notna() == rows["parsed"].notna()).all() and rows["confidence"].dropna().between(
            0, 1
        ).all()
    code = frame[frame["dataset"] == "humaneval"]
    assert (
        set(code["outcome"]) <= {"passed", "failed", "timeout", "error"}
        and (code["correct"] == (code["outcome"] == "passed")).all()
    )
    mt = frame[frame["dataset"] == "wmt16_en_fi"]
    assert (
        mt["bleu_stats"].map(len).eq(10).all()
        and mt["chrf_stats"].map(len).eq(18).all()
        and mt["score"].between(0, 100).all()
    )
    assert mt["bleu_signature"].iloc[0].startswith("nrefs:1")
    shots = frame[frame["dataset"] == "mmlu_5shot"]
    assert (shots["shots"] == 5).all() and shots["probs"].map(lambda p: abs(sum(p) - 1) < 1e-9).all()
    # Determinism at a fixed date (App. C.2): the repeat of the first date generated exactly the same text.
    for dataset, rows in generated.groupby("dataset"):
        base = rows[(rows["date"] == "2024-01-01") & (rows["factor"] == "date")].set_index("item_id")["output"]
        repeat = rows[rows["factor"] == "repeat"].set_index("item_id")["output"]
        assert base.sort_index().tolist() == repeat.sort_index().tolist(), dataset
    summary = json.loads(run_cli("summary", "--store", str(store), "--json").stdout)
    by_dataset = {record["dataset"]: record for record in summary}
    assert by_dataset["wmt16_en_fi"]["bleu_delta"] is not None and by_dataset["wmt16_en_fi"]["accuracy_delta"] is None
    assert 0 <= by_dataset["humaneval"]["accuracy_max"] <= 1 and by_dataset["gsm8k"]["ece_delta"] is None
    again = run_cli(*args)
    assert again.returncode == 0 and "15 units (15 already in the store), 0 item-dates scored" in again.stdout
    regraded = run_cli(
        "regrade", "--store", str(store), "--data-dir", str(data_dir)
    )  # grading is reproducible from the store alone
    assert regraded.returncode == 0 and regraded.stdout.count("0 grades differ") == 4, regraded.stdout + regraded.stderr
    report = run_cli("report", "--store", str(store), "--out", str(tmp_path / "report"))
    page = (tmp_path / "report" / "index.html").read_text()
    assert (
        report.returncode == 0
        and "Table 2: open-ended tasks" in page
        and "Table 4: few-shot" in page
        and "Figure 4: chain-of-thought" in page
    )


def test_continuation_logprobs_equal_a_full_forward_pass(backend):
    import torch

    context = (
        backend.template.render([{"role": "user", "content": "What is the capital of France?"}], mode="none").text
        + "The capital is"
    )
    totals = backend.continuation_texts([context, context], [" Paris.", " Lyon."], batch_size=2)
    ids, first = backend.encode([context + " Paris."])[0], len(backend.encode([context])[0])
    with torch.inference_mode():
        logprobs = torch.log_softmax(backend.model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)
    manual = sum(float(logprobs[p, ids[p + 1]]) for p in range(first - 1, len(ids) - 1))
    assert totals[0] == pytest.approx(manual, abs=1e-4) and totals[0] > totals[1]
    # packed: each text's total is what it gets alone, bit for bit, in any batch and order
    assert backend.continuation_texts([context] * 3, [" Lyon.", " Paris.", " Rome."], batch_size=3)[:2] == totals[::-1]
    assert backend.continuation_texts([context], [" Lyon."], batch_size=1) == totals[1:]


def _real_prompts(backend, data_dir):
    """One real GSM8K, chain-of-thought MMLU and HumanEval prompt each, rendered under one date as a sweep renders them."""
    from dateeval.conditions import Condition
    from dateeval.engine.worker import prompt_input
    from dateeval.tasks import build_task

    condition = Condition(date=dt.date(2024, 3, 1))
    tasks = [
        build_task(name, str(data_dir), Subset(limit=1, subjects=subjects))
        for name, subjects in (("gsm8k", ()), ("mmlu_cot", ("anatomy",)), ("humaneval", ()))
    ]
    return [
        prompt_input(backend, task.prompt(item, condition).messages, condition)[0]
        for task in tasks
        for item in task.items
    ]


def test_continuous_batching_equals_static_batches_and_computes_no_finished_row(backend, data_dir, monkeypatch):
    """Replies equal the static batches' in float32; every decoded position belongs to a row still running, and slots refill at once."""
    from dateeval.backends.base import FixedBatch, GenerationSettings

    prompts = _real_prompts(backend, data_dir)
    settings = GenerationSettings(
        max_new_tokens=10, stop=("\n",)
    )  # the code block's first line ends first, so rows end apart
    static = backend.generate_texts(
        prompts, settings, batch_size=FixedBatch(1)
    )  # alone, nothing is computed after a reply ends
    shapes, forward = (
        [],
        backend.model.forward,
    )  # the batch's forwards: the shared prefix's (no mask, maybe kept from before) aside
    monkeypatch.setattr(
        backend.model,
        "forward",
        lambda **kwargs: (
            (kwargs.get("attention_mask") is not None and shapes.append(tuple(kwargs["input_ids"].shape)))
            or forward(**kwargs)
        ),
    )
    replies = backend.generate_texts(prompts, settings, batch_size=2)
    assert replies == static and len({reply.n_tokens for reply in replies}) > 1
    decoded = [rows for rows, width in shapes if width == 1]
    assert sum(decoded) == sum(reply.n_tokens - 1 for reply in replies)  # a row's first token comes from its prefill
    prefills = [index for index, (_, width) in enumerate(shapes) if width > 1]
    assert sum(shapes[i][0] for i in prefills) == len(prompts)
    assert all(
        rows == 2 for rows, width in shapes[: prefills[-1]] if width == 1
    )  # the third prompt waited for the first free slot


def test_units_generated_together_equal_each_unit_alone_and_run_each_prefix_once(backend, data_dir, monkeypatch):
    """Two dates' real GSM8K, CoT and HumanEval prompts in one continuous batch: each reply equals its static batch of one
    (float32, greedy); each date's shared prefix runs once (a one-row forward), its prompts after it."""
    from dateeval.backends.base import FixedBatch, GenerationRequest, GenerationSettings
    from dateeval.backends.scheduler.plans import common_prefix_length
    from dateeval.conditions import Condition
    from dateeval.engine.worker import prompt_input
    from dateeval.tasks import build_task

    settings = GenerationSettings(max_new_tokens=12, stop=("\n",))
    tasks = [
        build_task(name, str(data_dir), Subset(limit=2, subjects=subjects))
        for name, subjects in (("gsm8k", ()), ("mmlu_cot", ("anatomy",)), ("humaneval", ()))
    ]
    units = [
        [
            GenerationRequest(
                prompt_input(backend, task.prompt(item, Condition(date=day)).messages, Condition(date=day))[0], settings
            )
            for task in tasks
            for item in task.items
        ]
        for day in (dt.date(2024, 3, 1), dt.date(2025, 11, 30))
    ]
    alone = [backend.generate_texts([r.prompt for r in unit], settings, FixedBatch(1)) for unit in units]
    backend.runner.prefixes.clear()  # an earlier test's prefix of the same date would be reused, not run
    shapes, forward, prefixes, prefix_cache = [], backend.model.forward, [], backend.runner.prefix_cache
    monkeypatch.setattr(
        backend.model, "forward", lambda **kwargs: shapes.append(tuple(kwargs["input_ids"].shape)) or forward(**kwargs)
    )
    monkeypatch.setattr(backend.runner, "prefix_cache", lambda tokens: prefixes.append(tokens) or prefix_cache(tokens))
    together = backend.generate_units(units, batch_size=4)
    assert together == alone and len({reply.n_tokens for unit in together for reply in unit}) > 1
    encoded = [backend.encode([r.prompt for r in unit]) for unit in units]
    assert prefixes == [unit[0][: common_prefix_length(unit)] for unit in encoded]  # each date's own, once
    assert (
        sum(rows for rows, width in shapes if width > 1) == 2 + 12
    )  # the two prefixes, then each prompt prefilled once
    decoded = sum(rows for rows, width in shapes if width == 1)
    assert decoded == sum(
        reply.n_tokens - 1 for unit in together for reply in unit
    )  # no row decodes after its reply ended


def test_a_shared_prefix_runs_once_across_calls_and_changes_no_value(backend, data_dir, monkeypatch):
    """Two scoring calls on one date's MMLU prompts: the second runs no prefix forward and gives identical probabilities;
    the kept caches stay within their byte budget."""
    from dateeval.backends.scheduler.plans import common_prefix_length
    from dateeval.backends.transformers import prefixes
    from dateeval.conditions import Condition
    from dateeval.engine.worker import prompt_input
    from dateeval.tasks import build_task

    condition = Condition(date=dt.date(2031, 5, 17))
    task = build_task("mmlu", str(data_dir), Subset(limit=6, subjects=("anatomy",)))
    encoded = backend.encode(
        [prompt_input(backend, task.prompt(item, condition).messages, condition)[0] for item in task.items]
    )
    labels = [list(range(10))] * len(encoded)
    shapes, forward = [], backend.model.forward
    monkeypatch.setattr(
        backend.model, "forward", lambda **kwargs: shapes.append(tuple(kwargs["input_ids"].shape)) or forward(**kwargs)
    )
    first = backend.next_token_logprobs(encoded, labels, 3)
    prefix_runs = len([s for s in shapes if s[0] == 1 and s[1] == common_prefix_length(encoded)])
    again = backend.next_token_logprobs(encoded, labels, 3)
    assert prefix_runs == 1 and len([s for s in shapes if s[0] == 1 and s[1] == common_prefix_length(encoded)]) == 1
    assert all((a == b).all() for a, b in zip(first, again))
    monkeypatch.setattr(prefixes, "PREFIX_CACHE_BYTES", 1)  # nothing fits: the next prefix is run and not kept
    backend.next_token_logprobs(encoded[:2], labels[:2], 2)
    assert backend.runner.prefixes.kept == {}


def test_roomy_cache_layer_holds_what_a_dynamic_layer_holds():
    """Oracle: the same updates, row selections, joins and trims on transformers' DynamicLayer and on RoomyLayer, past its room."""
    import torch
    from transformers.cache_utils import DynamicLayer

    from dateeval.backends.roomy_cache import CACHE_ROOM, RoomyLayer

    generator = torch.Generator().manual_seed(0)

    def new(rows: int, columns: int) -> torch.Tensor:
        return torch.randn((rows, 3, columns, 8), generator=generator)

    keys, values = new(4, 5), new(4, 5)
    plain = DynamicLayer()
    plain.update(keys, values)
    roomy = RoomyLayer(keys, values)
    for step in range(CACHE_ROOM * 2 + 3):
        update = (new(len(plain.keys), 1), new(len(plain.keys), 1))
        assert all(torch.equal(a, b) for a, b in zip(plain.update(*update), roomy.update(*update)))
        if step == 40:  # a row ends: dropped from both
            for layer in (plain, roomy):
                layer.batch_select_indices(torch.tensor([0, 2, 3]))
        if step == 90:  # a prompt joins (columns appended as rows), then leading columns are trimmed
            joined = (new(1, plain.keys.shape[-2]), new(1, plain.keys.shape[-2]))
            for layer in (plain, roomy):
                layer.keys, layer.values = torch.cat([layer.keys, joined[0]]), torch.cat([layer.values, joined[1]])
                layer.keys, layer.values = layer.keys[..., 7:, :], layer.values[..., 7:, :]
        assert torch.equal(plain.keys, roomy.keys) and torch.equal(plain.values, roomy.values)
        assert plain.get_seq_length() == roomy.get_seq_length() and plain.get_mask_sizes(1) == roomy.get_mask_sizes(1)


def test_a_sweep_pools_a_generation_datasets_units_and_stores_what_each_gets_alone(data_dir, tmp_path, monkeypatch):
    """GSM8K over three dates at batch 2: pooled (one generate call for all three units) and unpooled sweeps store the same rows."""
    from dateeval.engine import sweep
    from dateeval.engine.worker import Worker

    spec = _spec(
        data_dir,
        datasets=("gsm8k",),
        subset=Subset(limit=3),
        batch_size=2,
        conditions=tuple(expand([dt.date(2024, 1, 1), dt.date(2024, 6, 15), dt.date(2024, 12, 31)])),
    )
    spec = replace(spec, generation=replace(spec.generation, max_new_tokens=16))
    pooled = []
    monkeypatch.setattr(
        Worker,
        "execute_units",
        lambda self, units, real=Worker.execute_units: (
            (len(units) > 1 and pooled.append(len(units))) or real(self, units)
        ),
    )
    frames = []
    for name, batches in (("pooled", sweep.POOL_BATCHES), ("alone", 0)):
        monkeypatch.setattr(sweep, "POOL_BATCHES", batches)
        Sweep(spec, Store(tmp_path / name)).run()
        frames.append(Store(tmp_path / name).read()[0].sort_values(["condition", "item_id"], ignore_index=True))
    assert pooled == [3]  # the pooled sweep generated its three units in one call; the other, one unit at a time
    together, alone = frames
    assert len(together) == 9 and together["output"].tolist() == alone["output"].tolist()
    assert together["confidence"].tolist() == pytest.approx(alone["confidence"].tolist(), nan_ok=True)


def test_seeded_sampling_gives_the_same_replies_whatever_the_batching(backend, data_dir):
    from dateeval.backends.base import GenerationSettings

    prompts = _real_prompts(backend, data_dir)
    seeded = GenerationSettings(max_new_tokens=8, sample=True, seed=3)
    alone, together = (
        backend.generate_texts(prompts, seeded, batch_size=1),
        backend.generate_texts(prompts[::-1], seeded, batch_size=3)[::-1],
    )
    assert alone == together
    assert (
        backend.generate_texts(prompts, GenerationSettings(max_new_tokens=8, sample=True, seed=4), batch_size=3)
        != alone
    )


def test_packed_scoring_computes_no_padding_and_gives_each_prompt_what_it_gets_alone(backend, data_dir, monkeypatch):
    """Real MMLU prompts of mixed length at batch sizes 1, 5 and 32 and shuffled: every prompt's log-probabilities are
    bit-identical (packed, a prompt attends only to the shared prefix and itself), the forwards hold no padding, and the
    values are a plain forward's of the whole prompt (no cache, no packing) to float32 rounding: the oracle."""
    import torch

    from dateeval.backends import packing
    from dateeval.backends.scheduler.plans import common_prefix_length
    from dateeval.conditions import Condition
    from dateeval.engine.worker import prompt_input
    from dateeval.tasks import build_task

    condition = Condition(date=dt.date(2024, 3, 1))
    task = build_task("mmlu", str(data_dir), Subset(limit=12))
    encoded = backend.encode(
        [prompt_input(backend, task.prompt(item, condition).messages, condition)[0] for item in task.items]
    )
    labels = [list(mcqa.label_tokens(backend.tokenizer, 4).token_ids)] * len(encoded)
    assert backend.runner.packs
    shapes, forward = [], backend.model.forward
    monkeypatch.setattr(
        backend.model, "forward", lambda **kwargs: shapes.append(kwargs["input_ids"].shape) or forward(**kwargs)
    )
    alone = backend.next_token_logprobs(encoded, labels, batch_size=1)
    suffixes = [len(tokens) - common_prefix_length(encoded) for tokens in encoded]
    assert sorted(shape[1] for shape in shapes[-len(encoded) :]) == sorted(max(packing.MIN_ROWS, n) for n in suffixes)
    for batch_size in (5, 32):
        shapes.clear()
        assert all(
            (a == b).all() for a, b in zip(backend.next_token_logprobs(encoded, labels, batch_size=batch_size), alone)
        )
        assert [shape[0] for shape in shapes] == [1] * len(shapes) and sum(shape[1] for shape in shapes) == sum(
            suffixes
        )  # no padding
    order = np.random.default_rng(3).permutation(len(encoded))
    shuffled = backend.next_token_logprobs([encoded[i] for i in order], [labels[i] for i in order], batch_size=5)
    assert all((shuffled[k] == alone[i]).all() for k, i in enumerate(order))
    with torch.inference_mode():
        plain = [
            torch.log_softmax(forward(input_ids=torch.tensor([tokens])).logits[0, -1].float(), -1)[labels[0]].numpy()
            for tokens in encoded
        ]
    probs = [
        np.vstack([mcqa.grade(np.asarray(logprobs, dtype=np.float64), 0).probs for logprobs in scores])
        for scores in (alone, plain)
    ]
    assert np.abs(probs[0] - probs[1]).max() < 1e-5


def test_packed_segments_shorter_than_a_forward_with_and_without_a_prefix_equal_plain_forwards(backend):
    """Oracle for the edges: one-token segments and a row topped up with filler, after a cached prefix and with none."""
    import torch

    prompts = [
        backend.encode(["The capital of France is"])[0],
        [backend.encode(["Hello"])[0][-1]],
        backend.encode(["2 + 2 ="])[0],
    ]
    prefix = backend.encode(["You are a helpful assistant."])[0]
    assert sum(map(len, prompts)) < 16
    for shared in ([], prefix):
        with torch.inference_mode():
            cache = backend.runner.prefix_cache(shared)
            packed = backend.runner.score_last(prompts, cache, len(shared), packed=True)
            again = np.vstack([backend.runner.score_last([p], cache, len(shared), packed=True) for p in prompts])
            plain = np.vstack(
                [
                    torch.log_softmax(
                        backend.model(input_ids=torch.tensor([shared + p])).logits[0, -1].float(), -1
                    ).numpy()
                    for p in prompts
                ]
            )
        assert (packed == again).all()
        np.testing.assert_allclose(
            packed, plain, atol=1e-4, rtol=1e-5
        )  # float32 over the whole vocabulary, logits down to -30


def test_scoring_batches_keep_padding_under_its_share(backend, data_dir):
    """Padded batches (models that cannot pack, continuations): real MMLU lengths at batch 32 compute at most 5% padding."""
    from dateeval.backends.scheduler.plans import PADDING_SHARE, common_prefix_length, scoring_batches
    from dateeval.conditions import Condition
    from dateeval.engine.worker import prompt_input
    from dateeval.tasks import build_task

    condition = Condition(date=dt.date(2024, 3, 1))
    task = build_task("mmlu", str(data_dir), Subset(limit=64))
    encoded = backend.encode(
        [prompt_input(backend, task.prompt(item, condition).messages, condition)[0] for item in task.items]
    )
    lengths = [len(tokens) - common_prefix_length(encoded) for tokens in encoded]
    batches = scoring_batches(lengths, 32, 10**9)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert 1 - sum(lengths) / sum(len(batch) * max(lengths[i] for i in batch) for batch in batches) <= PADDING_SHARE


def test_the_batch_size_factor_keeps_its_batches_exact(backend, data_dir, monkeypatch, tmp_path):
    """A ``--batch-sizes`` level reaches the backend as a FixedBatch: every scoring forward holds exactly that many
    prompts (the padding cut off, as the paper's batches were), generation runs static batches, and the row records it."""
    from dateeval.backends.base import FixedBatch, GenerationSettings
    from dateeval.conditions import Condition
    from dateeval.engine.worker import prompt_input
    from dateeval.tasks import build_task

    condition = Condition(date=dt.date(2024, 3, 1))
    task = build_task("mmlu", str(data_dir), Subset(limit=12))
    encoded = backend.encode(
        [prompt_input(backend, task.prompt(item, condition).messages, condition)[0] for item in task.items]
    )
    labels = [list(mcqa.label_tokens(backend.tokenizer, 4).token_ids)] * len(encoded)
    rows, forward = (
        [],
        backend.model.forward,
    )  # the scoring forwards: the shared prefix's (no mask, maybe kept from before) aside
    monkeypatch.setattr(
        backend.model,
        "forward",
        lambda **kwargs: (
            (kwargs.get("attention_mask") is not None and rows.append(kwargs["input_ids"].shape[0]))
            or forward(**kwargs)
        ),
    )
    backend.next_token_logprobs(encoded, labels, batch_size=FixedBatch(5))
    assert rows == [5, 5, 2]
    rows.clear()
    backend.next_token_logprobs(encoded, labels, batch_size=5)
    assert rows == []  # the same prompts packed, unpadded, when the batch size is only the most a forward holds
    monkeypatch.setattr(backend.model, "forward", forward)
    prompts = _real_prompts(backend, data_dir)
    settings = GenerationSettings(max_new_tokens=6)
    static, run_static = (
        backend.generate_texts(prompts, settings, batch_size=FixedBatch(2)),
        type(backend.runner).generate_static,
    )
    batches = []
    monkeypatch.setattr(
        type(backend.runner),
        "generate_static",
        lambda self, encoded, *args: batches.append(len(encoded)) or run_static(self, encoded, *args),
    )
    assert backend.generate_texts(prompts, settings, batch_size=FixedBatch(2)) == static
    assert batches == [2] * (len(prompts) // 2) + [1] * (
        len(prompts) % 2
    )  # static batches of exactly the factor's size

    seen = []
    monkeypatch.setattr(
        type(backend),
        "label_logprobs",
        lambda self, requests, batch_size: (
            seen.append(batch_size) or [LabelScores(np.zeros(len(r.labels))) for r in requests]
        ),
    )
    spec = _spec(
        data_dir,
        datasets=("arc_challenge",),
        subset=Subset(limit=2),
        conditions=(condition, Condition(date=condition.date, batch_size=3)),
    )
    Sweep(spec, Store(tmp_path / "store")).run()
    assert sorted((int(size), type(size).__name__) for size in seen) == [(3, "FixedBatch"), (4, "int")]
    assert sorted(Store(tmp_path / "store").read()[0]["batch_size"].unique()) == [3, 4]
