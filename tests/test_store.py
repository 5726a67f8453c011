import os

from dateeval.store import ROW_KEY, Store


def _rows(n, condition="c1", start=0):
    return [
        {"model_key": "m", "hardware": "cpu", "task_key": "t", "condition_key": condition, "item_id": f"i{i}", "prompt_hash": f"h{i}", "correct": True}
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
    folders, removed, _ = store.compact()
    after, _ = store.read()
    assert (folders, removed) == (1, 3) and len(store.files()) == 1
    assert sorted(map(tuple, before[ROW_KEY].values)) == sorted(map(tuple, after[ROW_KEY].values))


def test_claims_exclude_live_workers_and_take_over_dead_ones(tmp_path):
    store = Store(tmp_path)
    path = store.unit_path("model", "data", "2024-01-01", "k")
    assert store.claim(path)
    assert not store.claim(path)  # this (live) process holds it
    store.release(path)
    lock = path.with_name(f".{path.name}.lock")
    lock.write_text(f"{os.uname().nodename} 999999")  # a pid that does not exist
    assert store.claim(path)


def test_compaction_keeps_text_columns_with_missing_values(tmp_path):
    """Text columns with missing values (replies nobody could parse) come back as NaN in pandas; merged, they stay text."""
    store = Store(tmp_path)
    store.write(store.unit_path("model", "data", "2024-01-01", "a"), [{**row, "parsed": None, "probs": None} for row in _rows(2)])
    store.write(store.unit_path("model", "data", "2024-01-02", "b"), [{**row, "parsed": p, "probs": [0.5, 0.5]} for row, p in zip(_rows(2, "c2"), ["D", "D"])])
    store.write(store.unit_path("model", "data", "2024-01-03", "c"), [{**row, "parsed": p, "probs": None} for row, p in zip(_rows(2, "c3"), [None, "B"])])
    before, _ = store.read()
    folders, removed, problems = store.compact()
    after, _ = store.read()
    assert (folders, removed) == (1, 3) and not problems.corrupted and len(store.files()) == 1
    assert sorted(after["parsed"].dropna()) == ["B", "D", "D"] and after["parsed"].isna().sum() == 3
    assert after["probs"].dropna().map(list).tolist() == [[0.5, 0.5]] * 2 and len(after) == len(before)
