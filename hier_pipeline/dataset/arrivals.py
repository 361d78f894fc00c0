"""Where new rows arrive: `incoming/<batch>/<table>.parquet|csv` inside the dataset folder.

A batch is a folder of files named after tables of dataset.yaml, with the columns that table's
file has, in the same order (a full run reads them after the table's file as one relation); any
table may receive rows. A batch's rows may reference the dataset's rows, those of every batch
accepted since the last full load, and its own. A full load records the batches it read
(`meta.batches`), which the incremental path then leaves to it. Image paths in a batch are
relative to the dataset folder, like every other image path. A batch appears atomically (written under a dot-name, then renamed),
so a reader never sees half of one; dot-folders are ignored. Batches are read in name order.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import duckdb

from hier_pipeline.dataset.errors import DatasetError
from hier_pipeline.dataset.parse import resolve_file
from hier_pipeline.dataset.schema import check_batch_file
from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.dataset.sql import connect, open_database

INCOMING = "incoming"
BATCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SUFFIXES = (".parquet", ".csv")


def incoming_folder(dataset: Path) -> Path:
    return dataset / INCOMING


def list_batches(dataset: Path) -> list[str]:
    """Names of the complete batches, in name order (dot-folders are still being written)."""
    folder = incoming_folder(dataset)
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and BATCH_NAME.match(p.name))


def batch_files(spec: DatasetSpec, batch: str) -> dict[str, Path]:
    """table -> the batch's file for it. A file named after no table is an error, not ignored:
    its rows would silently never arrive. Each file is resolved and contained like a `file:` of
    dataset.yaml (a symlink, or a symlinked folder, that leaves the dataset folder is refused),
    and has its table's format: a full load reads a table's files with one reader."""
    if not BATCH_NAME.match(batch):
        raise DatasetError(f"'{batch}' is not a batch name ({BATCH_NAME.pattern})")
    folder = incoming_folder(spec.root) / batch
    if not folder.is_dir():
        raise DatasetError("no such batch", file=str(folder.relative_to(spec.root)))
    files: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() not in SUFFIXES:
            continue
        relative = str(path.relative_to(spec.root))
        table = spec.tables.get(path.stem)
        if table is None or table.file is None:
            raise DatasetError(
                f"names no file table of dataset.yaml (tables: {sorted(spec.tables)})",
                file=relative,
            )
        if path.suffix.lower() != table.file.suffix.lower():
            raise DatasetError(
                f"the table is read from {table.file.suffix.lower()} files, so its batch files"
                f" must be {table.file.suffix.lower()} too",
                file=relative,
                table=table.name,
            )
        if path.stem in files:
            raise DatasetError("two files for one table", file=relative)
        files[path.stem] = resolve_file(spec.root, table.name, relative)
    if not files:
        raise DatasetError("the batch holds no table file", file=str(folder.relative_to(spec.root)))
    return files


def batch_spec(spec: DatasetSpec, batch: str) -> DatasetSpec:
    """The description with the batch's tables pointing at the batch's files (the other tables
    keep theirs, so that schemas and `where` predicates are checked as for a full load)."""
    files = batch_files(spec, batch)
    tables = {
        name: replace(table, file=files[name], batch_files=()) if name in files else table
        for name, table in spec.tables.items()
    }
    return replace(spec, tables=tables)


def with_batches(spec: DatasetSpec) -> DatasetSpec:
    """The description of everything that arrived: each table reads its file, then the files of
    every batch in name order (what a full run, a retrain, learns from).

    A batch that cannot be read as a whole (a file named after no table, columns unlike its
    table's file, a link to a file already read) is left out and named in `refused_batches` with
    its error: one bad folder in `incoming/` does not stop every full run until someone removes
    it, its files stay where they are, and the load report counts it."""
    found: dict[str, list[Path]] = {}
    refused: list[tuple[str, str]] = []
    with connect(threads=1) as connection:
        for batch in list_batches(spec.root):
            try:
                files = _readable_batch(spec, batch, found, connection)
            except DatasetError as error:
                refused.append((batch, str(error)))
                continue
            for table, path in files.items():
                found.setdefault(table, []).append(path)
    tables = {
        name: replace(table, batch_files=tuple(found.get(name, ())))
        for name, table in spec.tables.items()
    }
    return replace(spec, tables=tables, refused_batches=tuple(refused))


def _readable_batch(
    spec: DatasetSpec,
    batch: str,
    earlier: dict[str, list[Path]],
    connection: duckdb.DuckDBPyConnection,
) -> dict[str, Path]:
    """`batch_files` of a batch a full load can read after the `earlier` batches' files."""
    files = batch_files(spec, batch)
    for table, path in files.items():
        if path in [spec.tables[table].file, *earlier.get(table, [])]:
            # a link to a file already read: its rows would count twice
            raise DatasetError(
                f"is a link to {path.relative_to(spec.root)}, which the table already reads",
                file=f"{INCOMING}/{batch}/{path.name}",
                table=table,
            )
        check_batch_file(spec, spec.tables[table], path, connection)
    return files


def read_batches(spec: DatasetSpec) -> list[str]:
    """The batches whose files `spec` reads (those `with_batches` added), in name order."""
    return sorted({path.parent.name for t in spec.tables.values() for path in t.batch_files})


def record_batches(connection: duckdb.DuckDBPyConnection, spec: DatasetSpec) -> None:
    """`meta.batches` of a full load: the batches it read, so that the incremental path neither
    reads them a second time nor builds on rows the load has taken in."""
    connection.execute(
        "CREATE TABLE meta.batches AS SELECT unnest(?::VARCHAR[]) AS batch", [read_batches(spec)]
    )


def loaded_batches(warehouse: Path) -> set[str]:
    """The batches a full load read into `warehouse`."""
    with open_database(warehouse) as connection:
        try:
            rows = connection.execute("SELECT batch FROM meta.batches").fetchall()
        except duckdb.CatalogException:
            raise DatasetError(
                "the warehouse does not record which batches it loaded (it was loaded before"
                " they were recorded): materialize raw_tables again before adding batches",
                file=str(warehouse),
            ) from None
    return {str(row[0]) for row in rows}
