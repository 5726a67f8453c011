import os
import random
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dateeval import leftovers
from dateeval.schema import ROW_KEY
from dateeval.store import Store, upkeep


def _rows(n, condition="c1", start=0):
    return [
        {
            "model_key": "m",
            "hardware": "cpu",
            "task_key": "t",
            "condition_key": condition,
            "item_id": f"i{i}",
            "prompt_hash": f"h{i}",
            "correct": True,
        }
        for i in range(start, start + n)
    ]


def test_write_is_atomic_and_leaves_no_temporary_files(tmp_path):
    store = Store(tmp_path)
    path = store.unit_path("model", "data", "2024-01-01", "k1")
    store.write(path, _rows(3))
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    frame, problems = store.read()
    assert len(frame) == 3 and not problems.corrupted


def test_duplicates_from_racing_workers_are_dropped(tmp_path):
    store = Store(tmp_path)
    store.write(store.unit_path("model", "data", "2024-01-01", "a"), _rows(3))
    store.write(store.unit_path("model", "data", "2024-01-01", "b"), _rows(3, start=1))
    frame, _ = store.read()
    assert len(frame) == 4 and not frame.duplicated(ROW_KEY).any()


def test_corrupted_file_is_reported_and_kept(tmp_path):
    store = Store(tmp_path)
    store.write(store.unit_path("model", "data", "2024-01-01", "a"), _rows(2))
    bad = store.unit_path("model", "data", "2024-01-02", "b")
    bad.write_bytes(b"PAR1 this is not parquet")
    frame, problems = store.read()
    assert len(frame) == 2
    assert [path for path, _ in problems.corrupted] == [bad] and bad.exists()
    assert "cannot read" in problems.messages()[0]


def test_compact_merges_and_keeps_every_row(tmp_path):
    store = Store(tmp_path)
    for day in range(3):
        store.write(store.unit_path("model", "data", f"2024-01-0{day + 1}", str(day)), _rows(2, condition=f"c{day}"))
    before, _ = store.read()
    folders, removed, _ = upkeep.compact(store)
    after, _ = store.read()
    assert (folders, removed) == (1, 3) and len(store.files()) == 1
    assert sorted(map(tuple, before[ROW_KEY].values)) == sorted(map(tuple, after[ROW_KEY].values))
    assert after["item_id"].is_monotonic_increasing  # by question: one question's rows are a few row groups


def test_a_compacted_question_is_read_from_its_own_row_groups(tmp_path, monkeypatch):
    """Rows by question in small row groups, whose item_id statistics then name one question: a per-item read skips the rest."""
    monkeypatch.setattr("dateeval.store.upkeep.COMPACTED_ROW_GROUP", 3)
    store = Store(tmp_path)
    for day in range(3):
        store.write(store.unit_path("model", "data", f"2024-01-0{day + 1}", str(day)), _rows(4, condition=f"c{day}"))
    upkeep.compact(store)
    (merged,) = store.files()
    groups = pq.ParquetFile(merged).metadata
    ranges = [
        (
            groups.row_group(g).column(groups.schema.names.index("item_id")).statistics.min,
            groups.row_group(g).column(groups.schema.names.index("item_id")).statistics.max,
        )
        for g in range(groups.num_row_groups)
    ]
    assert groups.num_row_groups == 4 and all(low == high for low, high in ranges)  # 3 dates of a question per group


def test_compaction_keeps_text_columns_with_missing_values(tmp_path):
    """Text columns with missing values (replies nobody could parse) come back as NaN in pandas; merged, they stay text."""
    store = Store(tmp_path)
    store.write(
        store.unit_path("model", "data", "2024-01-01", "a"),
        [{**row, "parsed": None, "probs": None} for row in _rows(2)],
    )
    store.write(
        store.unit_path("model", "data", "2024-01-02", "b"),
        [{**row, "parsed": p, "probs": [0.5, 0.5]} for row, p in zip(_rows(2, "c2"), ["D", "D"])],
    )
    store.write(
        store.unit_path("model", "data", "2024-01-03", "c"),
        [{**row, "parsed": p, "probs": None} for row, p in zip(_rows(2, "c3"), [None, "B"])],
    )
    before, _ = store.read()
    folders, removed, problems = upkeep.compact(store)
    after, _ = store.read()
    assert (folders, removed) == (1, 3) and not problems.corrupted and len(store.files()) == 1
    assert sorted(after["parsed"].dropna()) == ["B", "D", "D"] and after["parsed"].isna().sum() == 3
    assert after["probs"].dropna().map(list).tolist() == [[0.5, 0.5]] * 2 and len(after) == len(before)


