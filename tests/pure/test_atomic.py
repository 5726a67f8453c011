"""The one way every writer writes (``dateeval.atomic``): the old file or the new one, never half, nothing left over."""

import pytest

from dateeval import atomic


def test_a_replaced_file_is_the_old_one_until_the_block_ends_and_the_new_one_after(tmp_path):
    path = tmp_path / "record.json"
    with atomic.replacing(path) as staging:
        staging.write_text("first")
    with atomic.replacing(path) as staging:
        staging.write_text("second")
        assert path.read_text() == "first"  # a reader meanwhile sees the old file whole
    assert path.read_text() == "second" and sorted(p.name for p in path.parent.iterdir()) == ["record.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_staging_file(tmp_path):
    path = tmp_path / "unit.parquet"
    path.write_text("old")
    with pytest.raises(OSError), atomic.replacing(path) as staging:
        staging.write_text("half")
        raise OSError("disk full")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["unit.parquet"]


def test_a_folder_that_does_not_exist_is_refused_not_made(tmp_path):
    with pytest.raises(OSError), atomic.replacing(tmp_path / "typo" / "out.csv") as staging:
        staging.write_text("x")
    assert not list(tmp_path.iterdir())


def test_a_link_at_the_name_is_replaced_not_written_through(tmp_path):
    victim, link = tmp_path / "victim", tmp_path / "out.csv"
    victim.write_text("keep")
    link.symlink_to(victim)
    with atomic.replacing(link) as staging:
        staging.write_text("new")
    assert victim.read_text() == "keep" and not link.is_symlink() and link.read_text() == "new"


def test_a_folder_made_first_by_another_process_stays_and_this_copy_goes(tmp_path):
    folder = tmp_path / "models" / "converted"
    with atomic.creating(folder) as staging:
        staging.mkdir()  # the writer makes it (copytree and save_pretrained do)
        (staging / "weights").write_text("mine")
        folder.mkdir()  # another process renamed its copy into place meanwhile
        (folder / "weights").write_text("theirs")
    assert (folder / "weights").read_text() == "theirs" and [p.name for p in folder.parent.iterdir()] == ["converted"]


def test_a_failed_folder_leaves_nothing(tmp_path):
    folder = tmp_path / "demo"
    with pytest.raises(RuntimeError), atomic.creating(folder) as staging:
        staging.mkdir()
        (staging / "half").write_text("x")
        raise RuntimeError("killed")
    assert not list(tmp_path.iterdir())
