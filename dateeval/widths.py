"""A width instead of a budget (``dateeval run --target-width``, the Run page's target width): a sparse sweep in
pre-declared looks until every estimated date is within +-W.

Why here, above the results layer and the engine: after each look the store is read as every reader reads it
(``Results.widest_estimated``), and the engine, which draws and runs, does not read results. Each look is a sweep at
one of ``sparse.looks(cap, dense share)``; a larger budget's draw holds every smaller one's cells, so no cell is discarded, and each
look's design records how many looks there were, so the readers' intervals hold at whichever look the data stopped at
(``sparse.critical``: Bonferroni over the looks). Coverage at the stop: docs/coverage.md ("Sparse sweeps").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from dateeval import sparse
from dateeval.engine.drawn import dense_share
from dateeval.engine.plan import Progress, SweepSpec
from dateeval.errors import DateEvalError
from dateeval.keeping import keep
from dateeval.results import Results
from dateeval.store import Store, designs


def to_width(spec: SweepSpec, store: Store, width: float, sweep: Callable[[SweepSpec], Progress]) -> Progress:
    """Run ``sweep`` (one sparse sweep of a spec, kept statistics left for the end) at each look of ``spec.budget``
    (the cap; None: 1) that the conditions scored in full leave room for, until every estimated date of the entries it
    drew is within +- ``width`` of its interval's ends, or the cap is reached (a note says which); then keep the
    store's statistics. A killed run resumes: a look drawn before the kill is completed before the width is checked."""
    cap = 1.0 if spec.budget is None else spec.budget
    budgets = sparse.looks(cap, dense_share(spec))
    if not budgets:
        raise DateEvalError(
            f"target width: the cap (budget {cap:g}) is spent by the conditions scored in full: raise it, or sweep "
            "more dates"
        )
    widest = float("nan")
    for budget in budgets:
        final = sweep(replace(spec, budget=budget, looks=len(budgets)))
        records = {Path(path) for path in final.records}
        if held(records) > budget < budgets[-1]:  # resumed: a later look was drawn before the kill, cells to score
            continue
        widest = Results.open(store)[0].widest_estimated(records)
        if widest <= width:
            final.notes.append(
                f"target width {width:g}: stopped at budget {budget:g}, every estimated date within "
                f"+-{100 * widest:.2f} points"
            )
            break
    else:
        final.notes.append(
            f"target width {width:g}: the cap (budget {cap:g}) was reached with a date at +-{100 * widest:.2f} "
            "points; raise the budget to go on"
        )
    final.messages += keep(store)
    return final


def held(records: set[Path]) -> float:
    """The largest budget the design records hold (a look drawn before, if the sweep was killed and resumed)."""
    found = [sparse.Design.from_json(text).budget for path in records for text in designs.read(path).designs]
    return max(found, default=0.0)
