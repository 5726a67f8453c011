"""Every explorer page through Streamlit's AppTest: on the demo, on an empty store, and reacting to widgets."""

import html
import json
import re
import time

import pytest
from streamlit.testing.v1 import AppTest

from conftest import ROOT

PAGES = ["pages/overview.py", "pages/curves.py", "pages/leaderboard.py", "pages/flips.py", "pages/factors.py", "pages/prompt.py", "pages/run.py"]


@pytest.fixture
def app(tmp_path, monkeypatch):
    monkeypatch.setenv("DATEEVAL_STORE", str(tmp_path / "results"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def open_page(page: str, store: str = "Built-in demo") -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.run()
        at.switch_page(page).run()
        if store != "Built-in demo" and any(box.key == "store_widget" for box in at.selectbox):
            at.selectbox(key="store_widget").set_value(store).run()
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
    if page in ("pages/overview.py", "pages/curves.py", "pages/leaderboard.py", "pages/flips.py", "pages/factors.py"):
        assert any("No results yet" in info.value for info in at.info)


def test_overview_lists_every_demo_entry(app):
    table = app("pages/overview.py").dataframe[0].value
    assert len(table) >= 3 and table["n_dates"].max() >= 300


def test_curves_metric_switch_changes_the_figure(app):
    at = app("pages/curves.py")
    accuracy = at.get("plotly_chart")[0].proto.spec
    at.radio[0].set_value("ece").run()
    ece = at.get("plotly_chart")[0].proto.spec
    assert "Accuracy by date" in accuracy and "ECE by date" in ece


def test_leaderboard_second_date_changes_the_board(app):
    at = app("pages/leaderboard.py")
    second = at.selectbox(key="board_second")
    last = second.options[-1]
    second.set_value(last).run()
    assert not at.exception
    caption = next(c.value for c in at.caption if "change position between" in c.value)
    assert caption.endswith(f"and {last} (highlighted).")


def test_flips_checkbox_changes_the_list(app):
    at = app("pages/flips.py")
    only_flipping = len(at.dataframe[1].value)
    at.checkbox[0].uncheck().run()
    assert len(at.dataframe[1].value) >= only_flipping and len(at.dataframe[1].value) == 20


def test_prompt_dates_change_the_prompt(app, templates_dir):
    at = app("pages/prompt.py")
    at.radio[0].set_value("A template file").run()
    files = at.selectbox(key="template_file")
    files.set_value(next(o for o in files.options if "Llama-3.1-8B" in o)).run()
    assert any("variable" in info.value and "date_string" in info.value for info in at.info)
    shown = " ".join(m.value for m in at.markdown)
    assert "<mark" in shown  # the differing characters are highlighted
    plain = re.sub(r"<[^>]+>", "", shown)
    assert "Today Date: 01 Jan 2024" in plain and "Today Date: 26 Jul 2024" in plain


def test_run_page_starts_a_background_sweep_and_reports_errors(app, data_dir, tmp_path):
    at = app("pages/run.py")
    at.text_input[0].set_value("no-such-model")
    at.button[0].click().run()
    for _ in range(60):
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
    assert {"date", "precision"} <= set(factors["factor"])
    before = at.get("plotly_chart")[0].proto.spec
    at.radio(key="factors-metric").set_value("ece").run()
    assert "Accuracy" in before and "ECE" in at.get("plotly_chart")[0].proto.spec
    budget = at.dataframe[-1].value
    at.slider[0].set_value(0.05).run()
    assert not at.dataframe[-1].value.equals(budget) or budget["delta_within"].eq(1).all()


def test_overview_shows_open_ended_metrics(app):
    table = app("pages/overview.py").dataframe[0].value.set_index("dataset")
    assert {"gsm8k", "humaneval", "mmlu_cot", "wmt16_en_de"} <= set(table.index)
    assert table.loc["wmt16_en_de", "bleu_delta"] >= 0 and table.loc["humaneval", "accuracy_max"] <= 100


def test_curves_offer_the_dataset_metrics(app):
    at = app("pages/curves.py")
    at.sidebar.selectbox(key="dataset").set_value("wmt16_en_de").run()
    assert at.radio[0].options == ["BLEU", "chrF"] and "BLEU by date" in at.get("plotly_chart")[0].proto.spec
    at.sidebar.selectbox(key="dataset").set_value("humaneval").run()
    assert at.radio[0].options == ["pass@1 (%)"]


@pytest.mark.parametrize("dataset", ["gsm8k", "humaneval", "mmlu_cot", "wmt16_en_de"])
def test_flips_show_two_dates_outputs_side_by_side(app, dataset):
    at = app("pages/flips.py")
    at.sidebar.selectbox(key="dataset").set_value(dataset).run()
    at.checkbox[0].uncheck().run()
    assert not at.exception and not at.error
    flips = at.dataframe[-1].value
    assert len(flips) >= 16 and "changes" in flips
    at.selectbox(key="output_b").set_value(at.selectbox(key="output_b").options[-1]).run()
    shown = " ".join(m.value for m in at.markdown)
    assert "<pre" in shown and ("Identical for the first" in " ".join(c.value for c in at.caption) or "identical outputs" in " ".join(s.value for s in at.success))
    assert any(word in shown for word in ("Reference", "```python", "correct", "Source (English)"))  # the item's own text


def test_prompt_page_renders_a_real_benchmark_item(app, data_dir, monkeypatch):
    monkeypatch.setenv("DATEEVAL_DATA_DIR", str(data_dir))
    at = app("pages/prompt.py")
    at.toggle[0].set_value(True).run()
    plain = re.sub(r"<[^>]+>", "", " ".join(m.value for m in at.markdown))
    assert "Janet" in plain and "Today Date: 01 Jan 2024" in plain  # GSM8K's first problem, dated
    next(box for box in at.text_input if box.label == "Dataset").set_value("mmlu_5shot").run()
    plain = re.sub(r"<[^>]+>", "", " ".join(m.value for m in at.markdown))
    assert plain.count("Answer: ") >= 5 and not at.error


def _shown(at: AppTest) -> str:
    """Every text the page shows, in any element."""
    elements = [*at.markdown, *at.code, *at.info, *at.error, *at.caption, *at.text, *at.exception]
    return " ".join(str(getattr(element, "value", None) or getattr(element, "message", "")) for element in elements)


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
        assert at.error and ("is not a chat template" in at.error[0].value or "holds no chat template" in at.error[0].value)
        assert "root:x:0:0" not in _shown(at)
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}\n{% endfor %}", "bos_token": "<s>"}))
    at.text_input(key="template_path").set_value(str(model)).run()
    assert not at.error and "<s>Today Date: 01 Jan 2024" in html.unescape(re.sub(r"<[^>]+>", "", _shown(at)))


def test_prompt_page_takes_an_uploaded_template(app, templates_dir):
    at = _template_by(app("pages/prompt.py"), "upload...")
    llama = (templates_dir / "meta-llama__Llama-3.1-8B-Instruct.jinja").read_bytes()
    at.file_uploader(key="template_upload").set_value(("llama.jinja", llama, "text/plain")).run()
    assert not at.error and any("date_string" in info.value for info in at.info)
    at.file_uploader(key="template_upload").set_value(("passwd.json", b'{"root": "x:0:0"}', "application/json")).run()
    assert at.error and "is not a chat template" in at.error[0].value and "x:0:0" not in _shown(at)