# Replies as a model may send them: a NUL byte, lone surrogates (which UTF-8, so Arrow, cannot hold), backslashes
# beside them and text that looks like the store's own escapes.
REPLIES = [
    "plain",
    "nul \0 byte",
    "lone \ud800 high",
    "\udcff low then \\ud800 as text",
    "\\",
    "\\\ud83d",
    "\ud83d\ude00 pair",
    None,
]


def test_replies_with_lone_surrogates_are_stored_and_read_back_exactly(tmp_path):
    """Arrow cannot hold a lone surrogate: such a column is stored escaped and named in the file's metadata; every read
    through the store gives back exactly what was written, and a merge keeps it so."""
    store = Store(tmp_path)
    rows = [
        {**row, "output": reply, "outcome_message": f"ValueError: {reply}"}
        for row, reply in zip(_rows(len(REPLIES)), REPLIES)
    ]
    store.write(store.unit_path("model", "data", "2024-01-01", "a"), rows)
    store.write(
        store.unit_path("model", "data", "2024-01-02", "b"), [{**row, "output": "\\ud800"} for row in _rows(2, "c2")]
    )  # no surrogate
    for _ in range(2):  # as written, then merged into one file
        frame, problems = store.read()
        assert not problems.messages() and len(frame) == len(REPLIES) + 2
        written = frame[frame["condition_key"] == "c1"].sort_values("item_id", key=lambda ids: ids.str[1:].astype(int))
        assert written["output"].tolist()[:-1] == REPLIES[:-1] and written["output"].isna().tolist()[-1]
        assert written["outcome_message"].tolist() == [f"ValueError: {reply}" for reply in REPLIES]
        assert (frame.loc[frame["condition_key"] == "c2", "output"] == "\\ud800").all()
        chosen, _ = store.read(columns=["item_id", "output"], filters=[("condition_key", "==", "c1")])
        assert sorted(chosen["output"].dropna()) == sorted(REPLIES[:-1])
        assert upkeep.compact(store)[2].messages() == []
    assert len(store.files()) == 1


def test_lone_surrogates_inside_list_and_struct_columns_are_stored_and_read_back_exactly(tmp_path):
    """Text nested in a list column (stop sequences, several replies) or a struct column is text Arrow cannot hold
    too: such a column is escaped element by element, and every read gives back exactly the lists and structs written."""
    store = Store(tmp_path)
    lists = [["\n\n", "lone \ud800"], ["\\ud800 as text", "\\"], [], None]
    structs = [{"why": "\udcff", "n": 1}, {"why": "plain", "n": 2}, {"why": "\\", "n": 3}, None]
    nested = [None if stops is None else [[text] for text in stops] for stops in lists]  # a list of lists
    rows = [
        {**row, "stops": stops, "nested": inner, "meta": meta}
        for row, stops, inner, meta in zip(_rows(len(lists)), lists, nested, structs)
    ]
    store.write(store.unit_path("model", "data", "2024-01-01", "a"), rows)
    store.write(
        store.unit_path("model", "data", "2024-01-02", "b"), _rows(1, "c2")
    )  # no such columns: merged, they are missing
    for _ in range(2):  # as written, then merged into one file
        frame, problems = store.read()
        assert not problems.messages() and len(frame) == len(rows) + 1
        written = frame[frame["condition_key"] == "c1"].sort_values("item_id")
        assert [None if value is None else list(value) for value in written["stops"]] == lists
        assert [None if value is None else [list(inner) for inner in value] for value in written["nested"]] == nested
        assert written["meta"].tolist() == structs
        assert upkeep.compact(store)[2].messages() == []
    assert len(store.files()) == 1


