"""Prompt: what the model really sees on two dates, and how its template injects the date."""

import datetime as dt
from pathlib import Path

import streamlit as st

from dateeval import explorer, plots
from dateeval.explorer import sent, viewstate
from dateeval.conditions import Condition
from dateeval.errors import DateEvalError
from dateeval.metrics import counted
from dateeval.prompting import POSITIONS, ChatTemplate, DateInjection

st.title("The prompt each model really sees")
explorer.app_settings()
explorer.intro(
    "Chat templates differ in how they date a prompt: some set a variable (Llama 3.1's fixed '26 Jul 2024'), some read the "
    "machine's clock (GPT-OSS), most have none, and then the date comes from whoever builds the system message (API "
    "providers, or dateeval here). Pick a template, two dates and a message (your own or a real benchmark item): the "
    "characters that differ are highlighted. Over a chat endpoint, see what dateeval sends and what the server adds."
)
templates_dir = Path(explorer.templates_dir())
files = sorted(templates_dir.glob("*.jinja")) if templates_dir.is_dir() else []
OTHER, UPLOAD = "other path...", "upload..."
KNOWN, UNKNOWN = "the template above (the model's own, as vLLM or dateeval serve apply it)", "unknown (an API provider)"
# Llama's templates start with the BOS token; a bare .jinja names none (a tokenizer_config.json brings its own).
BOS = "<|begin_of_text|>"


def chosen_template() -> ChatTemplate | None:
    """A shared template, one at a path, or an uploaded one; only chat templates are read (see ``template_file``)."""
    if not files:
        st.warning(
            f"No .jinja templates in {templates_dir}: set the chat templates folder in the sidebar, or give a path or an upload."
        )
    choice = st.selectbox(
        "File", [str(f) for f in files] + [OTHER, UPLOAD], format_func=lambda p: Path(p).name, key="template_file"
    )
    if choice == UPLOAD:
        upload = st.file_uploader(
            "A .jinja file or a tokenizer_config.json", type=["jinja", "json"], key="template_upload"
        )
        return (
            ChatTemplate.from_bytes(upload.getvalue(), upload.name, name=Path(upload.name).stem, bos_token=BOS)
            if upload
            else None
        )
    path = (
        st.text_input("Path to a .jinja file, a tokenizer_config.json or a model folder", key="template_path")
        if choice == OTHER
        else choice
    )
    return ChatTemplate.from_file(path, bos_token=BOS) if path else None


LOWEST, HIGHEST = dt.date(1900, 1, 1), dt.date(2100, 12, 31)  # the date pickers' range


def linked_day(text: str) -> dt.date:
    """A date from a link, refused with one line when the pickers cannot show it (Streamlit would raise instead)."""
    day = dt.date.fromisoformat(text)
    if not LOWEST <= day <= HIGHEST:
        raise DateEvalError(
            f"The link's date {day} is outside the dates this page shows ({LOWEST} to {HIGHEST}): showing the default instead."
        )
    return day


