"""Bad rows are quarantined with a reason naming table, column and row; counts always reconcile."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from hier_pipeline.dataset import DatasetError, LoadReport, load_dataset, parse_dataset
from tests.builders import TINY_FILES, tiny_description, write_dataset


def load(folder: Path) -> tuple[LoadReport, duckdb.DuckDBPyConnection]:
    report = load_dataset(parse_dataset(folder), folder.parent / "out" / "db.duckdb")
    for table in report.tables.values():
        assert table.reconciles, table
    return report, duckdb.connect(str(report.database), read_only=True)


def quarantined(connection: duckdb.DuckDBPyConnection, table: str) -> list[tuple[object, ...]]:
    return connection.execute(
        "SELECT row_number, line_number, column_name, reason, detail FROM meta.quarantine"
        " WHERE table_name = ? ORDER BY row_number, line_number",
        [table],
    ).fetchall()


def test_clean_dataset_loads_every_row(tmp_path: Path) -> None:
    report, connection = load(write_dataset(tmp_path / "d"))
    assert {name: t.accepted for name, t in report.tables.items()} == {
        "users": 3,
        "products": 3,
        "events": 5,
        "brands": 2,
    }
    assert connection.execute("SELECT count(*) FROM meta.quarantine").fetchone() == (0,)
    times = connection.execute("SELECT min(__time), max(__time) FROM raw.events").fetchone()
    assert times is not None and str(times[0]) == "2024-02-01 10:00:00"
    assert connection.execute("SELECT brand_id FROM raw.brands ORDER BY 1").fetchall() == [
        (100,),
        (200,),
    ]


def test_duplicate_and_null_primary_keys(tmp_path: Path) -> None:
    users = TINY_FILES["users.csv"] + "2,2024-03-01,50\n,2024-03-02,20\n"
    report, connection = load(write_dataset(tmp_path / "d", files={"users.csv": users}))
    assert report.tables["users"].quarantined_by_reason == {
        "duplicate_primary_key": 1,
        "null_primary_key": 1,
    }
    rows = quarantined(connection, "users")
    assert rows[0][:4] == (4, None, "user_id", "duplicate_primary_key")
    assert rows[0][4] == "row 4: users.user_id = 2 repeats (first at row 2)"
    assert rows[1][4] == "row 5: users.user_id is null"
    assert connection.execute("SELECT age FROM raw.users WHERE user_id = 2").fetchall() == [(41,)]


def test_dangling_foreign_keys_keep_the_whole_row(tmp_path: Path) -> None:
    events = (
        TINY_FILES["events.csv"]
        + "99,10,click,2024-02-05 00:00:00\n1,77,click,2024-02-05 00:00:00\n"
    )
    report, connection = load(write_dataset(tmp_path / "d", files={"events.csv": events}))
    assert report.tables["events"].quarantined_by_reason == {"dangling_foreign_key": 2}
    assert report.tables["events"].accepted == 5
    rows = quarantined(connection, "events")
    assert rows[0][4] == "row 6: events.user_id = 99 not found in users.user_id"
    assert rows[1][2:4] == ("product_id", "dangling_foreign_key")
    kept = connection.execute(
        "SELECT row_data FROM meta.quarantine WHERE row_number = 7"
    ).fetchone()
    assert kept is not None and json.loads(kept[0])["product_id"] == 77


def test_foreign_key_to_a_quarantined_parent_is_dangling(tmp_path: Path) -> None:
    products = TINY_FILES["products.csv"].replace(
        "11,100,trail running socks,9.0,2024-01-01", "11,100,socks,9.0,not a day"
    )
    report, connection = load(write_dataset(tmp_path / "d", files={"products.csv": products}))
    assert report.tables["products"].quarantined_by_reason == {"unparseable_time": 1}
    assert report.tables["events"].quarantined_by_reason == {"dangling_foreign_key": 2}
    assert {row[2] for row in quarantined(connection, "events")} == {"product_id"}


@pytest.mark.parametrize(
    ("ts", "reason"),
    [
        ("yesterday", "unparseable_time"),
        ("1800-01-01 00:00:00", "time_out_of_range"),
        ("2999-01-01 00:00:00", "time_out_of_range"),
        ("", "missing_time"),
    ],
)
def test_bad_event_times(tmp_path: Path, ts: str, reason: str) -> None:
    events = TINY_FILES["events.csv"] + f"1,11,click,{ts}\n"
    report, connection = load(write_dataset(tmp_path / "d", files={"events.csv": events}))
    assert report.tables["events"].quarantined_by_reason == {reason: 1}
    row = quarantined(connection, "events")[0]
    assert row[0] == 6 and row[2] == "ts" and row[3] == reason
    assert "events.ts" in str(row[4])


def test_entity_without_time_is_known_from_the_start(tmp_path: Path) -> None:
    products = TINY_FILES["products.csv"] + "13,200,milk frother,25.0,\n"
    report, connection = load(write_dataset(tmp_path / "d", files={"products.csv": products}))
    assert report.tables["products"].accepted == 4
    assert connection.execute(
        "SELECT __time FROM raw.products WHERE product_id = 13"
    ).fetchone() == (None,)


def test_integer_periods_become_times(tmp_path: Path) -> None:
    description = tiny_description()
    description["tables"]["events"].update(time="week", time_unit="week", time_origin="2024-01-01")
    for stage in description["funnel"]:
        stage["time"] = "week"
    events = "user_id,product_id,kind,week\n1,10,click,1\n1,10,purchase,3\n"
    _, connection = load(write_dataset(tmp_path / "d", description, files={"events.csv": events}))
    times = connection.execute(
        "SELECT CAST(__time AS VARCHAR) FROM raw.events ORDER BY __row"
    ).fetchall()
    assert times == [("2024-01-01 00:00:00",), ("2024-01-15 00:00:00",)]


def test_malformed_csv_rows(tmp_path: Path) -> None:
    products = (
        TINY_FILES["products.csv"]
        + "13,200\n14,200,mug,5.0,2024-01-01,extra\n16,200,tea,3.0,2024-01-02\n"
    )
    report, connection = load(write_dataset(tmp_path / "d", files={"products.csv": products}))
    table = report.tables["products"]
    assert table.quarantined_by_reason == {"csv_malformed": 2}
    assert (table.read, table.accepted) == (6, 4)  # product 16 after the broken lines is still read
    rows = quarantined(connection, "products")
    assert [row[1] for row in rows] == [5, 6]
    assert "products, line 5 of products.csv: Expected Number of Columns: 5 Found: 2" in str(
        rows[0][4]
    )
    raw_line = connection.execute(
        "SELECT row_data FROM meta.quarantine WHERE line_number = 6"
    ).fetchone()
    assert raw_line == ("14,200,mug,5.0,2024-01-01,extra",)


@pytest.mark.parametrize(
    "line", ['13,200,"unterminated,5.0,2024-01-01', '13,200,"stray "quote" inside",5.0,2024-01-01']
)
def test_broken_quoting_is_a_clear_file_error(tmp_path: Path, line: str) -> None:
    """DuckDB's sniffer cannot place the columns of such a file at all, so the file is refused."""
    products = TINY_FILES["products.csv"] + line + "\n14,200,x,1.0,2024-01-01\n"
    with pytest.raises(
        DatasetError, match=r"file 'products.csv', table 'products': cannot be read"
    ):
        load_dataset(
            parse_dataset(write_dataset(tmp_path / "d", files={"products.csv": products})),
            tmp_path / "db.duckdb",
        )
    assert not (tmp_path / "db.duckdb").exists()


