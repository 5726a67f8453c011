"""Answer parsing on hand-made and adversarial outputs."""

from decimal import Decimal

import pytest

from dateeval.tasks.parsing import gsm8k_reference, normalize_number, parse_choice, parse_number


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Let me think. The answer is B.", 1),
        ("The answer is (C)", 2),
        ("so the answer is **D**.", 3),
        ("The answer is [A]!", 0),
        ("Answer: B", 1),
        ("The answer is A... wait, no. The answer is C.", 2),  # last occurrence wins
        ("I think **B** is right", 1),
        ("the answer is option d", 3),
        ("The answer is E.", None),  # only four options
        ("I cannot decide between the options.", None),
        ("", None),
        ("The answer is Because it is obvious.", None),  # a word, not a label
    ],
)
def test_parse_choice(text, expected):
    assert parse_choice(text, 4) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$1,200.00", Decimal("1200")),
        ("-3", Decimal("-3")),
        ("18 dollars", Decimal("18")),
        ("0.50", Decimal("0.5")),
        ("72.0", Decimal("72")),
        ("€ 5", Decimal("5")),
        ("-$4", Decimal("-4")),
        ("none", None),
    ],
)
def test_normalize_number(text, expected):
    assert normalize_number(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("She has 3 apples and buys 4 more, so 7.\nAnswer: 7", Decimal("7")),
        ("Answer: 5\nActually I made a mistake.\nAnswer: $1,005.00", Decimal("1005")),
        ("Step 1: 10 - 4 = 6. The total is 6", Decimal("6")),  # no Answer line: the last number
        ("Answer: unknown, but roughly 12 km", Decimal("12")),
        ("I give up.", None),
    ],
)
def test_parse_number(text, expected):
    assert parse_number(text) == expected


def test_gsm8k_reference(data_dir):
    import json

    first = json.loads((data_dir / "gsm8k" / "test.jsonl").read_text().splitlines()[0])
    assert gsm8k_reference(first["answer"]) == Decimal("18")
    assert gsm8k_reference("... #### 1,000") == Decimal("1000")


def test_cot_prompt_asks_for_the_parseable_ending():
    from dateeval.data.items import MCItem
    from dateeval.tasks.mcqa import cot_parts

    lead, _, question = cot_parts(MCItem("q", "What is 2+2?", ("3", "4"), 1, "arithmetic"))
    text = lead + question
    assert "The answer is X." in text and "A. 3\nB. 4" in text and "about arithmetic" in text


def test_find_choice_gives_the_letter_position():
    from dateeval.tasks.parsing import find_choice

    text = "Option A looks right, but no. The answer is **C**."
    index, start = find_choice(text, 4)
    assert index == 2 and text[start] == "C" and text[:start].endswith("**")
    assert find_choice("no answer here", 4) is None
