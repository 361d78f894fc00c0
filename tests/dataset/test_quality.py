"""The Great Expectations checks pass on what the loader stored, and fail when stored data is wrong."""

from __future__ import annotations

from pathlib import Path

import duckdb

from hier_pipeline.dataset import load_dataset, parse_dataset
from hier_pipeline.dataset.quality import quarantine_rates, run_quality_checks
from tests.builders import TINY_FILES, write_dataset


def test_checks_pass_on_a_loaded_dataset_with_quarantined_rows(tmp_path: Path) -> None:
    events = TINY_FILES["events.csv"] + "99,10,click,2024-02-05 00:00:00\n"
    spec = parse_dataset(write_dataset(tmp_path / "d", files={"events.csv": events}))
    report = load_dataset(spec, tmp_path / "db.duckdb")
    with duckdb.connect(str(report.database), read_only=True) as connection:
        outcomes = run_quality_checks(spec, connection)
        rates = quarantine_rates(connection)
    assert [o.name for o in outcomes] == [
        "primary_keys_unique_and_not_null",
        "foreign_keys_resolve",
        "times_in_range",
        "kinds_stored_and_finite",
        "counts_reconcile",
    ]
    assert all(o.passed for o in outcomes), [o for o in outcomes if not o.passed]
    assert rates["events"] == 1 / 6
    assert outcomes[1].checked["events.user_id"] == 5


def test_checks_fail_when_the_stored_tables_break_the_contract(tmp_path: Path) -> None:
    spec = parse_dataset(write_dataset(tmp_path / "d"))
    report = load_dataset(spec, tmp_path / "db.duckdb")
    with duckdb.connect(str(report.database)) as connection:
        connection.execute(
            "INSERT INTO raw.users (__row, user_id, signup, age) VALUES (9, 1, '2024-01-01', 1)"
        )
        connection.execute("UPDATE raw.events SET user_id = 42 WHERE __row = 1")
        connection.execute(
            "UPDATE raw.products SET __time = TIMESTAMP '1900-01-01' WHERE product_id = 10"
        )
        connection.execute("UPDATE raw.products SET price = 'nan' WHERE product_id = 11")
        connection.execute("ALTER TABLE raw.users ALTER age TYPE VARCHAR")
        outcomes = {o.name: o for o in run_quality_checks(spec, connection)}
    assert outcomes["primary_keys_unique_and_not_null"].failures == {"users.user_id": 2}
    assert outcomes["foreign_keys_resolve"].failures == {"events.user_id": 1}
    assert outcomes["times_in_range"].failures == {"products.created_at": 1}
    assert outcomes["counts_reconcile"].failures == {"users": 2}
    assert outcomes["kinds_stored_and_finite"].failures == {"users.age": 4, "products.price": 1}


def test_counts_reconcile_against_the_rows_counted_in_the_files(tmp_path: Path) -> None:
    """`read` is the files' own count, so a quarantined row that goes missing is noticed."""
    events = TINY_FILES["events.csv"] + "99,10,click,2024-02-05 00:00:00\n"
    spec = parse_dataset(write_dataset(tmp_path / "d", files={"events.csv": events}))
    report = load_dataset(spec, tmp_path / "db.duckdb")
    with duckdb.connect(str(report.database)) as connection:
        read = connection.execute("SELECT read FROM meta.tables WHERE table_name = 'events'")
        assert read.fetchone() == (6,)
        connection.execute("DELETE FROM meta.quarantine WHERE table_name = 'events'")
        outcomes = {o.name: o for o in run_quality_checks(spec, connection)}
    assert outcomes["counts_reconcile"].failures == {"events": 1}
