"""Loading from the Hugging Face Hub with errors a user can act on, within the bounds of a local data file.

A Hub dataset is data someone uploaded, as a local file is: it gets the
same bounds (``dateeval.data.limits``: rows, fields, cells, decoded bytes). The
split's size is checked twice: as its card declares it, before anything is
downloaded (a dataset of millions of rows is refused before gigabytes reach
the disk), and as ``datasets`` prepared it, on its memory-mapped Arrow table
before a single row becomes a Python object (a card may declare nothing, or
the wrong size). ``datasets`` keeps its cache, so a dataset loaded once loads
offline again.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dateeval.data.files import check_table, read_parquet
from dateeval.errors import DateEvalError
from dateeval.data.limits import MAX_ROWS, MAX_TEXT_BYTES, mib

if TYPE_CHECKING:
    from datasets import DatasetBuilder, DownloadManager, SplitDict

_REMEDY = (
    "load a smaller split or config, or save a part of it as a JSONL, CSV or Parquet file and give that file instead"
)


def load_hub_rows(path: str, config: str | None, split: str, offline_hint: str) -> list[dict]:
    """Rows of a Hub dataset; past a bound, or on any failure, one line (a failure's names the offline alternative)."""
    what = f"dataset {path} ({config}, {split}) from the Hugging Face Hub"
    try:
        import datasets

        builder = datasets.load_dataset_builder(path, config)
        _check_declared(builder.info.splits, split, what)
        builder.download_and_prepare(dl_manager=_checked_downloads(builder))
        rows = builder.as_dataset(split=split)
    except DateEvalError:
        raise
    except Exception as error:  # datasets raises many unrelated types for one cause
        reason = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
        if (
            isinstance(error, ConnectionError) and os.environ.get("HF_HUB_OFFLINE") == "1"
        ):  # not a split that fails to prepare
            reason = "HF_HUB_OFFLINE=1 is set"
        raise DateEvalError(
            f"cannot load {path} ({config}) from the Hugging Face Hub: {reason}. Offline: {offline_hint}"
        ) from None
    check_table(rows.data.table, what, _REMEDY)
    return [dict(row) for row in rows]


def _checked_downloads(builder: DatasetBuilder) -> DownloadManager:
    """The download manager ``download_and_prepare`` would make, once each Parquet file it will prepare from is
    downloaded and read as a local Parquet file is (:func:`read_parquet`): preparing decodes every row group, and
    run-length encoding lets a few KB stand for gigabytes. The same manager then prepares the split from its cache."""
    from datasets import DownloadConfig, DownloadManager

    config = DownloadConfig(
        use_etag=False, token=builder.token, storage_options=builder.storage_options
    )  # as datasets makes it
    manager = DownloadManager(
        dataset_name=builder.dataset_name,
        download_config=config,
        data_dir=builder.config.data_dir,
        base_path=builder.base_path,
    )
    if builder.name == "parquet":
        urls = [url for files in (builder.config.data_files or {}).values() for url in files]
        for url, local in zip(urls, manager.download(urls)):
            read_parquet(local, f"dataset file {url}", _REMEDY)
    return manager


def _check_declared(splits: SplitDict | None, split: str, what: str) -> None:
    """Refuse a split whose dataset card declares it past the bounds, before it is downloaded (nothing declared: nothing refused here)."""
    declared = (splits or {}).get(split)
    if declared is None:
        return
    if (declared.num_examples or 0) > MAX_ROWS:
        raise DateEvalError(
            f"{what} declares {declared.num_examples:,} rows, over the {MAX_ROWS:,} a file may hold: {_REMEDY}"
        )
    if (declared.num_bytes or 0) > MAX_TEXT_BYTES:
        raise DateEvalError(
            f"{what} declares {mib(declared.num_bytes)}, over the {mib(MAX_TEXT_BYTES)} a file may hold decoded: {_REMEDY}"
        )
