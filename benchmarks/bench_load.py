"""Load-and-validate throughput and peak memory, against a plain DuckDB import of the same files.

    .venv/bin/python benchmarks/bench_load.py [DATASET_DIR] [--skip-checks]

Defaults to ../shared/datasets/completejourney. Each measurement runs in a fresh child process so
that peak RSS belongs to that step alone. The baseline copies every file into a DuckDB database
with no validation at all: the ratio is what the contract (keys, foreign keys, times, quarantine)
costs on top of reading the data.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import measure, write_results

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = REPO.parent / "shared" / "datasets" / "completejourney"


def _plain_import(folder: str, database: str) -> dict[str, Any]:
    """Baseline: every file copied into DuckDB as it is."""
    from hier_pipeline.dataset import parse_dataset
    from hier_pipeline.dataset.sql import connect, quote, reader_sql

    spec = parse_dataset(folder)
    connection = connect(database=database)
    rows = 0
    for table in spec.file_tables():
        assert table.file is not None
        connection.execute(
            f"CREATE TABLE {quote(table.name)} AS SELECT * FROM {reader_sql(table.file)}",
            [str(table.file)],
        )
        rows += int(connection.execute(f"SELECT count(*) FROM {quote(table.name)}").fetchone()[0])  # type: ignore[index]
    connection.close()
    return {"rows": rows}


def contract_load(folder: str, database: str) -> dict[str, Any]:
    from hier_pipeline.dataset import load_dataset, parse_dataset

    report = load_dataset(parse_dataset(folder), Path(database))
    return {
        "rows": sum(t.read for t in report.tables.values() if t.source != "implicit"),
        "quarantined": sum(t.quarantined for t in report.tables.values()),
        "reconciled": all(t.reconciles for t in report.tables.values()),
    }


def _quality_checks(folder: str, database: str) -> dict[str, Any]:
    from hier_pipeline.dataset import parse_dataset
    from hier_pipeline.dataset.quality import run_quality_checks
    from hier_pipeline.dataset.sql import open_database

    with open_database(Path(database)) as connection:
        outcomes = run_quality_checks(parse_dataset(folder), connection)
    return {
        "passed": all(o.passed for o in outcomes),
        "values_checked": sum(sum(o.checked.values()) for o in outcomes),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset", nargs="?", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--skip-checks", action="store_true")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-load-") as scratch:
        baseline = measure(_plain_import, arguments.dataset, Path(scratch) / "plain.duckdb")
        load = measure(contract_load, arguments.dataset, Path(scratch) / "loaded.duckdb")
        checks = (
            None
            if arguments.skip_checks
            else measure(_quality_checks, arguments.dataset, Path(scratch) / "loaded.duckdb")
        )
    results = {
        "dataset": str(arguments.dataset),
        "baseline_plain_duckdb_import": baseline,
        "contract_load": load,
        "quality_checks": checks,
        "load_over_baseline_wall": round(load["wall_s"] / max(baseline["wall_s"], 1e-9), 2),
        "rows_per_s": round(load["rows"] / load["wall_s"]),
    }
    write_results("load", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
