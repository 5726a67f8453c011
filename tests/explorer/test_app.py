"""Every explorer page through Streamlit's AppTest: on the demo, on an empty store, and reacting to widgets."""

import datetime as dt
import html
import json
import re
import time

import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

PAGES = [
    "pages/overview.py",
    "pages/curves.py",
    "pages/leaderboard.py",
    "pages/robust.py",
    "pages/flips.py",
    "pages/factors.py",
    "pages/prompt.py",
    "pages/run.py",
]


@pytest.fixture
def app(tmp_path, monkeypatch):
    monkeypatch.setenv("DATEEVAL_STORE", str(tmp_path / "results"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def open_page(page: str, store: str = "Built-in demo") -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.run()
        at.switch_page(page).run()
        if store != "Built-in demo":
            at.sidebar.selectbox(key="store").set_value({"My results": "mine"}[store]).run()
        assert not at.exception, [e.message for e in at.exception]
        return at

    return open_page


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_on_the_demo(app, page):
    at = app(page)
    assert at.title and not at.error


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_on_an_empty_store(app, page):
    at = app(page, store="My results")
    assert not at.error
    if page in (
        "pages/overview.py",
        "pages/curves.py",
        "pages/leaderboard.py",
        "pages/robust.py",
        "pages/flips.py",
        "pages/factors.py",
    ):
        assert any("No results yet" in info.value for info in at.info)


def _table(at: AppTest, dataset: str):
    """The Overview's table of one dataset (one table per dataset, under its heading)."""
    headings = [h.value for h in at.subheader]
    tables = [
        table.value for table in at.dataframe if "Model" in table.value
    ]  # the paper's figures beside each have none
    return tables[headings.index(dataset)]


def test_overview_lists_every_demo_entry(app):
    at = app("pages/overview.py")
    table = _table(at, "mmlu")
    assert len(table) >= 3 and table["Dates"].max() >= 300 and "Accuracy delta (worst to best) (pp)" in table


def test_overview_headline_leads_with_the_verdict_against_the_largest_of_k(app):
    """The headline's first words are the verdict; its delta and chance band are in percentage points at the precision
    20 questions allow, tested against the null of the largest of the K entries it was picked from, and no interval
    that excludes zero by construction (a worst-to-best delta is never negative) is shown."""
    at = app("pages/overview.py")
    headline = next(m.value for m in at.markdown if m.value.startswith("####"))
    assert re.match(r"#### (Within|Beyond) chance \(p = \d\.\d{3}\)", headline), headline
    assert "largest of 6 model x dataset deltas" in headline and "95% interval" not in headline
    assert (
        re.search(r"by up to \*\*\d+ pp\*\*", headline)
        and "%" not in headline.split("chance alone")[0].split("by up to")[1]
    )


def test_curves_metric_switch_changes_the_figure(app):
    at = app("pages/curves.py")
    accuracy = at.get("plotly_chart")[0].proto.spec
    at.selectbox(key="metric").set_value("ece").run()
    ece = at.get("plotly_chart")[0].proto.spec
    assert "Accuracy by date" in accuracy and "ECE by date" in ece


def test_leaderboard_second_date_changes_the_board(app):
    at = app("pages/leaderboard.py")
    second = at.date_input(key="b")
    last = second.max
    second.set_value(last).run()
    assert not at.exception
    caption = next(c.value for c in at.caption if "change position between" in c.value)
    assert caption.endswith(f"and {last} (highlighted).")


def _flips_table(at: AppTest):
    """The Flips page's list of questions (the regressions between two dates draw their tables above it)."""
    return next(table.value for table in at.dataframe if "Answer changes" in table.value)


def test_flips_checkbox_changes_the_list(app):
    at = app("pages/flips.py")
    only_flipping = len(_flips_table(at))
    at.selectbox(key="show").set_value("all").run()
    assert len(_flips_table(at)) >= only_flipping and len(_flips_table(at)) == 20
    assert at.dataframe[0].value["Confidence, consistent (%)"].between(0, 100).all()  # Table 7 in percent


def test_prompt_dates_change_the_prompt(app, templates_dir):
    at = app("pages/prompt.py")
    at.radio[0].set_value("A template file").run()
    files = at.selectbox(key="template_file")
    files.set_value(next(o for o in files.options if "Llama-3.1-8B" in o)).run()
    assert any("variable" in info.value and "date_string" in info.value for info in at.info)
    shown = _html(at)
    assert "<mark" in shown  # the differing characters are highlighted
    plain = re.sub(r"<[^>]+>", "", shown)
    assert "Today Date: 01 Jan 2024" in plain and "Today Date: 26 Jul 2024" in plain


def test_run_page_starts_a_background_sweep_and_reports_errors(app, data_dir, tmp_path):
    at = app("pages/run.py")
    at.text_input[0].set_value("no-such-model")
    at.button[0].click().run()
    for _ in range(240):  # a busy machine loads the sweep's imports slowly
        at.run()
        if at.error:
            break
        time.sleep(0.5)
    assert "unknown model" in at.error[0].value
    at.text_input[0].set_value("smollm2-135m")
    at.text_input[1].set_value(str(data_dir))
    at.number_input[0].set_value(2)
    at.date_input[1].set_value(at.date_input[0].value)
    at.button[0].click().run()
    for _ in range(240):
        at.run()
        if at.success:
            break
        time.sleep(0.5)
    assert at.success, [e.value for e in at.error]
    assert list((tmp_path / "results").rglob("*.parquet"))


def test_factors_page_shows_precision_and_reacts_to_the_metric(app):
    at = app("pages/factors.py")
    factors = at.dataframe[0].value
    assert {"date", "precision"} <= set(factors["Factor"])
    before = at.get("plotly_chart")[0].proto.spec
    at.selectbox(key="factor_metric").set_value("ece").run()
    assert "Accuracy" in before and "ECE" in at.get("plotly_chart")[0].proto.spec
    budget = at.dataframe[-1].value
    assert at.slider[0].value == 20  # a percentage, shown as one ("20%"), not 0.20 beside a caption in %
    at.slider[0].set_value(5).run()
    assert not at.dataframe[-1].value.equals(budget) or budget["Delta within tolerance (%)"].eq(100).all()


def test_overview_shows_open_ended_metrics(app):
    at = app("pages/overview.py")
    assert {"gsm8k", "humaneval", "mmlu_cot", "wmt16_en_de"} <= {h.value for h in at.subheader}
    assert (_table(at, "wmt16_en_de")["BLEU delta (worst to best)"] >= 0).all() and (
        _table(at, "humaneval")["pass@1 max (%)"] <= 100
    ).all()
    assert "BLEU min" not in _table(at, "mmlu")  # no empty columns for metrics a dataset lacks


def test_curves_offer_the_dataset_metrics(app):
    at = app("pages/curves.py")
    at.sidebar.selectbox(key="dataset").set_value("wmt16_en_de").run()
    assert (
        at.selectbox(key="metric").options == ["BLEU", "chrF"]
        and "BLEU by date" in at.get("plotly_chart")[0].proto.spec
    )
    at.sidebar.selectbox(key="dataset").set_value("humaneval").run()
    assert at.selectbox(key="metric").options == ["pass@1 (%)"]


@pytest.mark.parametrize("dataset", ["gsm8k", "humaneval", "mmlu_cot", "wmt16_en_de"])
def test_flips_show_two_dates_outputs_side_by_side(app, dataset):
    at = app("pages/flips.py")
    at.sidebar.selectbox(key="dataset").set_value(dataset).run()
    at.selectbox(key="show").set_value("all").run()
    assert not at.exception and not at.error
    flips = next(table.value for table in at.dataframe if "Answer changes" in table.value)
    assert len(flips) >= 16
    at.date_input(key="output_b").set_value(at.date_input(key="output_b").max).run()
    assert not at.exception and not at.error
    assert "<pre" in _html(at) and (
        "Identical for the first" in " ".join(c.value for c in at.caption)
        or "identical outputs" in " ".join(s.value for s in at.success)
    )
    shown = " ".join(m.value for m in at.markdown)
    assert any(
        word in shown for word in ("Reference", "```python", "correct", "Source (English)")
    )  # the item's own text


def test_prompt_page_renders_a_real_benchmark_item(app, data_dir, monkeypatch):
    monkeypatch.setenv("DATEEVAL_DATA_DIR", str(data_dir))
    at = app("pages/prompt.py")
    at.toggle[0].set_value(True).run()
    plain = re.sub(r"<[^>]+>", "", _html(at))
    assert "Janet" in plain and "Today Date: 01 Jan 2024" in plain  # GSM8K's first problem, dated
    next(box for box in at.text_input if box.label == "Dataset").set_value("mmlu_5shot").run()
    plain = re.sub(r"<[^>]+>", "", _html(at))
    assert plain.count("Answer: ") >= 5 and not at.error


def test_prompt_page_shows_what_a_chat_endpoint_sends_and_what_the_server_adds(app):
    at = app("pages/prompt.py")
    at.radio(key="api_mode").set_value("chat").run()
    assert not at.error and {"What dateeval sends", "What the server adds"} <= {h.value for h in at.subheader}
    blocks = [html.unescape(re.sub(r"<[^>]+>", "", element.proto.body)) for element in at.get("html")]
    assert len(blocks) == 4 and all(
        '"role": "system"' in b and "<|im_start|>" not in b for b in blocks[:2]
    )  # the messages, as JSON
    assert (
        "Today Date: 01 Jan 2024" in blocks[0] and "Today Date: 26 Jul 2024" in blocks[1]
    )  # our date line, in the messages
    assert (
        all(b.startswith("<|im_start|>system") for b in blocks[2:]) and "Today Date: 26 Jul 2024" in blocks[3]
    )  # SmolLM2's template around them
    at.radio(key="server_template").set_value(at.radio(key="server_template").options[1]).run()
    assert any("cannot see" in w.value for w in at.warning) and any(
        "may add a date of its own" in i.value for i in at.info
    )
    at.radio(key="api_mode").set_value("server-clock").run()
    assert "Today Date" not in _html(at) and any("provider may inject a date of its own" in i.value for i in at.info)


def test_prompt_page_renders_a_clock_template_as_the_server_would_today(app):
    at = app("pages/prompt.py")
    at.radio[0].set_value("A template file").run()
    at.selectbox(key="template_file").set_value(
        next(o for o in at.selectbox(key="template_file").options if "gpt-oss" in o)
    ).run()
    at.radio(key="api_mode").set_value("server-clock").run()
    today = dt.datetime.now().date().isoformat()
    assert not at.error and today in _html(at) and any("strftime_now" in i.value for i in at.info)


def _html(at: AppTest) -> str:
    """The HTML blocks a page shows (prompts and outputs, exactly as written)."""
    return " ".join(element.proto.body for element in at.get("html"))


def _shown(at: AppTest) -> str:
    """Every text the page shows, in any element."""
    elements = [*at.markdown, *at.code, *at.info, *at.error, *at.caption, *at.text, *at.exception]
    return " ".join(
        str(getattr(element, "value", None) or getattr(element, "message", "")) for element in elements
    ) + _html(at)


def _template_by(at: AppTest, choice: str) -> AppTest:
    at.radio[0].set_value("A template file").run()
    at.selectbox(key="template_file").set_value(choice).run()
    return at


def test_prompt_page_reads_only_chat_templates(app, tmp_path):
    at = _template_by(app("pages/prompt.py"), "other path...")
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    for path in ("/etc/passwd", str(secret), str(tmp_path)):
        at.text_input(key="template_path").set_value(path).run()
        assert at.error and (
            "is not a chat template" in at.error[0].value or "holds no chat template" in at.error[0].value
        )
        assert "root:x:0:0" not in _shown(at)
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer_config.json").write_text(
        json.dumps(
            {"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}\n{% endfor %}", "bos_token": "<s>"}
        )
    )
    at.text_input(key="template_path").set_value(str(model)).run()
    assert not at.error and "<s>Today Date: 01 Jan 2024" in html.unescape(re.sub(r"<[^>]+>", "", _shown(at)))


def test_prompt_page_takes_an_uploaded_template(app, templates_dir):
    at = _template_by(app("pages/prompt.py"), "upload...")
    llama = (templates_dir / "meta-llama__Llama-3.1-8B-Instruct.jinja").read_bytes()
    at.file_uploader(key="template_upload").set_value(("llama.jinja", llama, "text/plain")).run()
    assert not at.error and any("date_string" in info.value for info in at.info)
    at.file_uploader(key="template_upload").set_value(("passwd.json", b'{"root": "x:0:0"}', "application/json")).run()
    assert at.error and "is not a chat template" in at.error[0].value and "x:0:0" not in _shown(at)


def test_the_store_choice_sticks_across_pages(app):
    at = app("pages/overview.py", store="My results")
    for page in PAGES[1:] + PAGES[:1]:
        at.switch_page(page).run()
        assert at.sidebar.selectbox(key="store").value == "mine" and at.query_params["store"] in ("mine", ["mine"]), (
            page
        )


def test_query_parameters_open_the_same_view(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update(
        {
            "store": "demo",
            "dataset": "gsm8k",
            "show": "all",
            "question": "gsm8k/163fb24c18ba",
            "from": "2024-02-01",
            "to": "2024-06-30",
        }
    )
    at.run()
    at.switch_page("pages/flips.py").run()
    assert not at.exception and at.sidebar.selectbox(key="dataset").value == "gsm8k"
    assert at.selectbox(key="question").value == "gsm8k/163fb24c18ba" and at.sidebar.date_input(key="dates").value == (
        dt.date(2024, 2, 1),
        dt.date(2024, 6, 30),
    )
    at.selectbox(key="show").set_value("changes").run()
    assert at.query_params["show"] in ("changes", ["changes"]) and at.query_params["dataset"] in (
        "gsm8k",
        ["gsm8k"],
    )  # the address follows the view


def test_cot_flips_show_answers_and_confidence_not_an_empty_chart(app):
    """Chain of thought has letters' probabilities only where an answer was parsed: the question shows its answer and
    confidence per date, and what the model predicted next to the correct option."""
    at = app("pages/flips.py")
    at.sidebar.selectbox(key="dataset").set_value("mmlu_cot").run()
    at.selectbox(key="show").set_value("all").run()
    answers = next(table.value for table in at.dataframe if "Answer" in table.value and "Confidence (%)" in table.value)
    assert len(answers) >= 2 and any(
        caption.value.startswith("Correct option:") and "Predicted:" in caption.value for caption in at.caption
    )


def test_flips_finds_a_question_by_its_text(app, data_dir, monkeypatch):
    monkeypatch.setenv("DATEEVAL_DATA_DIR", str(data_dir))
    at = app("pages/flips.py")
    at.sidebar.selectbox(key="dataset").set_value("gsm8k").run()
    at.selectbox(key="show").set_value("all").run()
    everything = next(table.value for table in at.dataframe if "Answer changes" in table.value)
    at.text_input(key="find").set_value("Janet").run()
    found = next(table.value for table in at.dataframe if "Answer changes" in table.value)
    assert 0 < len(found) < len(everything) and at.query_params["find"] in ("Janet", ["Janet"])


def test_prompt_page_choices_live_in_the_url(monkeypatch):
    """A link from a curve's point opens the Prompt page on that date (and a shared link restores the item)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"store": "demo", "first": "2024-03-14", "second": "2024-11-05", "system": "Be brief."})
    at.run()
    at.switch_page("pages/prompt.py").run()
    assert (
        not at.exception
        and at.date_input(key="first").value == dt.date(2024, 3, 14)
        and at.date_input(key="second").value == dt.date(2024, 11, 5)
    )
    assert at.text_input(key="system").value == "Be brief." and "Today Date: 14 Mar 2024" in re.sub(
        r"<[^>]+>", "", _shown(at)
    )


def test_switching_dataset_keeps_each_datasets_own_range_and_entries(app):
    """A range or entries chosen on mmlu do not narrow gsm8k's view, and come back on returning to mmlu."""
    at = app("pages/curves.py")
    at.sidebar.selectbox(key="dataset").set_value("mmlu").run()
    entries = at.sidebar.multiselect(key="entries").value  # every entry, as the page opens
    assert at.sidebar.multiselect(key="entries").options == [
        "bfloat16, cpu",
        "float16, cpu",
        "float32, cpu",
    ]  # chips tell them apart
    assert at.sidebar.multiselect(key="entries").label == "Models (smollm2-135m)"
    at.sidebar.multiselect(key="entries").set_value(entries[:1]).run()
    at.sidebar.date_input(key="dates").set_value((dt.date(2024, 1, 1), dt.date(2024, 1, 31))).run()
    at.sidebar.selectbox(key="dataset").set_value("gsm8k").run()
    assert not at.exception and at.sidebar.date_input(key="dates").value == (dt.date(2024, 1, 1), dt.date(2024, 12, 1))
    assert len(at.sidebar.multiselect(key="entries").value) == len(at.sidebar.multiselect(key="entries").options)
    at.sidebar.selectbox(key="dataset").set_value("mmlu").run()
    assert at.sidebar.multiselect(key="entries").value == entries[:1]
    assert at.sidebar.date_input(key="dates").value == (dt.date(2024, 1, 1), dt.date(2024, 1, 31))
