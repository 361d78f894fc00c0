"""Real Dagster materialisations of the ingest stage, checks included."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb
import pytest

from assets.definitions import defs
from hier_pipeline.dataset import DatasetError
from tests.assets.materialise import materialise
from tests.builders import events_of_unknown_users, write_dataset


def materialize_raw_tables(source: Path, home: Path) -> dg.ExecuteInProcessResult:
    return materialise(["raw_tables"], source, home)


def test_definitions_load() -> None:
    repository = defs.get_repository_def()
    assert repository.asset_graph.get_all_asset_keys() >= {dg.AssetKey("raw_tables")}
    assert {"all_assets_job"} <= {job.name for job in repository.get_all_jobs()}
    spec = defs.resolve_asset_graph().get(dg.AssetKey("raw_tables"))
    assert spec.group_name == "ingest" and spec.description


@pytest.mark.parametrize("dataset", ["synthetic_world", "completejourney"])
def test_raw_tables_materialise_with_passing_checks(
    dataset: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    folder: Path = request.getfixturevalue(dataset)
    result = materialize_raw_tables(folder, tmp_path)
    assert result.success
    report = result.output_for_node("raw_tables")
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert set(checks) == {
        "primary_keys_unique_and_not_null",
        "foreign_keys_resolve",
        "times_in_range",
        "kinds_stored_and_finite",
        "counts_reconcile",
        "quarantine_rate",
        "no_batch_refused",
    }
    assert all(check.passed for check in checks.values()), {
        n: c.metadata for n, c in checks.items() if not c.passed
    }
    with duckdb.connect(str(report.database), read_only=True) as connection:
        for name, table in report.tables.items():
            assert table.reconciles
            if table.source != "implicit":
                in_file = connection.execute(
                    "SELECT count(*) FROM read_parquet(?)", [str(folder / table.source)]
                ).fetchone()
                assert in_file == (table.read,), name
            stored = connection.execute(f'SELECT count(*) FROM raw."{name}"').fetchone()
            assert stored == (table.accepted,), name
    materialization = result.asset_materializations_for_node("raw_tables")[0]
    assert materialization.metadata["dagster/row_count"].value == sum(
        t.accepted for t in report.tables.values()
    )


def test_completejourney_slice_quarantines_dangling_products(
    completejourney: Path, tmp_path: Path
) -> None:
    """The real data has transactions of products missing from the catalogue: they are kept aside."""
    result = materialize_raw_tables(completejourney, tmp_path)
    report = result.output_for_node("raw_tables")
    transactions = report.tables["transactions"]
    with duckdb.connect(str(report.database), read_only=True) as connection:
        expected = connection.execute(
            "SELECT count(*) FROM read_parquet(?) t ANTI JOIN read_parquet(?) p USING (product_id)",
            [
                str(completejourney / "transactions.parquet"),
                str(completejourney / "products.parquet"),
            ],
        ).fetchone()
    assert expected is not None and expected[0] > 0
    assert transactions.quarantined_by_reason == {"dangling_foreign_key": expected[0]}
    assert report.tables["households"].accepted == 40


def test_a_required_table_with_nothing_accepted_fails_ingest_with_its_reasons(
    tmp_path: Path,
) -> None:
    """It used to pass ingest and fail at training with "too few target-stage events"."""
    events = events_of_unknown_users(3)
    folder = write_dataset(tmp_path / "d", files={"events.csv": events})
    with pytest.raises(DatasetError, match=r"table 'events': all 3 rows were quarantined"):
        materialize_raw_tables(folder, tmp_path / "home")


def test_a_refused_batch_is_left_out_with_a_warning_and_the_rest_loads(tmp_path: Path) -> None:
    """One unreadable folder in incoming/ used to stop every full run until it was removed."""
    folder = write_dataset(tmp_path / "d")
    (folder / "incoming" / "b1").mkdir(parents=True)
    (folder / "incoming" / "b1" / "customers.csv").write_text("user_id\n9\n")
    result = materialize_raw_tables(folder, tmp_path / "home")
    assert result.success
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    refused = checks["no_batch_refused"]
    assert not refused.passed and refused.severity == dg.AssetCheckSeverity.WARN
    why = refused.metadata["refused"].value["b1"]
    assert why.startswith("file 'incoming/b1/customers.csv': names no file table")
    metadata = result.asset_materializations_for_node("raw_tables")[0].metadata
    assert metadata["batches_refused"].value == {"b1": why}
