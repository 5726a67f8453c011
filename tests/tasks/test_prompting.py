"""Date control on every real chat template in ../shared/templates (see its PROVENANCE.md)."""

import datetime as dt

import pytest

from dateeval.errors import DateEvalError
from dateeval.prompting import ChatTemplate, DateInjection

MESSAGES = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is 2+2?"}]
DAY, OTHER = dt.date(2024, 3, 14), dt.date(2024, 11, 2)
# What PROVENANCE.md says about each template's date.
EXPECTED_KIND = {
    "meta-llama__Llama-3.1-8B-Instruct": ("variable", "14 Mar 2024"),
    "meta-llama__Llama-3.1-70B-Instruct": ("variable", "14 Mar 2024"),
    "openai__gpt-oss-120b": ("clock", "2024-03-14"),
    "openai__gpt-oss-20b": ("clock", "2024-03-14"),
    "openai__gpt-oss.variant-xinference": ("clock", "2024-03-14"),
}


def _templates(templates_dir):
    paths = sorted(templates_dir.glob("*.jinja"))
    assert len(paths) >= 13
    return [ChatTemplate.from_file(path, bos_token="<s>", eos_token="</s>") for path in paths]


def test_every_template_kind(templates_dir):
    for template in _templates(templates_dir):
        kind, _ = EXPECTED_KIND.get(template.name, ("none", None))
        assert template.support.kind == kind, template.name


def test_every_template_renders_the_condition_date_and_nothing_else_changes(templates_dir):
    for template in _templates(templates_dir):
        _, date_text = EXPECTED_KIND.get(template.name, ("none", "14 Mar 2024"))
        first = template.render(MESSAGES, mode="date", day=DAY)
        second = template.render(MESSAGES, mode="date", day=OTHER)
        assert first.date_text == date_text and date_text in first.text, template.name
        assert first.text != second.text, template.name
        # Only the date differs between two dates.
        assert first.text.replace(first.date_text, "<D>") == second.text.replace(second.date_text, "<D>"), template.name
        # The machine's clock never leaks in.
        assert dt.date.today().strftime("%Y-%m-%d") not in first.text, template.name


def test_no_date_removes_every_date_and_keeps_the_rest(templates_dir):
    for template in _templates(templates_dir):
        dated = template.render(MESSAGES, mode="date", day=DAY)
        bare = template.render(MESSAGES, mode="none")
        assert bare.date_text is None
        assert dated.date_text not in bare.text and "2024" not in bare.text.replace("2024-06", ""), template.name
        assert "You are a helpful assistant." in bare.text and "What is 2+2?" in bare.text
        # The no-date prompt is the dated one with the date's line removed.
        assert len(bare.text) < len(dated.text)


def test_llama_no_date_keeps_the_cutoff_line(templates_dir):
    template = ChatTemplate.from_file(templates_dir / "meta-llama__Llama-3.1-8B-Instruct.jinja")
    bare = template.render(MESSAGES, mode="none").text
    assert "Cutting Knowledge Date: December 2023\n\nYou are a helpful assistant." in bare
    assert "Today Date" not in bare


def test_template_defaults(templates_dir):
    llama = ChatTemplate.from_file(templates_dir / "meta-llama__Llama-3.1-8B-Instruct.jinja")
    assert llama.render(MESSAGES, mode="default").date_text == "26 Jul 2024"
    assert "Today Date: 26 Jul 2024" in llama.render(MESSAGES, mode="default").text
    gpt = ChatTemplate.from_file(templates_dir / "openai__gpt-oss-120b.jinja")
    today = dt.date.today().isoformat()
    assert f"Current date: {today}" in gpt.render(MESSAGES, mode="default").text
    smol = ChatTemplate.from_file(templates_dir / "HuggingFaceTB__SmolLM2-135M-Instruct.jinja")
    assert smol.render(MESSAGES, mode="default").text == smol.render(MESSAGES, mode="none").text


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        ("system_start", "<|im_start|>system\nToday Date: 14 Mar 2024\n\nYou are a helpful assistant.<|im_end|>"),
        ("system_end", "<|im_start|>system\nYou are a helpful assistant.\n\nToday Date: 14 Mar 2024<|im_end|>"),
        ("user_start", "<|im_start|>user\nToday Date: 14 Mar 2024\n\nWhat is 2+2?<|im_end|>"),
    ],
)
def test_injection_positions(templates_dir, position, expected):
    smol = ChatTemplate.from_file(templates_dir / "HuggingFaceTB__SmolLM2-135M-Instruct.jinja")
    assert expected in smol.render(MESSAGES, mode="date", day=DAY, injection=DateInjection(position=position)).text


def test_injection_format_and_line(templates_dir):
    phi = ChatTemplate.from_file(templates_dir / "microsoft__phi-4.jinja")
    injection = DateInjection(line="Current date: {date}", format="%Y-%m-%d")
    prompt = phi.render(MESSAGES, mode="date", day=DAY, injection=injection)
    assert prompt.date_text == "2024-03-14"
    assert (
        "<|im_start|>system<|im_sep|>Current date: 2024-03-14\n\nYou are a helpful assistant.<|im_end|>" in prompt.text
    )


def test_gemma_puts_the_injected_date_in_the_first_user_turn(templates_dir):
    gemma = ChatTemplate.from_file(templates_dir / "google__gemma-3-4b-it.jinja", bos_token="<bos>")
    text = gemma.render(MESSAGES, mode="date", day=DAY).text
    assert text.startswith(
        "<bos><start_of_turn>user\nToday Date: 14 Mar 2024\n\nYou are a helpful assistant.\n\nWhat is 2+2?"
    )


