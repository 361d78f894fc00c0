"""Nothing is lost between the files and the report: every row a file holds, counted without the
reader, is accepted or quarantined once; a value the reader cannot place costs its row, never
the load."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from hier_pipeline.dataset import DatasetError, load_dataset, parse_dataset
from hier_pipeline.dataset.arrivals import with_batches
from hier_pipeline.dataset.counting import count_records
from tests.builders import TINY_FILES, events_of_unknown_users, tiny_description, write_dataset


def _quarantine(database: Path, table: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(database), read_only=True) as connection:
        return connection.execute(
            "SELECT source_file, line_number, row_number, reason, detail FROM meta.quarantine"
            " WHERE table_name = ? ORDER BY source_file, line_number, row_number",
            [table],
        ).fetchall()


def test_bad_lines_at_the_same_line_of_two_files_are_two_rows(tmp_path: Path) -> None:
    """A table split over its file and a batch file, each with a broken line 3: both are kept."""
    users = "user_id,signup,age\n1,2024-01-01,30\n2\n3,2024-01-03,25\n"
    folder = write_dataset(tmp_path / "d", files={"users.csv": users})
    batch = folder / "incoming" / "b1"
    batch.mkdir(parents=True)
    (batch / "users.csv").write_text("user_id,signup,age\n4,2024-01-04,50\n5\n6,2024-01-06,60\n")
    report = load_dataset(with_batches(parse_dataset(folder)), tmp_path / "db.duckdb")
    table = report.tables["users"]
    assert (table.read, table.accepted, table.quarantined) == (6, 4, 2)
    assert table.quarantined_by_reason == {"csv_malformed": 2}
    rows = _quarantine(report.database, "users")
    assert [row[:2] for row in rows] == [("incoming/b1/users.csv", 3), ("users.csv", 3)]
    assert str(rows[0][4]).startswith("users, line 3 of incoming/b1/users.csv: Expected Number")


def test_rows_of_a_batch_file_name_it(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "d")
    batch = folder / "incoming" / "b1"
    batch.mkdir(parents=True)
    (batch / "users.csv").write_text("user_id,signup,age\n1,2024-01-04,50\n")
    report = load_dataset(with_batches(parse_dataset(folder)), tmp_path / "db.duckdb")
    assert [row[0::3] for row in _quarantine(report.database, "users")] == [
        ("incoming/b1/users.csv", "duplicate_primary_key")
    ]


def test_a_reader_that_invents_a_row_refuses_the_file(tmp_path: Path) -> None:
    """A lone carriage return in a `\\n` file: DuckDB's reader reads 3 rows where the file holds 2
    (the independent count), so the load stops naming the file instead of reporting 3."""
    description = tiny_description()
    description["tables"]["tags"] = {"file": "tags.csv"}
    folder = write_dataset(tmp_path / "d", description, files={"tags.csv": "tag\n2,\r,\r\n"})
    assert count_records(folder / "tags.csv") == 2
    with pytest.raises(DatasetError, match=r"file 'tags.csv', table 'tags': the file holds 2 rows"):
        load_dataset(parse_dataset(folder), tmp_path / "db.duckdb")


def test_parquet_rows_are_counted_from_the_footer(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "d")
    duckdb.sql(
        f"COPY (SELECT * FROM range(7) t(x)) TO '{folder / 'seven.parquet'}' (FORMAT parquet,"
        " ROW_GROUP_SIZE 3)"
    )
    assert count_records(folder / "seven.parquet") == 7
    assert count_records(folder / "events.csv") == 5


def _week_description(unit: str) -> dict:
    description = tiny_description()
    description["tables"]["events"].update(time="period", time_unit=unit, time_origin="2024-01-01")
    for stage in description["funnel"]:
        stage["time"] = "period"
    return description


@pytest.mark.parametrize(
    ("unit", "period"),
    [
        ("week", 9_000_000_000_000_000_000),  # past BIGINT: read as HUGEINT
        ("week", 2**62),
        ("day", -(2**62)),
        ("day", 400_000),  # about year 3119: a timestamp, but past the sane range
        ("second", 2**62),
        ("hour", 10**15),
        ("minute", -(10**15)),
    ],
)
def test_an_integer_period_beyond_any_timestamp_is_quarantined(
    tmp_path: Path, unit: str, period: int
) -> None:
    events = f"user_id,product_id,kind,period\n1,10,click,1\n1,10,purchase,3\n3,11,click,{period}\n"
    folder = write_dataset(tmp_path / "d", _week_description(unit), files={"events.csv": events})
    report = load_dataset(parse_dataset(folder), tmp_path / "db.duckdb")
    table = report.tables["events"]
    assert (table.read, table.accepted) == (3, 2)
    assert table.quarantined_by_reason == {"time_out_of_range": 1}
    detail = _quarantine(report.database, "events")[0][4]
    assert str(detail).startswith(f"row 3: events.period = {period}")
    assert "is outside [1970-01-01 00:00:00, 2100-01-01 00:00:00)" in str(detail)


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity"])
def test_non_finite_numbers_are_quarantined(tmp_path: Path, value: str) -> None:
    """Declared numeric (`age`, read as text here) and inferred float (`price`) columns alike."""
    users = TINY_FILES["users.csv"] + f"4,2024-01-04,{value}\n"
    products = TINY_FILES["products.csv"] + f"13,200,kettle,{value},2024-01-05\n"
    folder = write_dataset(tmp_path / "d", files={"users.csv": users, "products.csv": products})
    report = load_dataset(parse_dataset(folder), tmp_path / "db.duckdb")
    for table, column in (("users", "age"), ("products", "price")):
        assert report.tables[table].quarantined_by_reason == {"not_finite": 1}
        detail = _quarantine(report.database, table)[0][4]
        assert str(detail).startswith(f"row 4: {table}.{column} = ")
        assert str(detail).endswith(" is not a finite number")


def test_non_finite_parquet_floats_are_quarantined(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "d")
    duckdb.sql(
        f"""COPY (SELECT * REPLACE (CASE product_id WHEN 11 THEN 'nan'::DOUBLE ELSE price END
                  AS price) FROM read_csv('{folder / "products.csv"}'))
            TO '{folder / "products.parquet"}' (FORMAT parquet)"""
    )
    description = tiny_description()
    description["tables"]["products"]["file"] = "products.parquet"
    report = load_dataset(parse_dataset(write_dataset(folder, description)), tmp_path / "db.duckdb")
    assert report.tables["products"].quarantined_by_reason == {"not_finite": 1}
    assert report.tables["products"].read == 3


def test_a_required_table_with_every_row_quarantined_stops_the_load_with_its_reasons(
    tmp_path: Path,
) -> None:
    events = events_of_unknown_users(4)
    folder = write_dataset(tmp_path / "d", files={"events.csv": events})
    with pytest.raises(DatasetError) as caught:
        load_dataset(parse_dataset(folder), tmp_path / "db.duckdb")
    message = str(caught.value)
    assert message.startswith(
        "table 'events': all 4 rows were quarantined, but the user/item roles or a funnel stage"
        " need it: quarantined dangling_foreign_key: 4; first: "
    )
    assert "row 1: events.user_id = 90 not found in users.user_id" in message
    assert not (tmp_path / "db.duckdb").exists()


def test_a_batch_file_that_widens_a_column_type_costs_rows_not_the_load(tmp_path: Path) -> None:
    """Found by fuzzing: `ts` reads as TIMESTAMP in the table's file and as text with a batch
    file whose `ts` is `0`; the rules were typed after the file alone and the cast aborted."""
    folder = write_dataset(tmp_path / "d")
    batch = folder / "incoming" / "b1"
    batch.mkdir(parents=True)
    (batch / "events.csv").write_text("user_id,product_id,kind,ts\n1,10,click,0\n")
    report = load_dataset(with_batches(parse_dataset(folder)), tmp_path / "db.duckdb")
    assert report.tables["events"].quarantined_by_reason == {"unparseable_time": 1}
    assert (report.tables["events"].read, report.tables["events"].accepted) == (6, 5)


def test_a_target_stage_with_every_event_quarantined_stops_the_load(tmp_path: Path) -> None:
    """Clicks load, every purchase points at a missing product: training would find no target."""
    events = TINY_FILES["events.csv"].replace("purchase", "click") + (
        "1,77,purchase,2024-02-05 00:00:00\n2,78,purchase,2024-02-06 00:00:00\n"
    )
    folder = write_dataset(tmp_path / "d", files={"events.csv": events})
    with pytest.raises(DatasetError) as caught:
        load_dataset(parse_dataset(folder), tmp_path / "db.duckdb")
    assert str(caught.value).startswith(
        "table 'events': no accepted row is an event of the target stage 'purchase'"
        " (where: kind = 'purchase'): quarantined dangling_foreign_key: 2; first: row 6:"
        " events.product_id = 77 not found in products.product_id"
    )
