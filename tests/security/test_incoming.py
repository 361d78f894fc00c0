"""`incoming/` is held to the dataset's path rules: batch files and folders are resolved and must
stay inside the dataset folder (symlinks that leave are refused, naming the path), must be
regular files, and have their table's format and columns, whether a full load or a batch reads
them. A full load leaves such a batch out, naming it and why (`refused_batches`), and reads the
rest: one bad folder does not stop every full run."""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb
import pytest

from hier_pipeline.dataset import DatasetError, load_dataset, parse_dataset
from hier_pipeline.dataset.arrivals import batch_spec, list_batches, with_batches
from tests.builders import write_dataset

USERS = "user_id,signup,age\n4,2024-01-04,50\n"


def _dataset(tmp_path: Path) -> tuple[Path, Path]:
    """The tiny dataset with an empty `incoming/b1/`, and a folder outside it holding users."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "users.csv").write_text(USERS)
    folder = write_dataset(tmp_path / "d")
    (folder / "incoming" / "b1").mkdir(parents=True)
    return folder, outside


def _refused(folder: Path, match: str, batch: str = "b1") -> None:
    spec = parse_dataset(folder)
    refused = dict(with_batches(spec).refused_batches)
    assert re.search(match, refused[batch]), refused
    with pytest.raises(DatasetError, match=match):
        batch_spec(spec, batch)


def test_a_batch_file_linked_outside_the_folder_is_refused(tmp_path: Path) -> None:
    folder, outside = _dataset(tmp_path)
    (folder / "incoming" / "b1" / "users.csv").symlink_to(outside / "users.csv")
    _refused(folder, r"file 'incoming/b1/users.csv', table 'users': the path leaves the dataset")


def test_a_batch_folder_linked_outside_the_folder_is_refused(tmp_path: Path) -> None:
    folder, outside = _dataset(tmp_path)
    (folder / "incoming" / "b1").rmdir()
    (folder / "incoming" / "b1").symlink_to(outside, target_is_directory=True)
    assert list_batches(folder) == ["b1"]  # listed, so that reading it fails loudly
    _refused(folder, r"file 'incoming/b1/users.csv', table 'users': the path leaves the dataset")


def test_an_incoming_folder_linked_outside_is_refused(tmp_path: Path) -> None:
    folder, outside = _dataset(tmp_path)
    (outside / "b1").mkdir()
    (outside / "b1" / "users.csv").write_text(USERS)
    (folder / "incoming" / "b1").rmdir()
    (folder / "incoming").rmdir()
    (folder / "incoming").symlink_to(outside, target_is_directory=True)
    _refused(folder, r"file 'incoming/b1/users.csv', table 'users': the path leaves the dataset")


def test_a_link_that_stays_inside_is_read(tmp_path: Path) -> None:
    folder, _ = _dataset(tmp_path)
    (folder / "exports").mkdir()
    (folder / "exports" / "new_users.csv").write_text(USERS)
    (folder / "incoming" / "b1" / "users.csv").symlink_to(folder / "exports" / "new_users.csv")
    report = load_dataset(with_batches(parse_dataset(folder)), tmp_path / "db.duckdb")
    assert (report.tables["users"].read, report.tables["users"].accepted) == (4, 4)


def test_a_batch_file_linked_to_a_file_the_table_reads_is_refused(tmp_path: Path) -> None:
    """Its rows would be read twice: events (no key) counted double."""
    folder, _ = _dataset(tmp_path)
    (folder / "incoming" / "b1" / "events.csv").symlink_to(folder / "events.csv")
    refused = dict(with_batches(parse_dataset(folder)).refused_batches)
    assert re.match(
        r"file 'incoming/b1/events.csv', table 'events': is a link to events.csv, which",
        refused["b1"],
    )
    (folder / "incoming" / "b1" / "events.csv").unlink()
    (folder / "incoming" / "b1" / "events.csv").write_text("user_id,product_id,kind,ts\n")
    (folder / "incoming" / "b2").mkdir()
    (folder / "incoming" / "b2" / "events.csv").symlink_to(folder / "incoming/b1/events.csv")
    spec = with_batches(parse_dataset(folder))
    assert re.search(
        r"incoming/b2/events.csv.*is a link to incoming/b1", spec.refused_batches[0][1]
    )
    assert [p.parent.name for p in spec.tables["events"].batch_files] == ["b1"]


def test_a_batch_file_that_is_a_fifo_or_a_folder_is_refused(tmp_path: Path) -> None:
    folder, _ = _dataset(tmp_path)
    os.mkfifo(folder / "incoming" / "b1" / "users.csv")
    _refused(folder, r"file 'incoming/b1/users.csv', table 'users': not a regular file")
    (folder / "incoming" / "b1" / "users.csv").unlink()
    (folder / "incoming" / "b1" / "users.csv").mkdir()
    _refused(folder, r"file 'incoming/b1/users.csv', table 'users': not a regular file")


def test_a_batch_file_of_another_format_than_its_table_is_refused(tmp_path: Path) -> None:
    """A `.parquet` batch for a CSV table used to pass, then break the next full load."""
    folder, _ = _dataset(tmp_path)
    duckdb.sql(
        f"COPY (SELECT 4 AS user_id, '2024-01-04' AS signup, 50 AS age)"
        f" TO '{folder / 'incoming' / 'b1' / 'users.parquet'}' (FORMAT parquet)"
    )
    _refused(
        folder,
        r"file 'incoming/b1/users.parquet', table 'users': the table is read from .csv files,"
        r" so its batch files must be .csv too",
    )


def test_a_batch_file_with_its_columns_in_another_order_is_refused(tmp_path: Path) -> None:
    """The reader matches a table's files by position: `age` would land in `signup`."""
    folder, _ = _dataset(tmp_path)
    (folder / "incoming" / "b1" / "users.csv").write_text("user_id,age,signup\n4,50,2024-01-04\n")
    refused = dict(with_batches(parse_dataset(folder)).refused_batches)
    assert refused["b1"].startswith(
        "file 'incoming/b1/users.csv', table 'users': has the columns ['user_id', 'age',"
    )


def test_a_full_load_reads_the_other_batches_and_reports_the_refused_one(tmp_path: Path) -> None:
    """A refused batch used to stop every full run until someone removed it."""
    folder, _ = _dataset(tmp_path)
    (folder / "incoming" / "b1" / "users.csv").write_text("user_id,age,signup\n5,50,2024-01-04\n")
    (folder / "incoming" / "b2").mkdir()
    (folder / "incoming" / "b2" / "users.csv").write_text(USERS)
    report = load_dataset(with_batches(parse_dataset(folder)), tmp_path / "db.duckdb")
    assert (report.tables["users"].read, report.tables["users"].accepted) == (4, 4)
    assert list(report.refused_batches) == ["b1"]
    assert "Batch `b1` refused whole: file 'incoming/b1/users.csv'" in report.to_markdown()
    assert (folder / "incoming" / "b1" / "users.csv").is_file()  # kept where it arrived
    with duckdb.connect(str(tmp_path / "db.duckdb"), read_only=True) as connection:
        assert connection.sql("SELECT batch FROM meta.batches").fetchall() == [("b2",)]
