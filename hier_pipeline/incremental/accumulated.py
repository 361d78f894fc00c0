"""The batches accepted since the last full load: which ones, in which order, and their snapshot.

Products arrive one day and their first events the next: a batch may reference rows of any batch
accepted before it since the full load that built the warehouse, so each batch is validated on
top of the snapshot the one before it wrote (`validate.py`), in name order, the order in which a
full load reads them. The state (`accumulated.json` in the arrivals folder) names the warehouse
file it builds on: a full run writes a new one, which has read every batch there was, and the
state starts again from the batches it did not read (those that arrived while it loaded, which
are validated again, on top of the new warehouse, before the next one). A batch the full load
read is quarantined whole rather than read twice; a refused batch (a `DatasetError`) is recorded
with its error, and its rows are not there to reference.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from hier_pipeline.dataset.arrivals import list_batches, loaded_batches
from hier_pipeline.dataset.errors import DatasetError
from hier_pipeline.dataset.loader import LoadConfig
from hier_pipeline.dataset.report import LoadReport
from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.dataset.sql import open_database
from hier_pipeline.files.atomic import write_atomically
from hier_pipeline.files.lock import exclusive_lock
from hier_pipeline.incremental.validate import validate_batch

STATE_FILE = "accumulated.json"


@dataclass
class Accumulated:
    """What `work` holds for the warehouse `warehouse` identifies: the batches accepted since
    its full load, in order (their reports), and those refused (their errors)."""

    warehouse: str
    accepted: list[str] = field(default_factory=list)
    reports: dict[str, dict] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


def snapshot(work: Path, batch: str) -> Path:
    """The validated rows of every batch since the full load up to `batch`."""
    return work / f"{batch}.duckdb"


def accumulated_batches(snapshot: Path) -> set[str]:
    """The batches whose rows a snapshot holds."""
    with open_database(snapshot) as connection:
        rows = connection.execute("SELECT DISTINCT batch FROM meta.accumulated").fetchall()
    return {str(row[0]) for row in rows}


def accept_batch(
    spec: DatasetSpec, batch: str, warehouse: Path, work: Path, config: LoadConfig = LoadConfig()
) -> LoadReport:
    """Validate `batch` into `snapshot(work, batch)` on top of every batch accepted since the
    warehouse's full load; the batches before it that are not validated yet against this
    warehouse go first, in name order. A batch validated already keeps its report."""
    with exclusive_lock(work / STATE_FILE, wait=True):
        loaded = loaded_batches(warehouse)
        state = read_state(work, warehouse)
        for earlier in list_batches(spec.root):
            if earlier >= batch:
                break
            if earlier not in {*loaded, *state.accepted, *state.refused}:
                try:
                    _validate(spec, earlier, warehouse, work, state, config)
                except DatasetError as error:
                    state.refused[earlier] = str(error)
                    _write_state(work, state)
        if batch in state.accepted:
            return LoadReport.from_dict(state.reports[batch])
        if batch in loaded:
            previous = snapshot(work, state.accepted[-1]) if state.accepted else None
            return validate_batch(
                spec,
                batch,
                warehouse,
                snapshot(work, batch),
                config,
                previous=previous,
                loaded=True,
            )
        try:
            return _validate(spec, batch, warehouse, work, state, config)
        except DatasetError as error:
            state.refused[batch] = str(error)
            _write_state(work, state)
            raise


def read_state(work: Path, warehouse: Path) -> Accumulated:
    """The state for `warehouse`: empty when none was written, or when it was for a warehouse
    that a full load has replaced since."""
    identity = _identity(warehouse)
    path = work / STATE_FILE
    if path.is_file():
        state = Accumulated(**json.loads(path.read_text()))
        if state.warehouse == identity:
            return state
    return Accumulated(identity)


def _validate(
    spec: DatasetSpec,
    batch: str,
    warehouse: Path,
    work: Path,
    state: Accumulated,
    config: LoadConfig,
) -> LoadReport:
    previous = snapshot(work, state.accepted[-1]) if state.accepted else None
    report = validate_batch(
        spec, batch, warehouse, snapshot(work, batch), config, previous=previous
    )
    state.accepted.append(batch)
    state.reports[batch] = report.to_dict()
    _write_state(work, state)
    return report


def _identity(warehouse: Path) -> str:
    """A full load writes a new file (renamed into place): its inode and time tell it apart."""
    status = os.stat(warehouse)
    return f"{status.st_ino}:{status.st_mtime_ns}"


def _write_state(work: Path, state: Accumulated) -> None:
    write_atomically(work / STATE_FILE, json.dumps(asdict(state), indent=2))