def test_non_utf8_text(tmp_path: Path) -> None:
    products = TINY_FILES[
        "products.csv"
    ].encode() + "13,200,caf\xe9 cr\xe8me,4.0,2024-01-01\n".encode("latin-1")
    report, connection = load(write_dataset(tmp_path / "d", files={"products.csv": products}))
    assert report.tables["products"].quarantined_by_reason == {"csv_encoding": 1}
    row = quarantined(connection, "products")[0]
    assert row[1] == 5 and row[2] == "title" and "utf-8" in str(row[4])


def test_declared_numeric_column_that_does_not_parse(tmp_path: Path) -> None:
    description = tiny_description()
    description["tables"]["users"]["columns"] = {"age": "numeric"}
    users = "user_id,signup,age\n1,2024-01-01,30\n2,2024-01-02,forty\n3,2024-01-03,25\n"
    report, connection = load(
        write_dataset(tmp_path / "d", description, files={"users.csv": users})
    )
    assert report.tables["users"].quarantined_by_reason == {"not_numeric": 1}
    assert quarantined(connection, "users")[0][4] == "row 2: users.age = forty is not numeric"
    assert connection.execute("SELECT typeof(age) FROM raw.users LIMIT 1").fetchone() == ("DOUBLE",)


def test_column_names_crafted_as_sql_are_only_names(tmp_path: Path) -> None:
    description = tiny_description()
    evil = 'title"; DROP TABLE raw.users; --'
    description["tables"]["products"]["text"] = [evil]
    products = TINY_FILES["products.csv"].replace(
        "title", f'"{evil.replace(chr(34), chr(34) * 2)}"', 1
    )
    report, connection = load(
        write_dataset(tmp_path / "d", description, files={"products.csv": products})
    )
    assert report.tables["users"].accepted == 3
    assert evil in [row[0] for row in connection.execute("DESCRIBE raw.products").fetchall()]