def test_matches_apply_chat_template_of_the_real_tokenizer(backend):
    template = backend.template
    messages = [{"role": "system", "content": "Today Date: 14 Mar 2024\n\nYou are a helpful assistant."}, MESSAGES[1]]
    expected = backend.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert template.render(MESSAGES, mode="date", day=DAY).text == expected


def test_custom_template_kinds():
    variable = ChatTemplate(
        "{% if not today is defined %}{% set today = '2024-07-26' %}{% endif %}Date {{ today }}|{{ messages[0]['content'] }}"
    )
    assert variable.support.kind == "variable" and variable.support.format == "%Y-%m-%d"
    assert variable.render([{"role": "user", "content": "q"}], mode="date", day=DAY).text == "Date 2024-03-14|q"
    clock = ChatTemplate("Now: {{ strftime_now('%B %d, %Y') }}. {{ messages[0]['content'] }}")
    assert clock.render([{"role": "user", "content": "q"}], mode="date", day=DAY).text == "Now: March 14, 2024. q"
    # A date in the middle of a sentence: only the date goes, the sentence stays.
    assert clock.render([{"role": "user", "content": "q"}], mode="none").text == "Now: . q"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"position": "middle"}, "unknown date position"),
        ({"line": "no placeholder"}, "placeholder"),
        ({"format": "%Q"}, None),
    ],
)
def test_bad_injection_settings(kwargs, message):
    if message is None:
        DateInjection(**kwargs)  # strftime accepts unknown directives on Linux; nothing to reject
        return
    with pytest.raises(DateEvalError, match=message):
        DateInjection(**kwargs)


def test_broken_template_is_one_clear_error():
    with pytest.raises(DateEvalError, match="does not parse"):
        _ = ChatTemplate("{% for x in %}").support


# Templates that would hang the process or fill the host's memory (issue 18): each stops with one error, fast and small.
HOSTILE_TEMPLATES = {
    "nested loops of 99,999": "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    "a string doubled with ~": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
    "a string doubled with +": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
    "a string doubled by replace": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s.replace('a', ns.s) %}{% endfor %}",
    "a list doubled, then joined": "{% set ns = namespace(l=['ab']) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|join }}",
    "a repeated string": "{{ 'a' * 10**10 }}",
    "a constant Jinja folds while the template is read": "{{ 'a'|center(10**10) }}{{ '%0999999999d' % 1 }}",
    "a format width": "{{ '{:>999999999}'.format(1) }}",
    "a padded method": "{{ messages[0].content.zfill(10**10) }}",
    "references written out": "{% set a = ['x' * 1000000] %}{% set b = [a, a, a, a, a, a, a, a, a, a] %}{{ [b, b, b, b, b, b, b, b, b, b] }}",
    "a set block of loops": "{% set x %}{% for i in range(99999) %}{% for j in range(99999) %}{{ '-' * 64 }}xxxx{% endfor %}{% endfor %}{% endset %}{{ x }}",
    "a macro doubling its argument": "{% macro f(s) %}{{ f(s ~ s) }}{% endmacro %}{{ f('ab') }}",
    "indented by a long string": "{{ ('a\\n' * 1000000)|indent('x' * 1000) }}",
    "a big integer": "{{ 7 ** 10000000 }}",
    "quadratic in the message": "{% for c in messages[-1].content %}{% for d in messages[-1].content %}{% endfor %}{% endfor %}",
}


@pytest.mark.parametrize("source", HOSTILE_TEMPLATES.values(), ids=HOSTILE_TEMPLATES.keys())
def test_templates_that_would_hang_or_fill_memory_stop_with_one_error(source):
    import resource
    import time

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    messages = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "x" * 5000}]
    with pytest.raises(DateEvalError, match=r"chat template hostile (stopped rendering|failed to render): "):
        ChatTemplate(source, name="hostile").render(messages, mode="date", day=DAY)
    assert time.monotonic() - started < 15  # the limit is 5 s; a loaded test machine gets slack
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 1_000_000  # KiB: under 1 GB more at the peak


def test_lipsum_is_not_offered():
    """Random text of any length: neither reproducible nor bounded."""
    with pytest.raises(DateEvalError, match="'lipsum' is undefined"):
        ChatTemplate("{{ lipsum(100000) }}", name="t").render(MESSAGES, mode="none")


def test_the_limits_leave_every_real_template_as_transformers_renders_it(templates_dir):
    """Guarded rendering is transformers' own environment, counted: the text is the same, for long prompts too."""
    from transformers.utils.chat_template_utils import render_jinja_template

    long = [
        MESSAGES[0],
        {"role": "user", "content": "word " * 200_000},
    ]  # a million characters: far past any context here
    for template in _templates(templates_dir):
        if template.support.kind == "clock":
            continue  # the real clock: rendered under a pinned one in every other test
        for messages in (MESSAGES, long):
            bare = render_jinja_template(
                [messages], chat_template=template.source, add_generation_prompt=True, bos_token="<s>", eos_token="</s>"
            )
            assert template.render(messages, mode="default").text == bare[0][0], template.name


def test_a_sparse_template_file_is_refused_unread(tmp_path):
    path = tmp_path / "tokenizer_config.json"
    with open(path, "wb") as handle:
        handle.truncate(2 * 2**30)
    with pytest.raises(DateEvalError, match="chat template file .* is over the 64 MiB a file may hold"):
        ChatTemplate.from_file(path)  # it read all 2 GB, then decoded them
