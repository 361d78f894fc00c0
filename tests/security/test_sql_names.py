"""Names and predicates from a dataset.yaml never run as SQL: hostile column names in every role are
only names, end to end (load and graph), and a `where` that smuggles a statement is refused before
anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hier_pipeline.dataset import DatasetError, load_dataset, parse_dataset
from hier_pipeline.dataset.sql import open_database
from hier_pipeline.graph import build_graph
from tests.builders import TINY_FILES, tiny_description, write_dataset

# Every column of the tiny dataset renamed to something that breaks naive SQL assembly.
HOSTILE = {
    "user_id": 'user_id"; DROP TABLE raw.events; --',
    "product_id": "product_id'); DELETE FROM meta.quarantine; --",
    "brand_id": 'brand"id',
    "title": "title /* comment",
    "ts": "ts`; ATTACH '/tmp/x.db'",
    "created_at": "créé à — ✓",
    "kind": "kind\\' OR 1=1",
}


def _csv_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _hostile_dataset(folder: Path) -> Path:
    """The tiny dataset with every column renamed in the files and in dataset.yaml alike."""
    files = {}
    for file_name, content in TINY_FILES.items():
        header, rest = content.split("\n", 1)
        names = [_csv_name(HOSTILE.get(name, name)) for name in header.split(",")]
        files[file_name] = ",".join(names) + "\n" + rest
    text = yaml.safe_dump(tiny_description(), sort_keys=False)
    document = yaml.safe_load(text)

    def rename(value: object) -> object:
        if isinstance(value, dict):
            return {rename(k): rename(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rename(v) for v in value]
        return HOSTILE.get(value, value) if isinstance(value, str) else value

    document = rename(document)
    for stage in document["funnel"]:
        quoted = '"' + HOSTILE["kind"].replace('"', '""') + '"'
        stage["where"] = stage["where"].replace("kind", quoted, 1)
    return write_dataset(folder, document, files)


def test_hostile_column_names_are_only_names_end_to_end(tmp_path: Path) -> None:
    spec = parse_dataset(_hostile_dataset(tmp_path / "d"))
    report = load_dataset(spec, tmp_path / "raw.duckdb")
    assert {name: t.accepted for name, t in report.tables.items()} == {
        "users": 3,
        "brands": 2,
        "products": 3,
        "events": 5,
    }
    with open_database(report.database) as connection:
        columns = {row[0] for row in connection.execute("DESCRIBE raw.events").fetchall()}
        assert {HOSTILE["user_id"], HOSTILE["product_id"], HOSTILE["ts"]} <= columns
        assert connection.execute("SELECT count(*) FROM meta.quarantine").fetchone() == (0,)
    graph = build_graph(spec, report.database)
    assert graph.data["users"].num_nodes == 3
    stages = graph.data["events"].stage.tolist()
    assert stages == [0, 1, 0, 0, 1]  # the quoted `where` still tells clicks from purchases


@pytest.mark.parametrize(
    "where",
    [
        "kind = 'click') ; DROP TABLE users; SELECT (1",
        "kind IN (SELECT * FROM query('DROP TABLE raw.users'))",
        "kind = 'click' UNION SELECT 'purchase'",
        "kind IN (SELECT * FROM read_csv('/etc/passwd'))",
        "kind = 'click' OR (SELECT count(*) FROM glob('/*')) > 0",
        "(SELECT count(*) FROM range(1e11)) > 0",  # unbounded cost, before row-local only
        "kind IN (SELECT 'purchase')",
        "EXISTS (SELECT 1) AND kind = 'purchase'",
        "count(*) OVER () > 1 AND kind = 'purchase'",
        "len(range(100000000000)) > 0 AND kind = 'purchase'",
        "length(repeat(kind, 1000000000)) > 0",
    ],
)
def test_where_smuggling_a_statement_or_a_file_read_is_refused(tmp_path: Path, where: str) -> None:
    description = tiny_description()
    description["funnel"][1]["where"] = where
    folder = write_dataset(tmp_path / "d", description)
    database = tmp_path / "raw.duckdb"
    with pytest.raises(DatasetError) as caught:
        load_dataset(parse_dataset(folder), database)
    assert caught.value.table == "events"
    assert f"'where: {where}'" in str(caught.value)
    assert not database.exists()


def test_a_row_local_where_of_every_shape_is_accepted(tmp_path: Path) -> None:
    description = tiny_description()
    description["funnel"][1]["where"] = (
        "lower(kind) IN ('purchase', 'buy') AND ts IS NOT NULL AND CAST(user_id AS INTEGER)"
        " BETWEEN 0 AND 10 AND CASE WHEN kind LIKE 'p%' THEN true ELSE false END"
        " AND list_filter([user_id], lambda v: v > 0) <> []"
    )
    spec = parse_dataset(write_dataset(tmp_path / "d", description))
    report = load_dataset(spec, tmp_path / "raw.duckdb")
    assert build_graph(spec, report.database).data["events"].stage.tolist() == [0, 1, 0, 0, 1]


def test_a_where_cannot_read_through_the_graph_builder(tmp_path: Path) -> None:
    """The graph builder parses `where` with the same rules (and applies it on a read-only
    connection with external access off)."""
    folder = write_dataset(tmp_path / "d")
    report = load_dataset(parse_dataset(folder), tmp_path / "raw.duckdb")
    description = tiny_description()
    description["funnel"][1]["where"] = "kind IN (SELECT content FROM read_text('/etc/hostname'))"
    spec = parse_dataset(write_dataset(folder, description))  # changed after the load's checks
    with pytest.raises(DatasetError, match="a subquery expression is refused"):
        build_graph(spec, report.database)
