"""`incoming/` is held to the dataset's path rules: batch files and folders are resolved and must
stay inside the dataset folder (symlinks that leave are refused, naming the path), must be
regular files, and have their table's format and columns, whether a full load or a batch reads
them."""

from __future__ import annotations

import os
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


def _refused(folder: Path, match: str) -> None:
    spec = parse_dataset(folder)
    with pytest.raises(DatasetError, match=match):
        with_batches(spec)
    with pytest.raises(DatasetError, match=match):
        batch_spec(spec, "b1")


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
    with pytest.raises(
        DatasetError,
        match=r"file 'incoming/b1/events.csv', table 'events': is a link to events.csv, which",
    ):
        with_batches(parse_dataset(folder))
    (folder / "incoming" / "b1" / "events.csv").unlink()
    (folder / "incoming" / "b1" / "events.csv").write_text("user_id,product_id,kind,ts\n")
    (folder / "incoming" / "b2").mkdir()
    (folder / "incoming" / "b2" / "events.csv").symlink_to(folder / "incoming/b1/events.csv")
    with pytest.raises(DatasetError, match=r"incoming/b2/events.csv.*is a link to incoming/b1"):
        with_batches(parse_dataset(folder))


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
    with pytest.raises(
        DatasetError,
        match=r"file 'incoming/b1/users.csv', table 'users': has the columns \['user_id', 'age',",
    ):
        load_dataset(with_batches(parse_dataset(folder)), tmp_path / "db.duckdb")
