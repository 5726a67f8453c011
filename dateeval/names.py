"""The dataset-name grammar ``<benchmark>[_cot][_<k>shot][_multiturn|_singleturn]`` and the few-shot formats it names.

Below the tasks (which check a name against the benchmarks registered in the process, :func:`dateeval.tasks.parse_name`)
and the statistics (which read a stored name's parts to place it in the paper's tables), so that reading results
never imports a task module, and the grammar is written once.
"""

from __future__ import annotations

import re

NAME = re.compile(r"(?P<base>[a-z0-9_]+?)(?P<cot>_cot)?(?:_(?P<shots>\d+)shot)?(?:_(?P<turns>multiturn|singleturn))?")
# How solved exemplars reach the model: all in the one user message (dateeval's built-in tasks, lm-eval without a chat
# template), or as turns of a conversation (lm-eval's --fewshot_as_multiturn, on whenever --apply_chat_template is).
SINGLE_TURN, MULTI_TURN = "single-turn", "multi-turn"
FEWSHOT_FORMATS = (SINGLE_TURN, MULTI_TURN)
# The few-shot format a name asks for, by its suffix.
TURNS = {"multiturn": MULTI_TURN, "singleturn": SINGLE_TURN}


def shots(name: str) -> int:
    """The number of exemplars a stored dataset name says (0 where it says none, or is no name of the grammar)."""
    match = NAME.fullmatch(name)
    return int(match["shots"] or 0) if match else 0


def says_cot(name: str) -> bool:
    """Whether a stored dataset name says chain of thought (``_cot``)."""
    match = NAME.fullmatch(name)
    return bool(match and match["cot"])
