"""A broken description fails before anything is written, naming the file, table and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from hier_pipeline.dataset import DatasetError, load_dataset, parse_dataset
from tests.builders import tiny_description, write_dataset


def load_error(folder: Path) -> DatasetError:
    """The error from loading `folder`, after checking that no database was left behind."""
    database = folder.parent / "out" / "db.duckdb"
    with pytest.raises(DatasetError) as caught:
        load_dataset(parse_dataset(folder), database)
    assert not database.exists()
    assert not list(database.parent.glob("*partial*"))
    return caught.value


def test_tiny_description_parses(tmp_path: Path) -> None:
    spec = parse_dataset(write_dataset(tmp_path / "d"))
    assert set(spec.tables) == {"users", "brands", "products", "events"}
    assert spec.tables["brands"].implicit
    assert spec.target_stage.name == "purchase"
    assert spec.roles.advertiser == "brands"
    assert spec.tables["products"].text == ("title",)


def test_missing_file(tmp_path: Path) -> None:
    description = tiny_description()
    description["tables"]["users"]["file"] = "nobody.csv"
    with pytest.raises(
        DatasetError, match=r"file 'nobody.csv', table 'users': the file does not exist"
    ):
        parse_dataset(write_dataset(tmp_path / "d", description))


@pytest.mark.parametrize("path", ["../users.csv", "sub/../../users.csv"])
def test_path_outside_the_folder(tmp_path: Path, path: str) -> None:
    (tmp_path / "users.csv").write_text("user_id\n1\n")
    description = tiny_description()
    description["tables"]["users"]["file"] = path
    with pytest.raises(DatasetError, match="leaves the dataset folder"):
        parse_dataset(write_dataset(tmp_path / "d", description))


def test_absolute_path_and_escaping_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "secret.csv"
    outside.write_text("user_id\n1\n")
    description = tiny_description()
    description["tables"]["users"]["file"] = str(outside)
    with pytest.raises(DatasetError, match="must be relative"):
        parse_dataset(write_dataset(tmp_path / "a", description))
    folder = write_dataset(tmp_path / "b")
    (folder / "link.csv").symlink_to(outside)
    description["tables"]["users"]["file"] = "link.csv"
    write_dataset(folder, description)
    with pytest.raises(DatasetError, match="leaves the dataset folder"):
        parse_dataset(folder)


@pytest.mark.parametrize(
    ("field", "value", "column"),
    [
        ("foreign_keys", {"brand_id": "brands", "maker_id": "brands"}, "maker_id"),
        ("text", ["title", "blurb"], "blurb"),
    ],
)
def test_unknown_column(tmp_path: Path, field: str, value: object, column: str) -> None:
    description = tiny_description()
    description["tables"]["products"][field] = value
    error = load_error(write_dataset(tmp_path / "d", description))
    assert error.table == "products" and error.column == column
    assert "names a column the file does not have" in str(error)


def test_wrong_time_unit(tmp_path: Path) -> None:
    description = tiny_description()
    description["tables"]["events"].update(time_unit="fortnight", time_origin="2024-01-01")
    with pytest.raises(
        DatasetError, match=r"table 'events', column 'ts': time_unit 'fortnight' is not one of"
    ):
        parse_dataset(write_dataset(tmp_path / "d", description))


def test_time_unit_needs_integer_periods(tmp_path: Path) -> None:
    description = tiny_description()
    description["tables"]["events"].update(time_unit="week", time_origin="2024-01-01")
    error = load_error(write_dataset(tmp_path / "d", description))
    assert (error.table, error.column) == ("events", "ts")
    assert "must hold integers" in str(error)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("kind = = 'click'", "does not parse"),
        ("kind = 'click'; DROP TABLE users", "does not parse"),
        ("kind = 'click') OR (1 = 1", "does not parse"),
        ("colour = 'red'", "does not apply"),
        ("kind IN (SELECT content FROM read_text('/etc/hostname'))", "subquery expression"),
    ],
)
def test_where_that_does_not_parse_or_escapes(tmp_path: Path, where: str, message: str) -> None:
    description = tiny_description()
    description["funnel"][0]["where"] = where
    error = load_error(write_dataset(tmp_path / "d", description))
    assert error.table == "events"
    assert message in str(error)


@pytest.mark.parametrize("name", ['users"; DROP TABLE events; --', "Users", "1users"])
def test_table_name_crafted_as_sql(tmp_path: Path, name: str) -> None:
    description = tiny_description()
    description["tables"][name] = description["tables"].pop("users")
    with pytest.raises(DatasetError, match=r"table names must match"):
        parse_dataset(write_dataset(tmp_path / "d", description))


def test_empty_files(tmp_path: Path) -> None:
    error = load_error(write_dataset(tmp_path / "a", files={"users.csv": ""}))
    assert error.table == "users" and "empty" in str(error)
    error = load_error(
        write_dataset(tmp_path / "b", files={"events.csv": "user_id,product_id,kind,ts\n"})
    )
    assert error.table == "events" and "no rows" in str(error)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["tables"]["users"].update(colour="blue"), "unknown key"),
        (lambda d: d.pop("roles"), "roles must be a mapping"),
        (lambda d: d["roles"].update(item="nothing"), "unknown table 'nothing'"),
        (
            lambda d: d["tables"]["events"]["foreign_keys"].update(user_id="people"),
            "unknown table 'people'",
        ),
        (
            lambda d: d["funnel"][0].update(user="product_id"),
            "must be a foreign key to the user table",
        ),
        (lambda d: d["funnel"].clear(), "non-empty list"),
        (lambda d: d["tables"]["brands"].update(file="x.csv"), "implicit table has no file"),
    ],
)
def test_broken_descriptions(tmp_path: Path, change: object, message: str) -> None:
    description = tiny_description()
    change(description)  # type: ignore[operator]
    with pytest.raises(DatasetError, match=message):
        parse_dataset(write_dataset(tmp_path / "d", description))


def test_not_yaml(tmp_path: Path) -> None:
    folder = write_dataset(tmp_path / "d")
    (folder / "dataset.yaml").write_text("tables: [unclosed\n")
    with pytest.raises(DatasetError, match=r"file .dataset\.yaml.: not valid YAML"):
        parse_dataset(folder)
