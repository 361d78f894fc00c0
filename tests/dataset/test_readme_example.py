"""The README's worked dataset.yaml is a real one: with a few rows of the CSV files the README
describes, it parses, loads without quarantine and yields every funnel stage."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from hier_pipeline.dataset import load_dataset, parse_dataset

DATASET_DOC = Path(__file__).resolve().parents[2] / "docs" / "dataset.md"
FILES = {
    "customers.csv": "customer_id,signed_up,country\n1,2024-01-01,FR\n2,2024-01-02,DE\n",
    "brands.csv": "brand_id,name\n10,Acme outdoor\n11,Northwind kitchen\n",
    "products.csv": (
        "sku,brand_id,title,description,photo,listed_at\n"
        "100,10,Tent,A two-person tent,,2024-01-01\n"
        "101,11,Kettle,A steel kettle,,2024-01-03\n"
    ),
    "orders.csv": (
        "customer_id,sku,action,at\n"
        "1,100,view,2024-02-01 10:00\n1,100,buy,2024-02-01 10:05\n"
        "2,101,view,2024-02-02 11:00\n2,100,hide,2024-02-02 11:01\n"
    ),
}


def readme_example() -> str:
    text = DATASET_DOC.read_text(encoding="utf-8")
    match = re.search(r"<!-- example:dataset\.yaml[^>]*-->\n```yaml\n(.*?)```", text, re.DOTALL)
    assert match, "README lost its worked dataset.yaml example"
    return match.group(1)


def test_readme_dataset_yaml_loads_the_files_it_describes(tmp_path: Path) -> None:
    folder = tmp_path / "my_shop"
    folder.mkdir()
    (folder / "dataset.yaml").write_text(readme_example())
    for name, content in FILES.items():
        (folder / name).write_text(content)
    spec = parse_dataset(folder)
    report = load_dataset(spec, tmp_path / "shop.duckdb")
    assert {name: t.accepted for name, t in report.tables.items()} == {
        "customers": 2,
        "brands": 2,
        "products": 2,
        "orders": 4,
    }
    assert sum(t.quarantined for t in report.tables.values()) == 0
    assert [stage.name for stage in spec.funnel] == ["view", "purchase"]
    with duckdb.connect(str(report.database), read_only=True) as connection:
        hidden = connection.execute("SELECT count(*) FROM raw.orders WHERE action = 'hide'")
        assert hidden.fetchone() == (1,)
