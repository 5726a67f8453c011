"""What produced an entry's results on some dates (:class:`Identity`): each recorded setting's value and a digest of
every rendered prompt, which fixes the template and the wording. The robust record carries one per entry, so a number
pasted from ``dateeval robust --json`` says which model, task, prompts and software gave it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

import numpy as np
import pandas as pd
import xxhash

# A setting's value: one where every run agrees, the sorted values where runs differ, None where none was recorded.
Setting = str | list[str] | None


@dataclass(frozen=True)
class Identity:
    """Each recorded setting of an entry's date rows (:data:`Setting`) and ``prompts_digest``, a digest of the set of
    (date, item, prompt hash) its rows hold. Kept with the store as one row (``dateeval.results.sources.stored``) of its JSON:
    :meth:`record` and :meth:`from_record` are its only way in and out of that row."""

    model: Setting
    model_key: Setting
    model_source: Setting
    model_revision: Setting
    dtype: Setting
    device: Setting
    hardware: Setting
    torch_version: Setting
    transformers_version: Setting
    task: Setting
    task_key: Setting
    prompt_version: Setting
    shots: Setting
    subset: Setting
    decoding: Setting
    template_date_kind: Setting
    date_line: Setting
    date_format: Setting
    date_position: Setting
    system_prompt: Setting
    prompts_digest: str

    def as_json(self) -> dict:
        """The identity as JSON-ready values, keys in field order."""
        return asdict(self)

    def record(self) -> dict:
        """The row the identity is kept as."""
        return {"identity": json.dumps(self.as_json())}

    @classmethod
    def from_record(cls, record: dict) -> Identity:
        """A kept row back as an identity."""
        return cls(**json.loads(record["identity"]))


# The stored columns an identity reads: its settings, then what fixes its prompts.
SETTINGS = [field.name for field in fields(Identity) if field.name != "prompts_digest"]
COLUMNS = [*SETTINGS, "date", "item_id", "prompt_hash"]


def of_rows(rows: pd.DataFrame) -> Identity:
    """The identity of an entry's date ``rows`` (:data:`COLUMNS`)."""
    found = {name: sorted({str(value) for value in rows[name].dropna().unique()}) for name in SETTINGS}
    # one hash per (date, item, prompt hash), by value (not by row order or text encoding), sorted: a digest of the set
    prompts = np.sort(
        pd.util.hash_pandas_object(rows[["date", "item_id", "prompt_hash"]].astype(str), index=False).to_numpy()
    )
    return Identity(
        **{name: values[0] if len(values) == 1 else (values or None) for name, values in found.items()},
        prompts_digest=xxhash.xxh3_128_hexdigest(prompts.tobytes()),
    )
