"""What a sweep still has to compute: the units whose items the store lacks, each with the file it will be written to.

Planned against the rows already stored (read with every column verified), so a sweep killed at any point resumes
where it stopped, and a unit whose file is damaged is moved aside and planned again.
"""

from __future__ import annotations

import hashlib

from dateeval.engine.plan import Description, SweepSpec, Unit
from dateeval.schema import ROW_KEY
from dateeval.store import Store, upkeep


def missing_units(store: Store, spec: SweepSpec, description: Description, run_id: str) -> tuple[list[Unit], list[str]]:
    """The units of ``description`` not (wholly) in ``store``; the damaged files set aside on the way, as messages."""
    done: set[tuple] = set()
    messages: list[str] = []
    for dataset in {candidate.dataset for candidate in description.candidates}:
        # Every column is verified, not only the keys read: a unit whose file is damaged anywhere is moved
        # aside and counts as missing, so it runs again (a later read would reject the whole file).
        paths = store.unit_files(description.model_dir, dataset)
        existing, problems = store.read(columns=ROW_KEY, paths=paths, full_check=True)
        messages += upkeep.set_aside_damaged(problems)
        if len(existing):
            done |= set(map(tuple, existing[ROW_KEY].itertuples(index=False)))
    units = []
    for candidate in description.candidates:
        todo = [
            i
            for i, (item_id, prompt_hash) in enumerate(zip(candidate.item_ids, candidate.prompt_hashes))
            if (*candidate.identity, item_id, prompt_hash) not in done
        ]
        if not todo:
            continue
        condition = spec.conditions[candidate.condition_index]
        hashes = tuple(candidate.prompt_hashes[i] for i in todo)
        unit_key = hashlib.sha256("|".join([*candidate.identity, *hashes]).encode()).hexdigest()[:16]
        path = store.unit_path(description.model_dir, candidate.dataset, condition.label, unit_key)
        if path.exists() and not store.readable(path):
            # The same unit's earlier file is damaged and could not be moved aside: recompute beside it, never over it.
            path = store.unit_path(description.model_dir, candidate.dataset, condition.label, f"{unit_key}-{run_id}")
        units.append(
            Unit(
                candidate.dataset,
                candidate.condition_index,
                condition.label,
                tuple(candidate.item_ids[i] for i in todo),
                hashes,
                str(path.relative_to(store.root)),
                candidate.cost * len(todo) / len(candidate.item_ids),
            )
        )
    return units, messages