def _unit_rows(n):
    """Rows shaped like a real unit's: option probabilities, replies, a parsed answer that is sometimes missing."""
    rng = random.Random(7)
    rows = []
    for i, row in enumerate(_rows(n)):
        weights = [rng.random() for _ in range(4)]
        rows.append(
            {
                **row,
                "correct": rng.random() < 0.5,
                "confidence": rng.random(),
                "pred": "ABCD"[i % 4],
                "probs": [w / sum(weights) for w in weights],
                "parsed": None if i % 5 == 0 else str(rng.randint(0, 999)),
                "output_tokens": rng.randint(1, 300),
                "reply": "The answer is " + "x" * rng.randint(0, 40),
            }
        )
    return rows


def _flip_inside_page(path, column):
    """Flip one bit near the end of a column's last page body (what a bad sector or RAM bit does)."""
    metadata = pq.ParquetFile(path).metadata.row_group(0)
    chunk = next(
        metadata.column(i)
        for i in range(metadata.num_columns)
        if metadata.column(i).path_in_schema.split(".")[0] == column
    )
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    data = bytearray(path.read_bytes())
    data[start + chunk.total_compressed_size - 2] ^= 0x10
    path.write_bytes(bytes(data))


def test_no_flipped_bit_changes_values_silently(tmp_path):
    """One bit flipped at a time across a whole unit file: every read either reports the file or returns the written values."""
    store = Store(tmp_path)
    path = store.unit_path("model", "data", "2024-01-01", "k")
    store.write(path, _unit_rows(12))
    intact = path.read_bytes()
    reads = [
        dict(),
        dict(columns=["item_id", "probs", "correct"]),
        dict(columns=["probs"], filters=[("item_id", "=", "i3")]),
    ]
    expected = [store.read(**read)[0] for read in reads]
    tried = detected = 0
    for offset in range(0, len(intact), 7):
        damaged = bytearray(intact)
        damaged[offset] ^= 1 << (offset % 8)
        path.write_bytes(bytes(damaged))
        for read, reference in zip(reads, expected):
            frame, problems = store.read(**read)
            tried += 1
            if problems.corrupted:
                detected += 1
                assert "cannot read" in problems.messages()[0] and path.exists()
            else:
                pd.testing.assert_frame_equal(frame, reference)
    print(f"{tried} reads of single-bit flips: {detected} reported, {tried - detected} read back identical")
    assert detected > tried / 3


def test_files_without_checksums_still_read(tmp_path):
    store = Store(tmp_path)
    path = store.unit_path("model", "data", "2024-01-01", "old")
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(_unit_rows(3)), path)
    frame, problems = store.read(columns=["item_id", "probs"])
    assert len(frame) == 3 and not problems.corrupted and store.readable(path)


def test_a_damaged_column_fails_reads_of_it_and_full_checks(tmp_path):
    store = Store(tmp_path)
    path = store.unit_path("model", "data", "2024-01-01", "k")
    store.write(path, _unit_rows(20))
    _flip_inside_page(path, "reply")
    assert (
        len(store.read(columns=["item_id", "correct"])[0]) == 20
    )  # the damage is in a column this read does not return
    assert store.read(columns=["item_id", "reply"])[1].corrupted
    assert store.read(columns=["item_id"], full_check=True)[1].corrupted and not store.readable(path)


def test_compact_leaves_a_damaged_file_in_place(tmp_path):
    store = Store(tmp_path)
    paths = [store.unit_path("model", "data", f"2024-01-0{day + 1}", str(day)) for day in range(3)]
    for day, path in enumerate(paths):
        store.write(path, [{**row, "condition_key": f"c{day}"} for row in _unit_rows(5)])
    _flip_inside_page(paths[1], "probs")
    damaged = paths[1].read_bytes()
    folders, removed, problems = upkeep.compact(store)
    assert (folders, removed) == (1, 2) and [path for path, _ in problems.corrupted] == [paths[1]]
    assert paths[1].read_bytes() == damaged and not paths[0].exists() and not paths[2].exists()
    frame, problems = store.read(paths=[p for p in store.files() if p != paths[1]])
    assert sorted(frame["condition_key"].unique()) == ["c0", "c2"] and len(frame) == 10 and not problems.corrupted


