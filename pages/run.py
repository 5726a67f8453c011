"""Run: start a date sweep from the browser; it runs in the background and resumes from the store."""

import datetime as dt

import pandas as pd
import streamlit as st

from dateeval import explorer
from dateeval.explorer import uploads
from dateeval.backends import BackendOptions, openai_api
from dateeval.backends.devices import DTYPES
from dateeval.explorer.background import BackgroundSweep
from dateeval.conditions import DEFAULT_SYSTEM_PROMPT
from dateeval.engine.plan import build_spec, dated_conditions
from dateeval.engine.ray_executor import RayExecutor
from dateeval.engine.sweep import LocalExecutor
from dateeval.errors import DateEvalError
from dateeval.keeping import keep
from dateeval.models import DEFAULT_MODEL
from dateeval.names import FEWSHOT_FORMATS
from dateeval.prompting import POSITIONS, DateInjection
from dateeval.store import Store, runs
from dateeval.tasks import BENCHMARKS, GenerationOptions

BACKEND_CHOICES = {
    "transformers": "transformers (in process)",
    "vllm": "vLLM (offline engine)",
    "openai": "OpenAI-compatible endpoint",
}
DATE_CONTROL = {
    "transformers": "Under our control: the whole prompt, rendered by the model's own chat template with the date we set.",
    "vllm": "Under our control: the whole prompt (dateeval renders it; vLLM receives text), every template kind dated by us.",
    "completions": "Under our control: the whole prompt, rendered locally and sent as text; the server only continues it.",
    "chat": "Under our control: the messages and our date line in the system message; the server's template may add more (probe it).",
    "server-clock": "Under our control: nothing about the date. Each row records the request's real date (run it daily for a series).",
}


def model_spec(backend: str, model: str, endpoint: str) -> str:
    """The ``--model`` text for the chosen backend (``vllm:NAME``, ``openai:URL#NAME``)."""
    return {"transformers": model, "vllm": f"vllm:{model}", "openai": f"openai:{endpoint}#{model}"}[backend]


SOURCES = {"benchmark": "The Dataset box", "upload": "My upload (below)"}


def dataset_reference(source: str, own: list, builtin: str) -> str:
    """The dataset to run: the Dataset box's, or the upload's stored name (kept in the store once every row is checked),
    as ``source`` says; an upload asked for but not there yet (Start pressed while it uploads) is an error, never the box.
    Its chain-of-thought, few-shot and format choices are added by ``build_spec``, as for the CLI's flags."""
    if source == "benchmark":
        return builtin
    if not own:
        raise DateEvalError(
            "no file uploaded yet: wait until the upload below has finished (its name appears under the box), then press Start"
        )
    return uploads.keep([uploads.Upload(file.name, file.getvalue()) for file in own], explorer.results_store())


