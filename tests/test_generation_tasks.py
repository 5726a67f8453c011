"""Data, prompts and grading of the open-ended tasks on real files and hand-made outputs (no model needed)."""

from decimal import Decimal

import pytest

from dateeval.errors import DateEvalError
from dateeval.tasks import gsm8k, translation


def test_gsm8k_items_and_grading(data_dir):
    items = gsm8k.load_items(data_dir)
    assert len(items) == 1319 and len({i.id for i in items}) == 1319
    first = items[0]
    assert first.reference == Decimal("18") and "Janet" in gsm8k.user_message(first)
    assert gsm8k.grade("16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\nAnswer: $18", first) == (Decimal("18"), True)
    assert gsm8k.grade("Answer: 17", first) == (Decimal("17"), False)
    assert gsm8k.grade("I don't know.", first) == (None, False)


def test_wmt16_segments_and_scores(data_dir):
    segments = translation.load_segments("de", data_dir)
    assert len(segments) == 2999 and segments[0].source == "Obama receives Netanyahu"
    assert "into German" in translation.user_message(segments[0], "de")
    references = [s.reference for s in segments[:20]]
    perfect = translation.corpus_scores(references, references)
    assert perfect["bleu"] == pytest.approx(100) and perfect["chrf"] == pytest.approx(100)
    assert "nrefs:1" in perfect["bleu_signature"] and "nrefs:1" in perfect["chrf_signature"]
    poor = translation.corpus_scores([s.source for s in segments[:20]], references)
    assert poor["bleu"] < 20 and translation.sentence_chrf(references[0], references[0]) == pytest.approx(100)
    assert len(translation.load_segments("fi", data_dir)) == 3000 and len(translation.load_segments("cs", data_dir)) == 2999
    with pytest.raises(DateEvalError, match="unknown target language"):
        translation.load_segments("fr", data_dir)
