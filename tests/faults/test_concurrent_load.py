"""Two runs loading the same DuckDB file at once: the second is refused with a clear message, and
the file on disk is always one complete database."""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Barrier, Event
from pathlib import Path

import pytest

from hier_pipeline.dataset import DatabaseInUseError, load_dataset, parse_dataset
from hier_pipeline.dataset.sql import open_database
from hier_pipeline.files.atomic import partial_files
from hier_pipeline.files.lock import exclusive_lock
from tests.builders import write_dataset

SPAWN = multiprocessing.get_context("spawn")  # DuckDB's threads do not survive a fork


def _hold_lock(database: Path, held: Event, release: Event) -> None:
    """What a load in progress holds, for as long as the test needs it."""
    with exclusive_lock(database):
        held.set()
        release.wait(60)


def _load(folder: Path, database: Path, start: Barrier, outcomes: multiprocessing.Queue) -> None:
    start.wait(60)
    try:
        load_dataset(parse_dataset(folder), database)
        outcomes.put("loaded")
    except DatabaseInUseError as error:
        outcomes.put(str(error))


def _user_count(database: Path) -> int:
    with open_database(database) as connection:
        row = connection.execute("SELECT count(*) FROM raw.users").fetchone()
    assert row is not None
    return int(row[0])


def test_a_load_while_another_runs_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "d")
    database = tmp_path / "out" / "raw.duckdb"
    load_dataset(parse_dataset(folder), database)
    before = database.stat().st_mtime_ns
    held, release = SPAWN.Event(), SPAWN.Event()
    other = SPAWN.Process(target=_hold_lock, args=(database, held, release))
    other.start()
    try:
        assert held.wait(60)
        with pytest.raises(DatabaseInUseError, match=rf"in use by another run \(pid {other.pid},"):
            load_dataset(parse_dataset(folder), database)
        assert database.stat().st_mtime_ns == before
    finally:
        release.set()
        other.join(60)
    load_dataset(parse_dataset(folder), database)  # the lock dies with its holder
    assert _user_count(database) == 3


def test_loads_started_together_leave_one_complete_database(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "d")
    database = tmp_path / "out" / "raw.duckdb"
    start, outcomes = SPAWN.Barrier(2), SPAWN.Queue()
    runs = [SPAWN.Process(target=_load, args=(folder, database, start, outcomes)) for _ in "ab"]
    for run in runs:
        run.start()
    for run in runs:
        run.join(120)
    results = [outcomes.get(timeout=5) for _ in runs]
    assert all(r == "loaded" or "is in use by another run" in r for r in results), results
    assert "loaded" in results
    assert _user_count(database) == 3
    assert not partial_files(database.parent)