st.title("Run a date sweep")
explorer.app_settings()
explorer.intro(
    "Score a model on a dataset once per date. Results go to the 'My results' store and are reused: rerunning the same "
    "sweep (or a wider one) only computes what is missing, and a cancelled or interrupted sweep resumes where it stopped."
)
panel = st.container()  # this tab's sweep, above the long form: Start shows its progress where the eye is
with st.form("sweep"):
    left, right = st.columns(2)
    model = left.text_input(
        "Model", DEFAULT_MODEL, help="smollm2-135m, a Hub id (org/name), a model folder or a .gguf file"
    )
    dataset = right.selectbox("Dataset", BENCHMARKS, index=BENCHMARKS.index("arc_challenge"))
    source = st.radio("Run", list(SOURCES), format_func=SOURCES.get, horizontal=True, key="source")
    data_dir = left.text_input(
        "Data folder (empty: the Hugging Face Hub)", explorer.data_dir(), help="Starts from the sidebar's data folder."
    )
    subjects = right.text_input("MMLU subjects (comma-separated, empty: all)")
    limit = left.number_input("First N items", min_value=1, value=10)
    sample = right.number_input("Random sample of N items first (0: off)", min_value=0, value=0)
    seed = left.number_input("Sample seed", min_value=0, value=0)
    start = right.date_input("From", dt.date(2024, 1, 1))
    end = left.date_input("To", dt.date(2024, 1, 7))
    step = right.number_input("Every N days", min_value=1, value=1)
    no_date = left.checkbox("Also run without any date (baseline)", value=True)
    template_default = right.checkbox("Also run the template as shipped", value=False)
    budget = left.number_input(
        "Budget: share of the question-dates to score (1: all)",
        min_value=0.01,
        max_value=1.0,
        value=1.0,
        step=0.05,
        help="Below 1 the sweep is sparse (as `dateeval run --budget`): the no-date baseline (else the first date) "
        "scores every question, the other cells are drawn where questions move, and each date's accuracy is "
        "estimated with its 95% interval (docs/sparse.md). Worth it from about 20 dates. With a target width, its cap.",
    )
    width = right.number_input(
        "Target width: every date within ± this many points (0: off)",
        min_value=0.0,
        max_value=100.0,
        value=0.0,
        step=0.5,
        help="As `dateeval run --target-width`: the sparse sweep draws in a few pre-declared looks, up to the budget, "
        "until every estimated date's 95% interval is within ± this (docs/sparse.md).",
    )
    own = st.file_uploader(
        "Or your own dataset: a data file, or a spec with the files it names (docs/own-benchmark.md)",
        type=[suffix.lstrip(".") for suffix in uploads.SUFFIXES],
        accept_multiple_files=True,
        help=f"Up to {uploads.MAX_BYTES // 2**20} MiB a file, kept in the store's .datasets folder. A spec names only files uploaded with it "
        "(or hf:org/name). Choose 'My upload' above to run it.",
    )
    with st.expander("Prompting: chain of thought, few-shot, generation length"):
        cot = st.checkbox("Chain of thought (multiple-choice datasets: the model reasons, then 'The answer is X.')")
        shots = st.number_input(
            "Few-shot exemplars (MMLU, ARC, GSM8K; the paper's Table 4 uses 5)", min_value=0, max_value=8, value=0
        )
        fewshot_format = st.selectbox(
            "Few-shot format",
            [None, *FEWSHOT_FORMATS],
            key="fewshot_format",
            format_func=lambda chosen: (
                "the dataset's own (single-turn; lm-eval tasks: multi-turn)" if chosen is None else chosen
            ),
            help="single-turn: every exemplar in the one user message; multi-turn: each exemplar a user and an "
            "assistant turn, as lm-eval builds it with a chat template (--fewshot_as_multiturn)",
        )
        max_new_tokens = st.number_input("Longest reply in tokens (0: the task's default)", min_value=0, value=0)
        sampling = st.checkbox("Sample with the model's temperature/top-p and a fixed seed (default: greedy)")
    with st.expander(
        "Where it runs: backend (transformers, vLLM, an OpenAI-compatible endpoint) and executor (here, or a Ray cluster)"
    ):
        backend = st.radio("Backend", list(BACKEND_CHOICES), horizontal=True, format_func=BACKEND_CHOICES.get)
        endpoint = st.text_input("Endpoint URL (OpenAI-compatible)", "http://127.0.0.1:8000/v1")
        api_mode = st.selectbox("Endpoint mode", list(openai_api.MODES), format_func=openai_api.MODES.get)
        key_env = st.text_input(
            "Environment variable holding the API key (its name; the key itself is never stored)", ""
        )
        cluster = st.text_input(
            "Ray cluster address (empty: run here, in the background)", "", help="auto, HOST:PORT or ray://HOST:10001"
        )
        workers = st.number_input("Ray workers (0: one per CPU or GPU)", min_value=0, value=0)
        st.caption(DATE_CONTROL[backend if backend != "openai" else api_mode])
    with st.expander("Date injection (templates without a date of their own) and compute"):
        line = st.text_input("Date line", "Today Date: {date}")
        fmt = st.text_input("Date format", "%d %b %Y")
        position = st.selectbox("Position", POSITIONS)
        system = st.text_input("System message", DEFAULT_SYSTEM_PROMPT)
        dtype = st.selectbox("Precision", DTYPES)
        batch_size = st.number_input("Batch size", min_value=1, value=16)
    submitted = st.form_submit_button("Start sweep", type="primary")

state = st.session_state
if submitted:
    if state.get("background_sweep") is not None and state["background_sweep"].running:
        st.warning("A sweep started in this tab is still running: cancel it below first.")
    else:
        try:
            spec = build_spec(
                (model_spec(backend, model.strip(), endpoint.strip()),),
                (dataset_reference(source, own, dataset),),
                dated_conditions(
                    f"{start}..{end}/{step}",
                    no_date=no_date,
                    template_default=template_default,
                    system_prompt=system,
                    injection=DateInjection(line=line, format=fmt, position=position),
                ),
                data_dir=data_dir.strip() or None,
                cot=cot,
                shots=int(shots),
                fewshot_formats=(fewshot_format,),
                subjects=subjects,
                sample=int(sample) or None,
                seed=int(seed),
                limit=int(limit),
                dtypes=(dtype,),
                batch_size=int(batch_size),
                generation=GenerationOptions(max_new_tokens=int(max_new_tokens) or None, sample=sampling),
                options=BackendOptions(api_key_env=key_env.strip() or None, mode=api_mode),
                budget=float(budget) if budget < 1 or width else None,
            )
            name = spec.datasets[0]
            executor = (
                RayExecutor(address=cluster.strip(), workers=int(workers) or None)
                if cluster.strip()
                else LocalExecutor()
            )
            state["background_sweep"] = BackgroundSweep(
                spec, Store(explorer.results_store()), executor=executor, keep=keep, target_width=width / 100 or None
            ).start()
            st.toast(f"Sweep started: {name}. Its progress is at the top of this page.", icon=":material/play_arrow:")
        except DateEvalError as error:
            panel.error(str(error))


