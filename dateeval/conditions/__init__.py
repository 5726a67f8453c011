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
from dataclasses import asdict, dataclass, field, fields, replace

from dateeval.errors import DateEvalError
from dateeval.prompting import DATE_MODES, DateInjection

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."
# Paper Appendix C.4: the six system-prompt wordings of Table 5's "System Instruction" row.
PAPER_SYSTEM_PROMPTS = (
    "",
    "You are a helpful assistant.",
    "You are an expert multiple-choice question answerer.",
    "You are a highly intelligent and knowledgeable assistant specialized in answering multiple-choice questions accurately.",
    "Follow the user's instructions carefully and provide accurate answers.",
    "Answer the user's multiple-choice questions to the best of your ability.",
)
LOCATION_LINE = "User location: {location}"
SERVER_CLOCK_SYSTEM_PROMPT = ""  # paper §5.2: the provider's date is measured with an empty system prompt


@dataclass(frozen=True)
class Condition:
    """Everything about a prompt or its execution that a sweep varies.

    ``date_mode`` is ``date`` (use ``date``), ``none`` (no date anywhere: the
    paper's mitigation, Table 9) or ``default`` (the template left alone: what
    a user gets by default today). ``default`` *with* a date is a server-clock
    condition: nothing dated is sent, the provider injects its own date, and
    ``date`` is the (UTC) day it was asked, so daily runs form a date series
    like any other (paper §5.2). The other factors (paper §5.5-5.6, App. F):
    ``option_order`` (0 = as published, k = the k-th seeded permutation of
    each question's options), ``location`` (a user-location line in the
    system message), ``batch_size`` (0 = the sweep's) and ``repeat`` (the
    r-th repetition of an identical condition: the determinism check).
    """

    date_mode: str = "date"
    date: dt.date | None = None
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    injection: DateInjection = field(default_factory=DateInjection)
    option_order: int = 0
    location: str = ""
    batch_size: int = 0
    repeat: int = 0

    def __post_init__(self) -> None:
        if self.date_mode not in DATE_MODES:
            raise ValueError(f"unknown date mode {self.date_mode!r}")
        if (self.date_mode == "date" and self.date is None) or (self.date_mode == "none" and self.date is not None):
            raise ValueError("date_mode 'date' needs a date and 'none' takes none")

    @property
    def server_clock(self) -> bool:
        """The provider's own date, asked on ``date`` (see the class docstring)."""
        return self.date_mode == "default" and self.date is not None

    @property
    def factor(self) -> str:
        """Which one-at-a-time sweep this condition belongs to: ``date``, a factor name, or a baseline."""
        varied = list(self.varied())
        if self.date is None:
            return "no-date" if self.date_mode == "none" else "template-default"
        return varied[0] if len(varied) == 1 else ("date" if not varied else "+".join(varied))

    def varied(self) -> dict[str, object]:
        """The factors (other than the date) that differ from their defaults (a server-clock run's system prompt is empty)."""
        defaults = (
            {**FACTOR_DEFAULTS, "system_prompt": SERVER_CLOCK_SYSTEM_PROMPT} if self.server_clock else FACTOR_DEFAULTS
        )
        return {name: getattr(self, name) for name, default in defaults.items() if getattr(self, name) != default}

    @property
    def label(self) -> str:
        """Short name for tables and file names: the ISO date, ``no-date`` or ``template-default``, plus varied factors."""
        if self.date is not None:
            base = f"{self.date.isoformat()} (server clock)" if self.server_clock else self.date.isoformat()
        else:
            base = "no-date" if self.date_mode == "none" else "template-default"
        return ",".join([base, *(f"{name}={_short(value)}" for name, value in self.varied().items())])

    def record(self) -> dict[str, object]:
        """Flat factor values, one column each in the store."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "injection"}
        values.update({f"date_{name}": value for name, value in asdict(self.injection).items()})
        values["date"] = self.date.isoformat() if self.date else None
        return values

    @property
    def key(self) -> str:
        """Stable hash of every factor value: part of each stored result's identity.

        Optional factors enter the hash only when they differ from their
        defaults, so adding a factor never invalidates existing stores.
        """
        values = {name: value for name, value in self.record().items() if name not in OPTIONAL_FACTORS}
        values.update({name: value for name, value in self.varied().items() if name in OPTIONAL_FACTORS})
        return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]

    def system_message(self) -> str:
        """The system text before any date is added: the location line (if any), then the wording."""
        if not self.location:
            return self.system_prompt
        line = LOCATION_LINE.format(location=self.location)
        return f"{line}\n\n{self.system_prompt}" if self.system_prompt else line


# Factors added after the first release: hashed into keys only when not at their default.
OPTIONAL_FACTORS: dict[str, object] = {"option_order": 0, "location": "", "batch_size": 0, "repeat": 0}
FACTOR_DEFAULTS: dict[str, object] = {"system_prompt": DEFAULT_SYSTEM_PROMPT, **OPTIONAL_FACTORS}


def _short(value: object) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 24 else text[:21] + "...'"


FACTORS = tuple(FACTOR_DEFAULTS)


def expand(
    dates: list[dt.date],
    *,
    no_date: bool = False,
    template_default: bool = False,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    injection: DateInjection = DateInjection(),
    factors: dict[str, list] | None = None,
    factor_date: dt.date | None = None,
) -> list[Condition]:
    """Every date (plus baselines), then each other factor swept alone at ``factor_date``.

    One factor at a time, the others at their defaults, on the same items,
    as in the paper's Table 5: ``factors`` maps a factor name (see
    ``FACTORS``) to its levels; ``factor_date`` defaults to the first date.
    """
    base = Condition(date_mode="date", date=factor_date or dates[0], system_prompt=system_prompt, injection=injection)
    conditions = [replace(base, date=day) for day in dates]
    if no_date:
        conditions.append(replace(base, date_mode="none", date=None))
    if template_default:
        conditions.append(replace(base, date_mode="default", date=None))
    return _with_factors(base, conditions, factors)


def server_clock(
    day: dt.date, *, system_prompt: str = SERVER_CLOCK_SYSTEM_PROMPT, factors: dict[str, list] | None = None
) -> list[Condition]:
    """A server-clock run asked on ``day``: no date of ours, the provider's own (paper §5.2: empty system prompt).

    Each day is its own condition, so a daily run adds a date to the series
    and a second run on the same day resumes instead of repeating;
    ``factors`` (``repeat`` above all) are swept alone as in :func:`expand`.
    """
    base = Condition(date_mode="default", date=day, system_prompt=system_prompt)
    return _with_factors(base, [base], factors)


def _with_factors(base: Condition, conditions: list[Condition], factors: dict[str, list] | None) -> list[Condition]:
    """``conditions`` plus each factor's levels applied to ``base`` alone, without duplicates."""
    for name, levels in (factors or {}).items():
        if name not in FACTORS:
            raise DateEvalError(f"unknown factor {name!r}: choose from {', '.join(FACTORS)}")
        conditions += [replace(base, **{name: level}) for level in levels]
    return list(dict.fromkeys(conditions))  # a level equal to the default is the base condition itself