def test_header_only_table_that_nothing_needs_is_empty_not_an_error(tmp_path: Path) -> None:
    description = tiny_description()
    description["tables"]["reviews"] = {
        "file": "reviews.csv",
        "foreign_keys": {"product_id": "products"},
    }
    report, _ = load(
        write_dataset(tmp_path / "d", description, files={"reviews.csv": "product_id,stars\n"})
    )
    assert (report.tables["reviews"].read, report.tables["reviews"].accepted) == (0, 0)


def test_self_referencing_table(tmp_path: Path) -> None:
    description = tiny_description()
    description["tables"]["categories"] = {
        "file": "categories.csv",
        "primary_key": "category_id",
        "foreign_keys": {"parent_id": "categories"},
    }
    categories = "category_id,parent_id,name\n1,,sports\n2,1,running\n3,9,orphan\n"
    report, connection = load(
        write_dataset(tmp_path / "d", description, files={"categories.csv": categories})
    )
    assert report.tables["categories"].quarantined_by_reason == {"dangling_foreign_key": 1}
    assert connection.execute("SELECT category_id FROM raw.categories ORDER BY 1").fetchall() == [
        (1,),
        (2,),
    ]


def test_parquet_and_reload_replaces_the_database(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "d")
    duckdb.sql(
        f"COPY (SELECT * FROM read_csv('{folder / 'events.csv'}')) TO '{folder / 'events.parquet'}' (FORMAT parquet)"
    )
    description = tiny_description()
    description["tables"]["events"]["file"] = "events.parquet"
    write_dataset(folder, description)
    first, connection = load(folder)
    connection.close()
    second, connection = load(folder)
    assert first.to_dict() == second.to_dict()
    assert connection.execute("SELECT count(*) FROM raw.events").fetchone() == (5,)


def test_database_file_named_like_a_schema(tmp_path: Path) -> None:
    """DuckDB names a catalog after its file: `raw.duckdb` must not clash with the `raw` schema."""
    from hier_pipeline.dataset.quality import run_quality_checks
    from hier_pipeline.dataset.sql import open_database

    spec = parse_dataset(write_dataset(tmp_path / "d"))
    report = load_dataset(spec, tmp_path / "raw.duckdb")
    with open_database(report.database) as connection:
        assert all(outcome.passed for outcome in run_quality_checks(spec, connection))
