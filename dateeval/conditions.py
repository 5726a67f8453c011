"""Conditions: one value for every factor that can change what a model is asked.

The date is one factor among others (system wording now; option order,
location, batch size and precision join in the factors issue). A
:class:`Condition` is a frozen record of factor values; sweeps build them as
a product of factor value lists, like HELM's run expanders. Adding a factor
means adding a field here and reading it where it acts (prompt or backend);
identity, labels and storage follow from the fields automatically.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import asdict, dataclass, field, fields

from dateeval.prompting import DATE_MODES, DateInjection

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."


@dataclass(frozen=True)
class Condition:
    """Everything about the prompt that a sweep varies.

    ``date_mode`` is ``date`` (use ``date``), ``none`` (no date anywhere: the
    paper's mitigation, Table 9) or ``default`` (the template left alone: what
    a user gets by default today).
    """

    date_mode: str = "date"
    date: dt.date | None = None
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    injection: DateInjection = field(default_factory=DateInjection)

    def __post_init__(self) -> None:
        if self.date_mode not in DATE_MODES:
            raise ValueError(f"unknown date mode {self.date_mode!r}")
        if (self.date_mode == "date") != (self.date is not None):
            raise ValueError("a date is given exactly when date_mode is 'date'")

    @property
    def label(self) -> str:
        """Short name for tables and file names: the ISO date, ``no-date`` or ``template-default``."""
        if self.date_mode == "date":
            return self.date.isoformat()
        return "no-date" if self.date_mode == "none" else "template-default"

    def record(self) -> dict[str, object]:
        """Flat factor values, one column each in the store."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "injection"}
        values.update({f"date_{name}": value for name, value in asdict(self.injection).items()})
        values["date"] = self.date.isoformat() if self.date else None
        return values

    @property
    def key(self) -> str:
        """Stable hash of every factor value: part of each stored result's identity."""
        return hashlib.sha256(json.dumps(self.record(), sort_keys=True).encode()).hexdigest()[:16]


def expand(
    dates: list[dt.date],
    *,
    no_date: bool = False,
    template_default: bool = False,
    system_prompts: tuple[str, ...] = (DEFAULT_SYSTEM_PROMPT,),
    injection: DateInjection = DateInjection(),
) -> list[Condition]:
    """The product of factor values: every date (plus baselines) under every system wording."""
    conditions = []
    for system_prompt in system_prompts:
        base = {"system_prompt": system_prompt, "injection": injection}
        conditions += [Condition(date_mode="date", date=day, **base) for day in dates]
        if no_date:
            conditions.append(Condition(date_mode="none", **base))
        if template_default:
            conditions.append(Condition(date_mode="default", **base))
    return conditions
