"""A budgeted sweep's cells (``dateeval.sparse``): which conditions run in full, which dates are drawn, and what each
drawn row carries so an estimate can weigh it.

The dense conditions (baselines, other factors and the pilot date) run first; from the pilot's answers each question
gets a propensity to move with the date, the design (``sparse.solve``) turns propensities into inclusion
probabilities within the budget, and a seeded uniform per cell decides which cells of every other date run. The
driver (``engine.sweep``) runs what these functions choose; each drawn row is stored with its design, propensity and
inclusion probability (:func:`with_design`), so every estimate is design-based and can be recomputed from the store.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from dateeval import sparse
from dateeval.conditions import Condition
from dateeval.engine.plan import Candidate, Description, SweepSpec
from dateeval.errors import DateEvalError
from dateeval.schema import ROW_KEY
from dateeval.store import Store, designs, upkeep

Sampled = dict[tuple, tuple[str, float, float]]  # (identity, item) -> a drawn cell's design, propensity, inclusion


def check_affordable(spec: SweepSpec) -> None:
    """Refuse, before any model loads, a budget that the dense conditions (baselines, factors, the pilot) spend alone.

    The advice is always a value ``--budget`` takes: the least two-decimal budget that leaves cells to draw (1 included:
    every cell drawn, the dense grid with its design stored), or, where the dense conditions are the whole grid (no more
    dates than pilots), a dense sweep: no budget in (0, 1] could draw anything there."""
    sparse.check_budget(spec.budget)
    total, dense, pilots = _dense(spec)
    dated = total - dense + pilots
    if dense < spec.budget * total:
        return
    scored = f"baselines, factors and {pilots} pilot date(s)" if pilots else "baselines and factors"
    if dense == total:
        raise DateEvalError(
            f"--budget {spec.budget:g}: with {dated} date(s) every condition is scored in full ({scored}): sweep "
            f"densely (drop --budget) or sweep more than {pilots} date(s)"
        )
    least = (100 * dense // total + 1) / 100  # above dense / total, and at most 1 since dense < total
    raise DateEvalError(
        f"--budget {spec.budget:g} is spent by the {dense} of {total} conditions scored in full ({scored}): ask for at "
        f"least {least:.2f}, or sweep more dates"
    )


def dense_share(spec: SweepSpec) -> float:
    """The share of the grid the conditions scored in full take (a budget must be above it)."""
    total, dense, _ = _dense(spec)
    return dense / total


def _dense(spec: SweepSpec) -> tuple[int, int, int]:
    """The sweep's conditions, how many are scored in full (baselines, factors, pilot dates) and of them pilot dates."""
    total, dated = len(spec.conditions), sum(map(_plain_date, spec.conditions))
    pilots = len(sparse.pilot_indices(dated))
    return total, total - dated + pilots, pilots


def split(description: Description, spec: SweepSpec) -> tuple[tuple, tuple, set]:
    """The dense candidates (every condition that is not a plain date, and the pilot dates), the drawn ones, the pilots."""
    pilots = _pilots(description, spec)
    dense = tuple(c for c in description.candidates if not _is_drawn(spec, c) or c in pilots)
    return dense, tuple(c for c in description.candidates if c not in dense), pilots


