"""Flips: which questions change answer when only the date changes (paper Table 7), and how generated outputs diverge (§5.3)."""

import datetime as dt
from dataclasses import replace

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from dateeval import explorer, plots
from dateeval.explorer import sent, viewstate
from dateeval.data.items import LABELS
from dateeval.errors import DateEvalError
from dateeval.metrics import counted
from dateeval.results import descriptive
from dateeval.results.readers import flips as flip_reads
from dateeval.schema import GENERATION_KINDS

st.title("Questions that flip with the date")
explorer.app_settings()
explorer.intro(
    "For each question: on how many dates the model is right, how often its answer changes from one date to the next, "
    "and its confidence. Fragile answers are the low-confidence ones (paper Table 7): accuracy alone hides them. Pick a "
    "question to read it, see its options' probabilities across the dates (two models side by side), and for generated "
    "answers read two dates' outputs side by side: where they first diverge is where the date started a different "
    "reasoning path (§5.3). Between two dates: the questions right on one and wrong on the other, every model's answers "
    "side by side."
)
_, chosen, selection = explorer.page_data(multi_entry=False)
generated = chosen["task"].isin(GENERATION_KINDS).any()  # by the rows' task kind: a user's own dataset too
store = explorer.current_store()
flips, table7 = explorer.flips(store, selection)
if flips.empty:
    st.info("No dated results for this selection.")
    st.stop()
if table7["consistent_confidence"].notna().any() or table7["inconsistent_confidence"].notna().any():
    st.subheader("Confidence of consistent vs inconsistent predictions (Table 7)")
    explorer.show_table(table7.drop(columns=["dataset"]), selection.dataset)


def answered(pred: object, parsed: object, right: bool) -> str:
    """One model's answer on one date as the regressions show it: the option's letter (a generated answer's parsed
    text on one line, cut at 40 characters), and whether it was right."""
    text = LABELS[int(pred)] if not pd.isna(pred) else "-" if pd.isna(parsed) else " ".join(str(parsed).split())
    return f"{text if len(text) <= 40 else text[:39] + '…'} {'✓' if right else '✗'}"


def sides(found: pd.DataFrame, a: dt.date, b: dt.date) -> pd.DataFrame:
    """Every model's answer on each date to the questions in ``found`` (one row per model and question)."""
    return pd.DataFrame(
        {
            "item_id": found["item_id"],
            "Model": found["entry"],
            str(a): [answered(*row) for row in zip(found["pred_a"], found["parsed_a"], found["correct_a"])],
            str(b): [answered(*row) for row in zip(found["pred_b"], found["parsed_b"], found["correct_b"])],
        }
    )


def prompt_link(label: str, item_id: str, **dates: str) -> None:
    """A link to the Prompt page on this store, dataset and question (``first``/``second``: the dates it compares)."""
    store = st.query_params.get("store", "demo")
    params = {"store": store, "real_item": "True", "dataset": selection.dataset, "question": item_id, **dates}
    st.page_link("pages/prompt.py", label=label, icon=":material/search:", query_params=params)


def prompt_text(item_id: str, system_prompt: str, day: dt.date) -> str:
    """What the sweep sent for the question on ``day``; the system message alone where the benchmark's text is not in
    the sidebar's data folder."""
    try:
        found = explorer.prompt_on(selection.dataset, explorer.data_dir(), item_id, system_prompt, day)
    except DateEvalError:
        found = None
    return found or sent.on_date([{"role": "system", "content": system_prompt}], day)


def perturbation(row: pd.Series, answers: pd.DataFrame, a: dt.date, b: dt.date) -> None:
    """One question as HELM shows a perturbation: the two dates' prompts, the characters that differ highlighted, and
    every model's answer on both dates."""
    texts = [prompt_text(row["item_id"], row[f"system_prompt_{side}"], day) for side, day in (("a", a), ("b", b))]
    for column, html, day in zip(st.columns(2), plots.highlighted_diff(*texts), (a, b)):
        column.markdown(f"**{day}**")
        column.html(html)
    carried = [str(row[f"date_text_{side}"]) for side in "ab"]
    if any(date_text not in text for date_text, text in zip(carried, texts)):
        st.caption(f"Shown with the default date line; the run's prompts carried the dates as {' and '.join(carried)}.")
    st.table(answers.drop(columns="item_id"), hide_index=True)
    prompt_link("The text the model reads on these two dates (Prompt)", row["item_id"], first=str(a), second=str(b))


