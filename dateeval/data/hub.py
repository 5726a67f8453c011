"""Loading from the Hugging Face Hub with errors a user can act on."""

from __future__ import annotations

import os

from dateeval.errors import DateEvalError


def load_hub_rows(path: str, config: str | None, split: str, offline_hint: str) -> list[dict]:
    """Rows of a Hub dataset; any failure becomes one line naming the offline alternative."""
    try:
        import datasets

        rows = datasets.load_dataset(path, config, split=split)
    except Exception as error:  # noqa: BLE001 - datasets raises many unrelated types for one cause
        reason = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
        if os.environ.get("HF_HUB_OFFLINE") == "1":
            reason = "HF_HUB_OFFLINE=1 is set"
        raise DateEvalError(f"cannot load {path} ({config}) from the Hugging Face Hub: {reason}. Offline: {offline_hint}") from None
    return [dict(row) for row in rows]
