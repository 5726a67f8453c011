"""Model resolution and the Hub-format loading paths, exercised on local files (the Hub is unreachable here)."""

import datetime as dt
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from dateeval import leftovers
from dateeval.data import load_items
from dateeval.errors import DateEvalError
from dateeval.models import converted_gguf_dir, resolve


def test_named_model_is_the_packaged_gguf():
    source = resolve("smollm2-135m")
    assert (
        source.kind == "gguf" and source.gguf_file == "SmolLM2-135M-Instruct.Q4_1.gguf" and len(source.revision) == 64
    )


def test_hub_ids_and_unknown_names():
    assert resolve("HuggingFaceTB/SmolLM2-135M-Instruct@main").revision == "main"
    with pytest.raises(DateEvalError, match="unknown model"):
        resolve("not a model")


def test_local_folder_and_gguf_path_score_like_the_named_model(backend, tmp_path):
    from dateeval.backends.transformers import TransformersBackend
    from dateeval.tasks import mcqa

    folder = tmp_path / "smollm2-copy"
    shutil.copytree(converted_gguf_dir(resolve("smollm2-135m")), folder)
    local = TransformersBackend(resolve(str(folder)), dtype="float32", device="cpu")
    assert local.identity.source.startswith("dir:") and local.identity.key != backend.identity.key
    gguf = resolve(str(resolve("smollm2-135m").location) + "/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert gguf.kind == "gguf" and gguf.revision == resolve("smollm2-135m").revision
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Pick one.\nA. x\nB. y\nAnswer:"},
    ]
    prompt = backend.template.render(messages, day=dt.date(2024, 5, 5)).text
    assert local.template.render(messages, day=dt.date(2024, 5, 5)).text == prompt
    tokens = mcqa.label_tokens(backend.tokenizer, 2).token_ids
    ours = backend.next_token_logprobs(backend.encode([prompt]), [list(tokens)])[0]
    theirs = local.next_token_logprobs(local.encode([prompt]), [list(tokens)])[0]
    assert np.array_equal(ours, theirs)


def test_hub_rows_are_converted_like_local_files(monkeypatch, data_dir, tmp_path):
    """The Hub code path (datasets' builder, download, prepare), fed with rows in the Hub's schema built from the local
    ARC file: the Hub is unreachable here, so the builder is pointed at a local folder holding them."""
    import datasets

    local = load_items("arc_challenge", data_dir)[:5]
    lines = (data_dir / "arc" / "ARC-Challenge" / "ARC-Challenge-Test.jsonl").read_text().splitlines()[:5]
    folder = tmp_path / "ai2_arc"
    folder.mkdir()
    with open(folder / "test.jsonl", "w") as out:
        for line in lines:
            row = json.loads(line)
            choices = row["question"]["choices"]
            out.write(
                json.dumps(
                    {
                        "id": row["id"],
                        "question": row["question"]["stem"],
                        "answerKey": row["answerKey"],
                        "choices": {"text": [c["text"] for c in choices], "label": [c["label"] for c in choices]},
                    }
                )
                + "\n"
            )
    calls, builder = [], datasets.load_dataset_builder
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(
        "datasets.load_dataset_builder", lambda path, config: calls.append((path, config)) or builder(str(folder))
    )
    assert load_items("arc_challenge") == load_items("arc_challenge")
    assert load_items("arc_challenge") == local
    assert calls[0] == ("allenai/ai2_arc", "ARC-Challenge")


def test_conversions_left_by_killed_processes_are_removed_and_live_ones_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("DATEEVAL_CACHE", str(tmp_path))
    source = resolve("smollm2-135m")
    models = tmp_path / "models"
    target = models / f"{source.name}-{source.revision[:12]}"
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")  # already converted: nothing is loaded
    dead_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process can have it
    dead = models / f".{target.name}.tmp-{leftovers.host()}-{dead_pid}"
    live = models / f".{target.name}.tmp-{leftovers.owner()}"
    old = models / f".{target.name}.tmp-{dead_pid}"  # from before the host was recorded: only its age tells
    for folder in (dead, live, old):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"partial")
    for path in (old, old / "model.safetensors"):
        os.utime(path, (time.time() - 2 * 86400,) * 2)
    assert converted_gguf_dir(source) == target
    assert not dead.exists() and not old.exists() and live.exists()