def between_dates() -> None:
    """Regressions between two dates (defaults: the model's best and worst in the selected range): the questions it
    answers right on date A and wrong on date B, or the reverse, with every model's answers side by side, and one
    question at a time in full (a page that drew every question's prompts and tables took a second longer to show)."""
    dated = chosen[(chosen["factor"] == "date") & selection.period.holds(chosen["date"])]
    days = sorted({dt.date.fromisoformat(str(day)) for day in dated["date"]})
    if len(days) < 2 or dated["accuracy"].isna().all():  # right and wrong need a grade (a translation has none)
        return
    best, worst = (
        dt.date.fromisoformat(str(dated.loc[pick(), "date"]))
        for pick in (dated["accuracy"].idxmax, dated["accuracy"].idxmin)
    )
    st.subheader("Regressions between two dates")
    st.caption(
        f"The date as a perturbation: the questions {selection.entries[0]} answers right on date A and wrong on date B, "
        "or the reverse, with the two prompts (the characters that differ highlighted) and every model's answers on "
        "both dates. A and B start at its best and worst date."
    )
    left, right = st.columns(2)
    a = explorer.date_picker("Date A", days, "between_a", best if best != worst else days[0], where=left)
    b = explorer.date_picker("Date B", days, "between_b", worst if best != worst else days[-1], where=right)
    found = explorer.between(store, selection.dataset, a, b)
    mine = found[found["entry"] == selection.entries[0]]
    counts = mine["change"].value_counts()
    named = {
        flip_reads.RIGHT_TO_WRONG: f"Right on {a}, wrong on {b}",
        flip_reads.WRONG_TO_RIGHT: f"Wrong on {a}, right on {b}",
    }
    viewstate.seed("between", list(named), flip_reads.RIGHT_TO_WRONG)
    change = st.radio(
        "Questions",
        list(named),
        key="between",
        horizontal=True,
        format_func=lambda c: f"{named[c]} ({counts.get(c, 0)})",
    )
    viewstate.publish("between", change)
    moved = mine[mine["change"] == change]
    if moved.empty:
        st.caption(f"No question is {named[change][0].lower() + named[change][1:]} for {selection.entries[0]}.")
    else:
        answers = sides(found[found["item_id"].isin(moved["item_id"])], a, b)
        wide = answers.assign(change=answers[str(a)] + " → " + answers[str(b)])
        wide = wide.pivot(index="item_id", columns="Model", values="change").reset_index(names="Question")
        if len(wide) > 10:  # a grid scrolls; a few rows read as a plain table, which draws much faster
            st.dataframe(wide, hide_index=True, width="stretch")
        else:
            st.table(wide, hide_index=True)
        item_id = explorer.picker("Question", moved["item_id"].tolist(), "between_question")
        row = moved[moved["item_id"] == item_id].iloc[0]
        perturbation(row, answers[answers["item_id"] == item_id], a, b)
    st.divider()


between_dates()
SHOW = {"changes": "Answer changes across dates", "right-wrong": "Right ↔ wrong changes only", "all": "All questions"}
show = explorer.picker(
    "Show", list(SHOW), "show", default="right-wrong" if generated else "changes", format_func=SHOW.get
)
shown = {
    "changes": flips[~flips["consistent"]],
    "right-wrong": flips[(flips["n_correct"] > 0) & (flips["n_wrong"] > 0)],
    "all": flips,
}[show]
# What tells a fragile answer first (changes, right/wrong, confidence, the answer), so a laptop screen shows it.
FIRST = ["item_id", "changes", "share_observed", "n_correct", "n_wrong"]
FIRST += ["mean_confidence", "min_confidence", "mean_score", "answer"]
sampled = bool(flips["share_observed"].lt(1).any())
if sampled:
    st.caption(
        "Swept sparsely (--budget): each question was seen on the share_observed of the dates it was drawn on; a "
        "question seen to change did change, one not seen to change may still change on a date not drawn."
    )