def test_compact_keeps_the_originals_when_the_merged_file_reads_back_wrong(tmp_path):
    class FlakyDisk(Store):
        def write(self, path, rows, row_group_size=None):
            super().write(path, rows, row_group_size)
            if path.name.startswith("compacted-"):
                _flip_inside_page(path, "probs")

    store = FlakyDisk(tmp_path)
    for day in range(2):
        store.write(
            store.unit_path("model", "data", f"2024-01-0{day + 1}", str(day)),
            [{**row, "condition_key": f"c{day}"} for row in _unit_rows(5)],
        )
    before = store.files()
    folders, removed, problems = upkeep.compact(store)
    assert removed == 0 and store.files() == before and "did not read back as written" in problems.messages()[0]


def _dead_pid():
    """A pid no process can have (one above the kernel's limit)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_staging_files_of_killed_writes_are_removed_and_live_ones_kept(tmp_path):
    store = Store(tmp_path)
    store.write(store.unit_path("model", "data", "2024-01-01", "a"), _rows(2))
    folder = store.unit_path("model", "data", "2024-01-01", "a").parent
    dead = folder / f".x.parquet.{leftovers.host()}-{_dead_pid()}-0123abcd.tmp"
    live = folder / f".y.parquet.{leftovers.owner()}-0123abcd.tmp"
    elsewhere = folder / ".z.parquet.otherhost-1-0123abcd.tmp"  # another host's writer: only age tells
    old = folder / ".w.parquet.1234-0123abcd.tmp"  # a name from before the host was recorded, untouched for two days
    for path in (dead, live, elsewhere, old):
        path.write_bytes(b"partial")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    _, _, problems = upkeep.compact(store)
    assert not dead.exists() and not old.exists() and live.exists() and elsewhere.exists()
    assert sorted(problems.removed) == sorted([dead, old]) and any(
        "left by a killed write" in m for m in problems.messages()
    )


def test_parquet_files_dateeval_did_not_write_are_named_and_left_alone(tmp_path):
    """A user's own Parquet file in the store (was: summary TypeError and a "nan on nan" entry, compact ValueError
    leaving a compacted file beside the originals): every command names it, reads none of it, and leaves it as it was."""
    from conftest import ROOT, demo_copy, run_cli

    store = demo_copy(tmp_path)
    beside = next(store.glob("*/mmlu/*.parquet")).parent / "my-notes.parquet"
    elsewhere = store / "someone" / "else" / "table.parquet"
    elsewhere.parent.mkdir(parents=True)
    for path in (beside, elsewhere):
        pd.DataFrame({"a": [1, 2], "b": ["x", None]}).to_parquet(path)
    before = {path: path.read_bytes() for path in (beside, elsewhere)}
    clean = run_cli("summary", "--store", str(ROOT / "demo" / "store"), "--json")
    summary = run_cli("summary", "--store", str(store), "--json")
    assert summary.returncode == 0 and "Traceback" not in summary.stderr and summary.stdout == clean.stdout
    assert all(f"{path} was not written by dateeval" in summary.stderr for path in (beside, elsewhere)), summary.stderr
    compact = run_cli("compact", "--store", str(store))
    assert compact.returncode == 0 and "Traceback" not in compact.stderr and "not written by dateeval" in compact.stderr
    assert {path: path.read_bytes() for path in (beside, elsewhere)} == before
    assert (
        run_cli("summary", "--store", str(store), "--json").stdout == clean.stdout
    )  # compacting merged only dateeval's units
    frame, problems = Store(store).read()
    assert (
        sorted(path for path, _ in problems.foreign) == sorted([beside, elsewhere]) and frame["model_key"].notna().all()
    )


def test_every_unit_of_the_built_in_demo_carries_checksums():
    """The demo is read by every new user: its units are verified on every read like a sweep's (issue 47 §5)."""
    import pyarrow.parquet as pq
    from conftest import ROOT

    from dateeval.store import checksums

    units = [unit for unit in (ROOT / "demo" / "store").rglob("*.parquet") if ".aggregates" not in unit.parts]
    assert units and all(checksums.stored(pq.read_schema(unit).metadata) is not None for unit in units)