def draw(
    spec: SweepSpec,
    w: np.ndarray,
    pilot: list[Candidate],
    drawn: list[Candidate],
    n_dense: int,
    baseline: str | None = None,
) -> tuple[list[Candidate], Sampled, str, str]:
    """The drawn candidates of one dataset, each keeping the items whose uniform falls below their inclusion
    probability; the design of each kept cell (to store with its row); a note of the share expected; the design.
    ``baseline``: the no-date condition ``w`` read (:func:`baseline_of`)."""
    items = list(drawn[0].item_ids)
    grid = len(items) * (n_dense + len(drawn))
    design = sparse.design_for(
        w,
        len(drawn),
        n_dense,
        seed=spec.budget_seed,
        budget=spec.budget,
        pilot=tuple(c.identity[3] for c in pilot),
        looks=spec.looks,
        baseline=baseline,
    )
    pi = design.inclusion(w)
    picked = sparse.chosen(design, w, items, [candidate.identity[3] for candidate in drawn])
    text = design.to_json()
    out, sampled = [], {}
    for candidate, row in zip(drawn, picked):
        keep = np.flatnonzero(row)
        for index in keep:
            sampled[(candidate.identity, items[index])] = (text, float(w[index]), float(pi[index]))
        out.append(
            replace(
                candidate,
                item_ids=tuple(items[i] for i in keep),
                prompt_hashes=tuple(candidate.prompt_hashes[i] for i in keep),
            )
        )
    expected = float(np.sum(pi)) * len(drawn) + len(items) * n_dense
    note = (
        f"{drawn[0].dataset}: sparse sweep at budget {spec.budget:g}: {expected / grid:.1%} of {grid} item-dates expected "
        f"({n_dense} dense condition(s), {len(drawn)} drawn date(s))"
    )
    return out, sampled, note, text


def baseline_of(store: Store, description: Description, spec: SweepSpec, dense: list[Candidate]) -> str | None:
    """The condition key of the no-date baseline whose grades join the pilot's in the propensity of one dataset's
    questions (``dense``: its conditions scored in full): the plain no-date condition where the sweep
    has one, unless its entry's record already holds designs, whose baseline (or none) a grown budget keeps, so the
    propensities and the sample stay the same."""
    path = _record_path(store, description, dense[0])
    if path.exists() and (held := designs.read(path).designs):
        return sparse.Design.from_json(held[0]).baseline
    plain = [c for c in dense if _plain_baseline(spec.conditions[c.condition_index])]
    return plain[0].identity[3] if plain else None


def pilot_propensity(
    store: Store, description: Description, pilot: list[Candidate], items: list[str], baseline: str | None = None
) -> np.ndarray:
    """``sparse.pilot_propensity`` of one dataset's questions from the pilot dates' (and the ``baseline``'s) rows as
    stored."""
    paths = store.unit_files(description.model_dir, pilot[0].dataset)
    frame, problems = store.read(columns=[*ROW_KEY, "correct"], paths=paths, optional=["probs"], full_check=True)
    damaged = upkeep.set_aside_damaged(problems)
    if damaged:
        raise DateEvalError(
            f"the pilot dates' rows are damaged ({damaged[0]}); run the same command again to score them anew"
        )
    model_key, hardware, task_key, _ = pilot[0].identity
    frame = frame[(frame["model_key"] == model_key) & (frame["hardware"] == hardware) & (frame["task_key"] == task_key)]
    try:
        return sparse.pilot_propensity(frame, [candidate.identity[3] for candidate in pilot], items, baseline)
    except sparse.PilotIncomplete:
        raise DateEvalError(
            f"{pilot[0].dataset}: the pilot dates are not all in the store; run the same command again"
        ) from None


def _record_path(store: Store, description: Description, candidate: Candidate) -> Path:
    """Where the design record of a candidate's entry (its model, hardware, task and dataset) lives."""
    model_key, hardware, task_key, _ = candidate.identity
    return designs.path_of(store.root / description.model_dir / candidate.dataset, model_key, hardware, task_key)


def _swept(spec: SweepSpec, dated: list[Candidate]) -> tuple[tuple[str, str], ...]:
    """The plain dates of one dataset's sweep as a record keeps them: (condition key, ISO date), in date order."""
    pairs = [(c.identity[3], spec.conditions[c.condition_index].date.isoformat()) for c in dated]
    return tuple(sorted(pairs, key=lambda pair: pair[1]))