shown = shown.drop(columns=["entry", "dataset", *([] if sampled else ["share_observed"])]).dropna(axis=1, how="all")
shown = shown[[c for c in FIRST if c in shown] + [c for c in shown if c not in FIRST]]
if not generated and "answer" in shown:  # a choice task's correct option by its letter, as the question shows it
    shown = shown.assign(answer=shown["answer"].map(lambda answer: "-" if pd.isna(answer) else LABELS[int(answer)]))
viewstate.seed_value("find", "", str)
found = st.text_input(
    "Find a question by its text",
    key="find",
    help="Case-insensitive; searches the benchmark's text in the sidebar's data folder.",
)
viewstate.publish("find", found)
if found.strip():
    try:
        texts = explorer.item_descriptions(selection.dataset, explorer.data_dir())
    except DateEvalError as error:
        st.error(f"Question texts unavailable: {error}. Set the benchmark data folder in the sidebar.")
        texts = {}
    shown = shown[shown["item_id"].map(lambda item: found.strip().lower() in texts.get(item, "").lower())]
st.subheader(f"{counted(len(shown), 'question')}, most date-sensitive first")
explorer.show_table(shown, selection.dataset)
explorer.downloads(shown, "flips")
if shown.empty:
    st.stop()
item_id = explorer.picker("Question", shown["item_id"].tolist(), "question")
st.subheader(f"Question {item_id}")
explorer.describe_item(selection.dataset, item_id)
prompt_link("The prompt of this question (Prompt)", item_id)
everything = explorer.store_metrics()
others = sorted(set(everything.loc[everything["dataset"] == selection.dataset, "entry"]) - set(selection.entries))
compare = explorer.picker("Side by side with", ["(none)", *others], "compare")
entries = [selection.entries[0]] + ([compare] if compare != "(none)" else [])


def item_rows(entry: str) -> pd.DataFrame:
    """The question's dated rows for one entry (one read with the question pushed down)."""
    return explorer.item_rows(replace(selection, entries=(entry,)), item_id).sort_values("date")


