"""Asset group `ingest`: the dataset's tables, validated row by row into DuckDB."""

from collections.abc import Iterator

import dagster as dg

from assets.metadata import load_metadata
from hier_pipeline.dataset import LoadReport, load_dataset
from hier_pipeline.dataset.inspect import open_readonly
from hier_pipeline.dataset.quality import QUARANTINE_WARN_RATE
from resources import DatasetResource, StorageResource

GROUP = "ingest"
BLOCKING_CHECKS = {
    "primary_keys_unique_and_not_null": "Primary keys of accepted rows are unique and never null.",
    "foreign_keys_resolve": "Every non-null foreign key of an accepted row finds its parent row.",
    "times_in_range": "Every accepted time lies inside the loader's sane range.",
    "kinds_stored_and_finite": "Columns declared numeric or timestamp are stored as numbers or"
    " times, and no stored number or time is infinite or NaN.",
    "counts_reconcile": "For every table, rows in its files (counted without the loader's reader)"
    " = rows accepted + rows quarantined.",
}


@dg.asset(
    group_name=GROUP,
    kinds={"duckdb", "python"},
    owners=["team:hier-pipeline"],
    pool="duckdb_writer",
)
def raw_tables(
    context: dg.AssetExecutionContext, dataset: DatasetResource, storage: StorageResource
) -> dg.Output[LoadReport]:
    """Every table of the dataset, read through its dataset.yaml contract into DuckDB.

    Accepted rows land in `raw.<table>` (with `__row`, the source row, and `__time`, the parsed
    time); every rejected row is kept in `meta.quarantine` with a reason, never dropped.
    """
    spec = dataset.spec()
    report = load_dataset(spec, storage.path("warehouse", f"{spec.name}.duckdb"))
    context.log.info("loaded %s tables from %s", len(report.tables), dataset.folder())
    return dg.Output(
        report,
        metadata={
            "dataset": spec.name,
            "dataset_folder": dg.MetadataValue.path(str(spec.root)),
            **load_metadata(report),
        },
    )


@dg.multi_asset_check(
    specs=[
        *(
            dg.AssetCheckSpec(name, asset="raw_tables", description=text, blocking=True)
            for name, text in BLOCKING_CHECKS.items()
        ),
        dg.AssetCheckSpec(
            "quarantine_rate",
            asset="raw_tables",
            description=f"Warns when a table quarantines more than {QUARANTINE_WARN_RATE:.0%} of its"
            " rows (a table the roles or the funnel need with none accepted stops the load).",
        ),
        dg.AssetCheckSpec(
            "no_batch_refused",
            asset="raw_tables",
            description="Warns when a batch in incoming/ could not be read as a whole (a file"
            " named after no table, columns unlike its table's file) and was left out of the"
            " load, its files kept where they are.",
        ),
    ],
    ins={"raw_tables": dg.AssetIn("raw_tables")},
)
def raw_table_checks(
    dataset: DatasetResource, raw_tables: LoadReport
) -> Iterator[dg.AssetCheckResult]:
    """Great Expectations 1.x over what was stored; failures block every downstream stage."""
    from hier_pipeline.dataset.quality import quarantine_rates, run_quality_checks

    spec = dataset.spec()
    with open_readonly(raw_tables.database) as connection:
        outcomes = run_quality_checks(spec, connection)
        rates = quarantine_rates(connection)
    for outcome in outcomes:
        yield dg.AssetCheckResult(
            check_name=outcome.name,
            asset_key="raw_tables",
            passed=outcome.passed,
            metadata={
                "failing": dg.MetadataValue.json(outcome.failures),
                "values_checked": sum(outcome.checked.values()),
            },
        )
    high = {table: round(rate, 4) for table, rate in rates.items() if rate > QUARANTINE_WARN_RATE}
    yield dg.AssetCheckResult(
        check_name="quarantine_rate",
        asset_key="raw_tables",
        passed=not high,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "rates": dg.MetadataValue.json({t: round(r, 4) for t, r in rates.items()}),
            "above_threshold": dg.MetadataValue.json(high),
        },
    )
    yield dg.AssetCheckResult(
        check_name="no_batch_refused",
        asset_key="raw_tables",
        passed=not raw_tables.refused_batches,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"refused": dg.MetadataValue.json(raw_tables.refused_batches)},
    )
