"""What the rendering limits cost: every shared chat template rendered bare (transformers' own environment) and guarded.

Every prompt of a sweep is rendered, so the limits of ``dateeval/prompting/render_limits.py``
must cost next to nothing. Both columns render the same messages through
transformers' ``render_jinja_template``; the guarded one compiles the template
in :class:`GuardedEnvironment` and renders it under the limits (sizing the
input, swapping transformers' compile and clock included), as ``ChatTemplate`` does.

    .venv/bin/python bench/render_limits.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformers.utils import chat_template_utils

from dateeval.prompting import render_limits
from dateeval.prompting import ChatTemplate, _rendering

TEMPLATES = Path(os.environ.get("DATEEVAL_SHARED", Path(__file__).resolve().parents[2] / "shared")) / "templates"
MESSAGES = [
    {"role": "system", "content": "Today Date: 14 Mar 2024\n\nYou are a helpful assistant."},
    {
        "role": "user",
        "content": "The following is a multiple-choice question. Reply with the letter of the correct answer.\n\n"
        "Which gas do plants take in?\nA. Oxygen\nB. Carbon dioxide\nC. Nitrogen\nD. Helium\nAnswer:",
    },
]


def _bare(template: ChatTemplate) -> str:
    return chat_template_utils.render_jinja_template(
        [MESSAGES],
        chat_template=template.source,
        add_generation_prompt=True,
        bos_token=template.bos_token,
        eos_token=template.eos_token,
    )[0][0]


def _guarded(template: ChatTemplate) -> str:
    compiled = render_limits.compile_template(template.source)
    with _rendering(None, template.source, compiled, (MESSAGES, template.bos_token, template.eos_token)):
        return _bare(template)


def _per_render(template: ChatTemplate, repeat: int, rounds: int = 9) -> tuple[float, float]:
    """Microseconds per render, bare and guarded: the fastest of ``rounds`` alternating rounds (a shared machine is noisy)."""
    best = {_bare: float("inf"), _guarded: float("inf")}
    for _ in range(rounds):
        for render, fastest in best.items():
            started = time.perf_counter()
            for _ in range(repeat):
                render(template)
            best[render] = min(fastest, (time.perf_counter() - started) / repeat * 1e6)
    return best[_bare], best[_guarded]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    print(f"{'template':45s} {'bare us':>8s} {'guarded us':>11s} {'overhead':>9s}")
    ratios = []
    for path in sorted(TEMPLATES.glob("*.jinja")):
        template = ChatTemplate.from_file(path, bos_token="<s>", eos_token="</s>")
        assert _bare(template) == _guarded(template), template.name
        bare, guarded = _per_render(template, args.repeat)
        ratios.append(guarded / bare)
        print(f"{template.name:45s} {bare:8.0f} {guarded:11.0f} {guarded / bare - 1:+9.1%}")
    print(f"median overhead {statistics.median(ratios) - 1:+.1%} over {len(ratios)} templates (same text from each)")


if __name__ == "__main__":
    main()