SOURCES = ["Default model (SmolLM2-135M-Instruct)", "A template file"]
viewstate.seed("source", SOURCES, SOURCES[0])
source = st.radio("Template", SOURCES, horizontal=True, key="source")
viewstate.publish("source", source)
try:
    if source.startswith("Default"):

        @st.cache_resource(show_spinner="Loading the default model's tokenizer...")
        def default_template() -> tuple[ChatTemplate, object]:
            from dateeval.models import load_light_tokenizer, resolve

            tokenizer = load_light_tokenizer(
                resolve("smollm2-135m")
            )  # the tokenizer alone: the weights are not converted
            return ChatTemplate.from_file(tokenizer.folder), tokenizer

        template, tokenizer = default_template()
    else:
        template, tokenizer = chosen_template(), None
    if template is None:
        st.stop()
    st.info(f"This template {template.support.describe()}.")
    left, right = st.columns(2)
    for key, default in (("first", dt.date(2024, 1, 1)), ("second", dt.date(2024, 7, 26))):
        viewstate.seed_value(key, default, linked_day)
    first = left.date_input("First date", min_value=LOWEST, max_value=HIGHEST, key="first")
    second = right.date_input("Second date", min_value=LOWEST, max_value=HIGHEST, key="second")
    viewstate.seed_value("system", "You are a helpful assistant.", str)
    system = st.text_input("System message", key="system")
    viewstate.seed_value("real_item", "dataset" in st.query_params, lambda text: text == "True")
    real_item = st.toggle(
        "Use a real benchmark item (the exact user message a sweep sends, few-shot exemplars included)", key="real_item"
    )
    for key, value in (("first", first), ("second", second), ("system", system), ("real_item", real_item)):
        viewstate.publish(key, value)
    if real_item:
        viewstate.seed_value("dataset", "gsm8k", str)
        name = st.text_input(
            "Dataset",
            key="dataset",
            help="e.g. mmlu, mmlu_5shot, arc_challenge_cot, gsm8k_5shot, humaneval, wmt16_en_de",
        )
        explorer.check_offered(name.strip())
        task = explorer.task_for(name.strip(), explorer.data_dir())
        ids = [item.id for item in task.items]
        if (
            viewstate.linked("question") and st.query_params["question"] in ids
        ):  # a question opened from Flips, by its id
            st.session_state["item"] = ids.index(st.query_params["question"])
        viewstate.seed_value("item", 0, int)
        number = st.number_input("Item number", min_value=0, key="item")
        viewstate.publish("dataset", name)
        viewstate.publish("item", int(number))
        item = task.items[min(int(number), len(task.items) - 1)]
        viewstate.publish("question", item.id)
        messages = task.prompt(
            item, Condition(date_mode="none", system_prompt=system)
        ).messages  # every turn (multi-turn few-shot too)
        st.caption(f"{item.id} ({counted(len(task.items), 'item')})")
    else:
        user = st.text_area(
            "User message",
            "The following is a multiple-choice question. Reply with the letter of the correct answer.\n\nWhat is 2+2?\nA. 3\nB. 4\nAnswer:",
        )
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    with st.expander("Injection settings (templates without a date of their own)"):
        line = st.text_input("Date line", "Today Date: {date}")
        fmt = st.text_input("Date format (strftime)", "%d %b %Y")
        position = st.selectbox("Position", POSITIONS)
    injection = DateInjection(line=line, format=fmt, position=position)
    mode = st.radio("Sent to", list(sent.API_MODES), format_func=sent.API_MODES.get, key="api_mode")
    server = (
        template
        if mode != "completions"
        and st.radio("The server's chat template", [KNOWN, UNKNOWN], key="server_template") == KNOWN
        else None
    )
    requests = [sent.request(mode, template, messages, day, injection, server) for day in (first, second)]
    bare = template.render(messages, mode="none").text
except DateEvalError as error:
    st.error(str(error))
    st.stop()
special = tokenizer.all_special_tokens if tokenizer is not None else [BOS]


def side_by_side(texts: list[str], what: str, tokens: bool) -> None:
    """Two texts in the date columns, the characters that differ highlighted, with their lengths."""
    a, b = plots.highlighted_diff(*texts, special=special)
    st.caption(what)
    columns = st.columns(2)
    for column, shown, text in zip(columns, (a, b), texts):
        column.html(shown)
        count = len(tokenizer.encode(text, add_special_tokens=False)) if tokens and tokenizer is not None else None
        column.caption(f"{count} tokens" if count is not None else f"{len(text)} characters")


st.info(sent.explain(mode, server))
if mode == "completions":
    side_by_side(
        [r.sent for r in requests],
        "Exactly the text the model reads: whitespace kept, line ends marked ↵, special tokens boxed, "
        "the characters that differ highlighted.",
        tokens=True,
    )
else:
    st.subheader("What dateeval sends")
    side_by_side(
        [r.sent for r in requests],
        "The messages of the request (JSON), the characters that differ highlighted.",
        tokens=False,
    )
    st.subheader("What the server adds")
    if server is None:
        st.warning("Unknown: the server applies its own chat template around these messages, which we cannot see.")
    else:
        side_by_side(
            [r.server for r in requests],
            "The text the model reads after the server applies its template today.",
            tokens=True,
        )
with st.expander("The same template with no date (the no-date baseline)"):
    st.code(bare, language=None)