def history(rows: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """The item's chosen columns on each of the selected dates, one row per date."""
    found = explorer.item_history(store, rows["model_key"].iloc[0], selection.dataset, item_id, columns)
    found = found[found["condition_key"].isin(rows["condition_key"]) & found["task_key"].isin(rows["task_key"])]
    return found.drop_duplicates("condition_key").sort_values("date").reset_index(drop=True)


def predicted(rows: pd.DataFrame) -> str:
    """What the model answered on the selected dates, next to the correct option ("B on 300 dates, C on 66")."""
    counts = ", ".join(f"{LABELS[int(p)]} on {n} dates" for p, n in rows["pred"].dropna().value_counts().items())
    unparsed = int(rows["pred"].isna().sum())
    return f"Correct option: {LABELS[int(rows['answer'].iloc[0])]}. Predicted: {counts or 'none'}" + (
        f"; no answer on {unparsed} dates." if unparsed else "."
    )


def option_probabilities(where: DeltaGenerator, entry: str, rows: pd.DataFrame) -> None:  # where: a Streamlit column
    """Choice tasks: each option's probability on each date as a line; chain of thought, where the letters' probabilities
    exist only for parsed answers, the answer and its confidence per date instead of an empty chart."""
    n_options = int(rows["n_options"].iloc[0])
    probs = history(rows, "probs")
    probs = probs[probs["probs"].notna()]  # CoT: none where the answer was unparseable
    answer = int(rows["answer"].iloc[0])
    if len(probs) >= 2:
        where.plotly_chart(
            plots.option_lines(probs, list(LABELS[:n_options]), answer, title=entry),
            width="stretch",
            config=plots.CHART_CONFIG,
        )
    else:
        answers = pd.DataFrame(
            {
                "Date": rows["date"].astype(str),
                "Answer": rows["pred"].map(lambda p: "-" if pd.isna(p) else LABELS[int(p)]),
                "Confidence (%)": rows["confidence"].map(lambda c: "-" if pd.isna(c) else f"{100 * c:.2f}"),
                "Right": rows["correct"].map(lambda right: "-" if pd.isna(right) else "yes" if right else "no"),
            }
        )
        where.caption(
            f"{entry}: the answer and its confidence on each date (its options' probabilities exist only where an answer was parsed)"
        )
        where.dataframe(answers, hide_index=True)
    where.caption(predicted(rows))


def verdict(row: pd.Series) -> str:
    if not pd.isna(row["correct"]):
        return ":green[right]" if row["correct"] else ":red[wrong]"
    return "" if pd.isna(row["score"]) else f"sentence chrF {row['score']:.1f}"


def outputs_side_by_side(rows: pd.DataFrame) -> None:
    """Generated tasks: the item's result on each date, then two dates' outputs (newlines kept) with their first divergence."""
    outputs = history(rows, "output", "parsed", "correct", "score", "outcome", "outcome_message")
    st.plotly_chart(plots.item_over_dates(outputs, selection.dataset), width="stretch", config=plots.CHART_CONFIG)
    days = [pd.Timestamp(day).date() for day in outputs["date"]]
    # the column may hold None (no grade): .eq() counts it as neither right nor wrong
    right, wrong = outputs.index[outputs["correct"].eq(True)], outputs.index[outputs["correct"].eq(False)]
    first, second = (int(right[0]), int(wrong[0])) if len(right) and len(wrong) else (0, min(1, len(days) - 1))
    left, right_column = st.columns(2)
    a = days.index(explorer.date_picker("Date A", days, "output_a", days[first], where=left))
    b = days.index(explorer.date_picker("Date B", days, "output_b", days[second], where=right_column))
    one, two = outputs.loc[a], outputs.loc[b]
    where = descriptive.first_divergence(one["output"], two["output"])
    if where is None:
        st.success("The two dates produced identical outputs.")
    else:
        st.caption(
            f"Identical for the first {where} characters ({len(one['output'][:where].split())} words), then they diverge: the highlighted text differs."
        )
    html_a, html_b = plots.highlighted_diff(one["output"], two["output"])
    for column, row, html in ((left, one, html_a), (right_column, two, html_b)):
        parsed = "unparseable" if pd.isna(row["parsed"]) else str(row["parsed"])
        column.markdown(f"**{row['date']}** · {verdict(row)}")
        column.html(html)
        with column.expander("Parsed answer"):
            st.code(parsed, language=None)
        if isinstance(row.get("outcome"), str):
            with column.expander(f"Execution: {row['outcome']}"):
                st.code(row["outcome_message"] or "(no output)", language=None)


chosen_rows = {entry: item_rows(entry) for entry in entries}
chosen_rows = {entry: rows for entry, rows in chosen_rows.items() if len(rows)}
for entry, rows in chosen_rows.items():
    if unscored := explorer.unscored_dates(selection, entry, rows):
        st.caption(
            f"{entry} scored this question on {len(rows)} of {len(rows) + len(unscored)} dates (a sparse sweep); on "
            f"the others its answer was not drawn and those dates' values are estimated: {', '.join(unscored)}."
        )
first_rows = next(iter(chosen_rows.values()))
if (
    first_rows["n_options"].notna().any() and first_rows["confidence"].notna().any()
):  # a choice task with option probabilities
    st.subheader("The options' probabilities across dates")
    for column, (entry, rows) in zip(st.columns(len(chosen_rows)), chosen_rows.items()):
        option_probabilities(column, entry, rows)
if generated:
    st.subheader(f"Outputs of {selection.entries[0]} on two dates")
    outputs_side_by_side(first_rows)
    if len(chosen_rows) > 1:
        st.subheader(f"{compare} on the same question")
        st.plotly_chart(
            plots.item_over_dates(history(chosen_rows[compare], "parsed", "correct", "score"), selection.dataset),
            width="stretch",
            config=plots.CHART_CONFIG,
        )