@st.fragment(run_every=1.0)
def progress_panel() -> None:
    """This tab's sweep in detail (speed, workers, warnings); every tab lists every sweep below."""
    sweep = state.get("background_sweep")
    if sweep is None:
        st.caption("No sweep started in this tab.")
        return
    progress = sweep.progress
    if progress is not None and progress.units_total:
        st.progress(
            progress.units_done / progress.units_total, text=f"{progress.units_done} / {progress.units_total} units"
        )
        eta = f"ETA {progress.eta_seconds:.0f} s · " if progress.eta_seconds is not None else ""
        st.caption(
            f"{progress.items_per_second:.1f} item-dates/s · "
            + (
                f"{progress.tokens_generated / progress.seconds:.0f} generated tokens/s · "
                if progress.tokens_generated and progress.seconds
                else ""
            )
            + f"{progress.units_skipped} already stored · {eta}{progress.current}"
        )
        if len(progress.workers) > 1:
            st.caption(" · ".join(f"{worker}: {unit}" for worker, unit in sorted(progress.workers.items())))
        for held in progress.held_elsewhere:
            st.info(f"Waiting for a unit another run holds: {held}")
        for message in progress.messages:
            st.warning(message)
        for note in progress.notes:  # a sparse sweep's draw, a target width's stop
            st.caption(note)
    elif sweep.running:
        st.caption("Loading model and data...")
    if sweep.error:
        st.error(sweep.error)
    elif sweep.finished and sweep.cancel.is_set() and (progress is None or progress.units_done < progress.units_total):
        st.warning(
            "Cancelled: the units it finished are saved, and running the same sweep again resumes it.",
            icon=":material/cancel:",
        )
    elif sweep.finished:
        st.success(
            "Finished. Pick 'My results' as the store in the sidebar to explore the results.",
            icon=":material/check_circle:",
        )


STATUS_ICONS = {"running": "⏳", "succeeded": "✅", "cancelled": "⛔", "failed": "❌", "interrupted": "⚠️"}


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 01 min``: readable at a glance in the list."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def status_text(record: runs.RunRecord) -> str:
    label = "cancelling" if record.status == "running" and record.cancel_requested else record.status
    return f"{STATUS_ICONS[record.status]} {label}"


def runs_table(records: list[runs.RunRecord]) -> pd.DataFrame:
    # Status and progress first: the sweep's description is long and would push them off a laptop screen.
    return pd.DataFrame(
        {
            "Status": [status_text(record) for record in records],
            "Units": [f"{record.units_done} / {record.units_total}" for record in records],
            "Started": [dt.datetime.fromtimestamp(record.started).strftime("%Y-%m-%d %H:%M:%S") for record in records],
            "Duration": [duration(record.duration_s) for record in records],
            "Sweep": [record.spec for record in records],
            "Detail": [record.error or (record.current if record.status == "running" else "") for record in records],
        }
    )


@st.fragment(run_every=1.0)
def runs_panel() -> None:
    """Every sweep recorded in the results store (``dateeval.store.runs``): the same list in every tab, and cancel for any."""
    log = runs.RunLog(explorer.results_store())
    records = log.runs()
    st.subheader("Sweeps on this store")
    if not records:
        st.caption("No sweep has run on 'My results' yet.")
        return
    st.dataframe(runs_table(records), hide_index=True)
    for record in records:
        if record.status == "running" and not record.cancel_requested:
            # A callback runs before the rerun it triggers, so the list drawn by that rerun already says "cancelling".
            st.button(
                f"Cancel: {record.spec}",
                key=f"cancel_{record.id}",
                on_click=log.request_cancel,
                args=(record.id,),
                help="It stops after the unit it is computing, wherever it runs; finished units stay saved.",
            )


with panel:
    progress_panel()
runs_panel()