def check_records(store: Store, description: Description, spec: SweepSpec) -> None:
    """Refuse, before any unit runs, a sparse sweep whose seed or dates differ from what an entry of the store was
    swept with: its cells would not be one sample with the stored ones, and the entry could no longer be read.
    A larger or smaller budget with the same seed and dates is the same sample grown (or already held)."""
    for dataset in dict.fromkeys(c.dataset for c in description.candidates if _is_drawn(spec, c)):
        dated = [c for c in description.candidates if c.dataset == dataset and _is_drawn(spec, c)]
        path = _record_path(store, description, dated[0])
        if not path.exists():
            continue
        record = designs.read(path)
        swept = _swept(spec, dated)
        if record.seed != spec.budget_seed or record.dates != swept:
            raise DateEvalError(
                f"{description.model_dir}/{dataset} in {store.root} was swept sparsely with --budget-seed "
                f"{record.seed} over {_span(record.dates)}; this sweep asks for --budget-seed {spec.budget_seed} over "
                f"{_span(swept)}: repeat that seed and those dates, or sweep into a new store (--store NEW)"
            )


def _span(dates: tuple[tuple[str, str], ...]) -> str:
    return f"{len(dates)} date(s), {dates[0][1]}..{dates[-1][1]}" if dates else "no dates"


def keep_record(
    store: Store,
    description: Description,
    spec: SweepSpec,
    pilot: list[Candidate],
    drawn: list[Candidate],
    n_dense: int,
    design: str,
) -> Path:
    """Record (or extend) the entry's design before its drawn cells run: the dates swept, the pilot, and this budget's
    design, so a reader estimates every swept date (``dateeval.store.designs``); the record's path."""
    path = _record_path(store, description, pilot[0])
    model_key, hardware, task_key, _ = pilot[0].identity
    record = (
        designs.read(path)
        if path.exists()
        else designs.DesignRecord(
            model_key,
            hardware,
            task_key,
            spec.budget_seed,
            _swept(spec, [c for c in (*pilot, *drawn) if _is_drawn(spec, c)]),
            tuple(c.identity[3] for c in pilot),
            n_dense,
            len(pilot[0].item_ids),
            (),
        )
    )
    designs.write(path, record.with_design(design))
    return path


def with_design(rows: pa.Table, sampled: Sampled) -> pa.Table:
    """A drawn unit's rows with each one's design, propensity and inclusion probability; a dense unit's rows as they came."""
    if not sampled or not rows.num_rows:
        return rows
    identity = list(
        zip(*(rows.column(name).to_pylist() for name in ("model_key", "hardware", "task_key", "condition_key")))
    )
    found = [sampled.get((key, item)) for key, item in zip(identity, rows.column("item_id").to_pylist())]
    if found[0] is None:
        return rows
    for index, name in enumerate(sparse.DESIGN_COLUMNS):
        rows = rows.append_column(name, pa.array([values[index] for values in found]))
    return rows


def _is_drawn(spec: SweepSpec, candidate: Candidate) -> bool:
    """Whether a candidate's condition is a plain date of the sweep (drawn sparsely); baselines and factors stay dense."""
    return _plain_date(spec.conditions[candidate.condition_index])


def _plain_date(condition: Condition) -> bool:
    return condition.factor == "date" and condition.date_mode == "date"


def _plain_baseline(condition: Condition) -> bool:
    """The no-date baseline with every other factor at its default."""
    return condition.date_mode == "none" and not condition.varied()


def _pilots(description: Description, spec: SweepSpec) -> set:
    """The pilot candidates, per dataset: :data:`dateeval.sparse.PILOT` date(s) spread over its sorted date
    conditions."""
    chosen = set()
    for dataset in {candidate.dataset for candidate in description.candidates}:
        of = [c for c in description.candidates if c.dataset == dataset]
        dated = sorted((c for c in of if _is_drawn(spec, c)), key=lambda c: spec.conditions[c.condition_index].date)
        chosen |= {dated[i] for i in sparse.pilot_indices(len(dated))}
    return chosen
