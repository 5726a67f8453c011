"""Datasets uploaded on the Run page: kept in the store, and read from there only.

The app serves whoever reaches its port, so it never opens a path a browser
names: a dataset comes as uploaded bytes (a data file, or a spec with the
files it names), is checked in a staging folder, and only then kept in
``STORE/.datasets``. An uploaded spec may name only files uploaded beside it
(or a Hub dataset): ``data = "/etc/passwd"`` or ``"../x.jsonl"`` is refused
before any path is looked at (``specs.read_spec(confined=True)``). Kept in
the store, the dataset is found again by its stored name (the explorer's
item text, ``regrade``) through ``custom.register_kept``.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dateeval.data.custom import DATA_SUFFIXES
from dateeval.errors import DateEvalError
from dateeval.tasks.custom import SPEC_SUFFIXES, UPLOADS_DIR, register_file, spec_of

SUFFIXES = (".jsonl", ".csv", ".parquet", ".toml", ".yaml", ".yml")
MAX_BYTES = 50 * 2**20  # a benchmark is megabytes; a cap keeps one upload from filling the disk the store is on
MAX_TOTAL_BYTES = (
    2 * MAX_BYTES
)  # all of one upload's files (a spec, its rows and its exemplars): the staging folder's bound too
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class Upload:
    """One uploaded file: the name the browser gave, and its bytes."""

    name: str
    data: bytes


def _check(upload: Upload) -> None:
    """A plain file name with a known suffix (never a path), under the size cap."""
    if not _NAME.fullmatch(upload.name) or not upload.name.endswith(SUFFIXES):
        raise DateEvalError(
            f"upload {upload.name!r}: give a file named like bench.jsonl (letters, digits, . _ -) ending in {', '.join(SUFFIXES)}"
        )
    if len(upload.data) > MAX_BYTES:
        raise DateEvalError(
            f"upload {upload.name} is {len(upload.data) / 2**20:.1f} MiB, over the {MAX_BYTES / 2**20:g} MiB limit"
        )


def _main(uploads: Sequence[Upload]) -> Upload:
    """The upload that is the dataset: the one spec, or else the one data file."""
    specs = [upload for upload in uploads if upload.name.endswith(SPEC_SUFFIXES)]
    data = [upload for upload in uploads if upload.name.endswith(DATA_SUFFIXES)]
    if len(specs) == 1:
        return specs[0]
    if not specs and len(data) == 1:
        return data[0]
    found = f"{len(specs)} specs" if specs else f"{len(data)} data files and no spec"
    raise DateEvalError(f"upload one data file, or one spec with the files it names ({found} uploaded)")


def _check_total(uploads: Sequence[Upload]) -> None:
    """All files of one upload under :data:`MAX_TOTAL_BYTES`, before any is written (each is under MAX_BYTES already)."""
    total = sum(len(upload.data) for upload in uploads)
    if total > MAX_TOTAL_BYTES:
        raise DateEvalError(
            f"the uploaded files are {total / 2**20:.1f} MiB together, over the {MAX_TOTAL_BYTES / 2**20:g} MiB limit: "
            "upload the spec and the files it names only"
        )


def _load(path: Path) -> set[str]:
    """Read the dataset a staged file makes, every row and exemplar: a mistake is one error box now, not a failed sweep later.
    Returns the names of the files it is made of (the file itself, and the local files a spec names)."""
    spec = spec_of(path, confined=True)
    spec.load(spec.table, spec.name)
    if spec.exemplars is not None:
        spec.load(spec.exemplars, f"{spec.name}/fewshot")
    return {path.name} | {
        Path(table.location).name for table in (spec.table, spec.exemplars) if table is not None and not table.hub
    }


def _check_named(uploads: Sequence[Upload], named: set[str], main: Upload) -> None:
    """Refuse a file the dataset does not use: the store keeps only what its results were made from, not whatever came along."""
    unused = [upload.name for upload in uploads if upload.name not in named]
    if unused:
        raise DateEvalError(
            f"{main.name} does not name {', '.join(unused)}: upload the spec and the files it names only"
        )


def _fresh(uploads: Sequence[Upload], folder: Path) -> list[Upload]:
    """The uploads not yet kept in ``folder``; one kept with other bytes is refused, not replaced: the store's results
    made from it must keep pointing at the data they were made from (the explorer and ``regrade`` read it again)."""
    for upload in uploads:
        kept = folder / upload.name
        if kept.is_file() and kept.read_bytes() != upload.data:
            raise DateEvalError(
                f"upload {upload.name}: a different {upload.name} is already kept in this store, and results made "
                "from it must keep pointing at it: rename your file"
            )
    return [upload for upload in uploads if not (folder / upload.name).is_file()]


def keep(uploads: Sequence[Upload], store_root: Path) -> str:
    """Check the uploaded dataset (spec keys, every row and exemplar), keep its files in ``STORE/.datasets`` and register
    it; returns the name its results are stored under. Nothing is kept when anything is wrong (a file the spec does not
    name included), all files together are capped, and a kept file is never replaced."""
    if len({upload.name for upload in uploads}) != len(uploads):
        raise DateEvalError("two uploads have the same name: upload each file once")
    for upload in uploads:
        _check(upload)
    _check_total(uploads)
    main = _main(uploads)
    folder = Path(store_root) / UPLOADS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".upload-") as staging:
        for upload in uploads:
            (Path(staging) / upload.name).write_bytes(upload.data)
        try:
            named = _load(Path(staging) / main.name)
        except DateEvalError as error:  # named as the user named the files, not by the server's staging folder
            raise DateEvalError(str(error).replace(f"{staging}/", "")) from None
        _check_named(uploads, named, main)
        fresh = _fresh(uploads, folder)
        for upload in fresh:
            os.replace(Path(staging) / upload.name, folder / upload.name)
    try:
        return register_file(folder / main.name, confined=True)
    except DateEvalError:  # its name is taken (mmlu.jsonl): the files it brought go again
        for upload in fresh:
            (folder / upload.name).unlink()
        raise
