import json

import pytest

from dateeval.data import Subset, load_items
from dateeval.errors import DateEvalError


def _arc(tmp_path, rows):
    folder = tmp_path / "arc" / "ARC-Challenge"
    folder.mkdir(parents=True)
    (folder / "ARC-Challenge-Test.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    return tmp_path


def _arc_row(item_id, labels, key):
    return {
        "id": item_id,
        "question": {"stem": f"Q {item_id}", "choices": [{"text": f"opt {l}", "label": l} for l in labels]},
        "answerKey": key,
    }


def test_arc_numeric_keys_and_five_options(tmp_path):
    data = _arc(tmp_path, [_arc_row("a", "1234", "3"), _arc_row("b", "ABCDE", "E"), _arc_row("c", "ABC", "A")])
    items = load_items("arc_challenge", data)
    assert [i.id for i in items] == ["a", "b", "c"]
    assert items[0].answer == 2 and items[0].labels == ("A", "B", "C", "D")
    assert items[1].answer == 4 and items[1].labels == ("A", "B", "C", "D", "E")
    assert len(items[2].options) == 3


def test_arc_malformed_line_names_file_and_line(tmp_path):
    data = _arc(tmp_path, [_arc_row("a", "ABCD", "A")])
    path = data / "arc" / "ARC-Challenge" / "ARC-Challenge-Test.jsonl"
    path.write_text(path.read_text() + "\n{not json")
    with pytest.raises(DateEvalError, match="line 2"):
        load_items("arc_challenge", data)


def test_arc_lone_surrogate_escape_names_file_and_line(tmp_path):
    """Half a UTF-16 pair cannot be encoded: refused at loading, not when the prompt is hashed after the model loaded."""
    paired = _arc_row("a", "AB", "A")
    paired["question"]["stem"] = "Q \U0001f600"  # json.dumps writes the escaped pair \ud83d\ude00: a real character
    lone = _arc_row("b", "AB", "A")
    lone["question"]["choices"][1]["text"] = "opt \udc80"
    data = _arc(tmp_path, [paired])
    assert load_items("arc_challenge", data)[0].question == "Q \U0001f600"
    path = data / "arc" / "ARC-Challenge" / "ARC-Challenge-Test.jsonl"
    path.write_text(path.read_text() + "\n" + json.dumps(lone))
    with pytest.raises(
        DateEvalError, match=r"ARC-Challenge-Test.jsonl, line 2: text with a lone surrogate escape \\udc80"
    ):
        load_items("arc_challenge", data)


def test_arc_repeated_option_labels_are_refused(tmp_path):
    """Labels A, A, B: the key "A" would silently pick the first of two options."""
    data = _arc(tmp_path, [_arc_row("a", "ABCD", "B"), _arc_row("b", "AAB", "A")])
    with pytest.raises(
        DateEvalError, match=r"line 2: ARC item b: option labels A, A, B repeat A, so answer key 'A' is ambiguous"
    ):
        load_items("arc_challenge", data)


def test_mmlu_both_csv_layouts_give_the_same_items(tmp_path):
    original = tmp_path / "a" / "mmlu" / "data" / "test"
    original.mkdir(parents=True)
    (original / "anatomy_test.csv").write_text('What is X?,one,two,"three, four",five,C\nWhy?,a,b,c,d,A\n')
    exported = tmp_path / "b" / "mmlu" / "export" / "test"
    exported.mkdir(parents=True)
    (exported / "anatomy_test.csv").write_text(
        'question,choice0,choice1,choice2,choice3,answer\nWhat is X?,one,two,"three, four",five,2\nWhy?,a,b,c,d,0\n'
    )
    first, second = load_items("mmlu", tmp_path / "a"), load_items("mmlu", tmp_path / "b")
    assert first == second
    assert first[0].options[2] == "three, four" and first[0].answer == 2 and first[0].subject == "anatomy"
    assert first[0].id.startswith("mmlu/anatomy/")


def test_mmlu_errors(tmp_path):
    folder = tmp_path / "mmlu" / "data" / "test"
    folder.mkdir(parents=True)
    (folder / "anatomy_test.csv").write_text("Q,a,b,c,d,?\n")
    with pytest.raises(DateEvalError, match="malformed MMLU answer '\\?'"):
        load_items("mmlu", tmp_path)
    with pytest.raises(DateEvalError, match="unknown MMLU subject"):
        load_items("mmlu", tmp_path, Subset(subjects=("astrology",)))
    with pytest.raises(DateEvalError, match="no MMLU test files"):
        load_items("mmlu", tmp_path / "mmlu" / "data")


def test_gpqa_local_csv_shuffles_stably(tmp_path):
    (tmp_path / "gpqa").mkdir()
    header = (
        "Record ID,Question,Correct Answer,Incorrect Answer 1,Incorrect Answer 2,Incorrect Answer 3,High-level domain\n"
    )
    (tmp_path / "gpqa" / "gpqa_diamond.csv").write_text(header + "rec1,Made-up question?,right,w1,w2,w3,Physics\n")
    first = load_items("gpqa_diamond", tmp_path)[0]
    assert first.id == "gpqa_diamond/rec1" and first.options[first.answer] == "right"
    assert load_items("gpqa_diamond", tmp_path)[0] == first


def test_gpqa_without_token_says_how_to_get_access(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    with pytest.raises(DateEvalError, match="GPQA is gated"):
        load_items("gpqa_main")


def test_hub_unreachable_names_the_offline_layout(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DateEvalError, match="arc/ARC-Challenge/ARC-Challenge-Test.jsonl"):
        load_items("arc_challenge")


def test_subsets(tmp_path):
    data = _arc(tmp_path, [_arc_row(str(i), "ABCD", "A") for i in range(10)])
    assert [i.id for i in load_items("arc_challenge", data, Subset(limit=3))] == ["0", "1", "2"]
    sample = load_items("arc_challenge", data, Subset(sample=4, seed=7))
    assert sample == load_items("arc_challenge", data, Subset(sample=4, seed=7)) and len(sample) == 4
    assert sample != load_items("arc_challenge", data, Subset(sample=4, seed=8))
    with pytest.raises(DateEvalError, match="--limit 11 is outside 1..10"):
        load_items("arc_challenge", data, Subset(limit=11))
    with pytest.raises(DateEvalError, match="unknown dataset"):
        load_items("hellaswag", data)


def test_real_shared_data(data_dir):
    arc = load_items("arc_challenge", data_dir)
    assert len(arc) == 1172 and len({i.id for i in arc}) == 1172
    assert sum(len(i.options) == 5 for i in arc) == 3 and sum(len(i.options) == 3 for i in arc) == 4
    assert len(load_items("arc_easy", data_dir)) == 2376
    mmlu = load_items("mmlu", data_dir)
    assert len(mmlu) == 14079 and len({i.id for i in mmlu}) == 14079
    assert len(load_items("mmlu", data_dir, Subset(subjects=("anatomy",)))) == 135
