"""Grade stored outputs again, without the model: the check that generated results are reproducible from the store.

Every generated reply is stored verbatim, so its grade can be recomputed
with the current graders (a fixed parser, other sandbox limits) and compared
with the stored one. Nothing in the store is changed: the comparison is
returned (and the CLI prints and exports it).
"""

from __future__ import annotations

import pandas as pd

from dateeval.errors import DateEvalError
from dateeval.store import Store
from dateeval.tasks import build_task, custom
from dateeval.tasks.base import GenerationTask, Prompt

COLUMNS = [
    "model_key",
    "hardware",
    "task_key",
    "condition_key",
    "prompt_hash",
    "dataset",
    "item_id",
    "date",
    "output",
    "parsed",
    "correct",
    "score",
    "shown_order",
]


def regrade(store: Store, data_dir: str | None, datasets: tuple[str, ...] = ()) -> pd.DataFrame:
    """Stored vs recomputed ``parsed``/``correct``/``score`` for every stored output (of ``datasets``, or all)."""
    frame, problems = store.read(columns=COLUMNS)
    if problems.corrupted:
        raise DateEvalError(problems.messages()[0])
    frame = frame[frame["output"].notna()]
    if datasets:
        frame = frame[frame["dataset"].isin(datasets)]
    if frame.empty:
        raise DateEvalError(
            f"no stored outputs to regrade in {store.root}" + (f" for {', '.join(datasets)}" if datasets else "")
        )
    return pd.concat(
        [_dataset(name, rows, data_dir, store) for name, rows in frame.groupby("dataset", sort=True)], ignore_index=True
    )


def _dataset(name: str, rows: pd.DataFrame, data_dir: str | None, store: Store) -> pd.DataFrame:
    custom.register_kept(store.root, name)  # a dataset described by flags or uploaded: its spec is in the store
    task = build_task(name, data_dir)
    if not isinstance(task, GenerationTask):
        raise DateEvalError(f"{name} is not a generation task")
    items = {item.id: item for item in task.items}
    unknown = sorted(set(rows["item_id"]) - set(items))
    if unknown:
        raise DateEvalError(
            f"{name}: {len(unknown)} stored item ids are not in the data ({unknown[0]}, ...): wrong --data-dir?"
        )
    prompts = [Prompt([], None if order is None else list(order)) for order in rows["shown_order"]]
    # Python objects: a reply's text may hold a lone surrogate, which pandas' Arrow-backed strings cannot
    graded = pd.DataFrame(
        task.grade([items[i] for i in rows["item_id"]], rows["output"].tolist(), prompts),
        index=rows.index,
        dtype=object,
    )
    out = rows.drop(columns=["output", "shown_order"]).rename(
        columns={"parsed": "stored_parsed", "correct": "stored_correct", "score": "stored_score"}
    )
    for column in ("parsed", "correct", "score"):
        out[column] = graded[column] if column in graded else None
    same = (
        (out["stored_parsed"].fillna("") == out["parsed"].fillna(""))
        & _equal(out["stored_correct"], out["correct"])
        & _equal(out["stored_score"], out["score"])
    )
    return out.assign(changed=~same)


def _equal(stored: pd.Series, now: pd.Series) -> pd.Series:
    """Equal values, or both missing (translations have no right/wrong, other tasks no sentence score)."""
    stored, now = stored.astype(float), now.astype(float)
    return ((stored - now).abs() < 1e-9) | (stored.isna() & now.isna())
