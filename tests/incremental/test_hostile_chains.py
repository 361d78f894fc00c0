"""Chains of batches that must not be taken at their word: a batch referencing one that was
refused or whose rows were rejected, two batches defining one key, a batch arriving while a full
run loads. Each bad row is quarantined with its table, column and row, and counted."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from hier_pipeline.dataset import DatasetError, LoadReport, load_dataset, parse_dataset
from hier_pipeline.dataset.arrivals import incoming_folder
from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.dataset.sql import open_database
from hier_pipeline.incremental.accumulated import accept_batch, read_state
from tests.incremental.test_chain import only_batches_up_to, world_without_batches


@pytest.fixture
def world(arrivals: Path, tmp_path: Path) -> Path:
    return world_without_batches(arrivals, tmp_path / "world")


def write_batch(world: Path, name: str, tables: dict[str, pd.DataFrame]) -> None:
    """A batch as a producer writes one: under a dot-name, then renamed into place."""
    scratch = incoming_folder(world) / f".{name}"
    scratch.mkdir(parents=True)
    for table, frame in tables.items():
        frame.to_parquet(scratch / f"{table}.parquet", index=False)
    os.replace(scratch, incoming_folder(world) / name)


def new_products(world: Path, first_id: int, n: int) -> pd.DataFrame:
    """`n` products of the dataset's first advertiser with ids from `first_id`."""
    products = pd.read_parquet(world / "products.parquet").head(n).copy()
    products["product_id"] = range(first_id, first_id + n)
    return products


def events_on(world: Path, product_ids: list[int]) -> pd.DataFrame:
    """One dataset event row per product, moved onto it (a user of the dataset's)."""
    events = pd.read_parquet(world / "events.parquet").head(len(product_ids)).copy()
    events["product_id"] = product_ids
    return events


def quarantine(report: LoadReport, table: str) -> list[tuple[str, str, str]]:
    """(reason, column, detail) of the table's quarantined rows, in row order."""
    with open_database(report.database) as connection:
        rows = connection.execute(
            "SELECT reason, coalesce(column_name, ''), detail FROM meta.quarantine"
            " WHERE table_name = ? ORDER BY row_number",
            [table],
        ).fetchall()
    return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]


def loaded(world: Path, tmp_path: Path) -> tuple[DatasetSpec, Path, Path, int]:
    """The dataset's spec, its full load, the arrivals' work folder and the highest product id."""
    spec = parse_dataset(world)
    warehouse = load_dataset(spec, tmp_path / "warehouse.duckdb").database
    top = int(pd.read_parquet(world / "products.parquet").product_id.max())
    return spec, warehouse, tmp_path / "work", top


def test_rows_referencing_a_refused_batch_or_rejected_rows_are_quarantined(
    world: Path, tmp_path: Path
) -> None:
    spec, warehouse, work, top = loaded(world, tmp_path)
    odd = pd.DataFrame({"order_id": [1]})
    write_batch(world, "batch0001", {"products": new_products(world, top + 1, 2), "orders": odd})
    rejected = new_products(world, top + 3, 2)
    rejected["advertiser_id"] = 10**9  # nobody
    write_batch(world, "batch0002", {"products": rejected})
    write_batch(world, "batch0003", {"events": events_on(world, [top + 1, top + 3])})

    with pytest.raises(DatasetError, match=r"orders\.parquet.*names no file table"):
        accept_batch(spec, "batch0001", warehouse, work)
    second = accept_batch(spec, "batch0002", warehouse, work)
    third = accept_batch(spec, "batch0003", warehouse, work)

    state = read_state(work, warehouse)
    assert state.accepted == ["batch0002", "batch0003"] and list(state.refused) == ["batch0001"]
    assert second.tables["products"].quarantined_by_reason == {"dangling_foreign_key": 2}
    assert third.tables["events"].accepted == 0
    assert third.tables["events"].quarantined_by_reason == {"dangling_foreign_key": 2}
    assert all(t.reconciles for r in (second, third) for t in r.tables.values())
    details = quarantine(third, "events")
    assert [(reason, column) for reason, column, _ in details] == [
        ("dangling_foreign_key", "product_id")
    ] * 2
    assert f"row 1: events.product_id = {top + 1} not found" in details[0][2]
    assert f"row 2: events.product_id = {top + 3} not found" in details[1][2]


def test_a_key_that_an_earlier_batch_defined_is_quarantined_naming_that_batch(
    world: Path, tmp_path: Path
) -> None:
    spec, warehouse, work, top = loaded(world, tmp_path)
    write_batch(world, "batch0001", {"products": new_products(world, top + 1, 2)})
    clashing = new_products(world, top, 3)
    clashing["product_id"] = [top, top + 1, top + 3]  # the dataset's, batch 1's, a new one
    write_batch(world, "batch0002", {"products": clashing})

    accept_batch(spec, "batch0001", warehouse, work)
    second = accept_batch(spec, "batch0002", warehouse, work)

    assert second.tables["products"].accepted == 1
    assert second.tables["products"].quarantined_by_reason == {"existing_primary_key": 2}
    assert quarantine(second, "products") == [
        (
            "existing_primary_key",
            "product_id",
            f"row 1: products.product_id = {top} already exists in the dataset",
        ),
        (
            "existing_primary_key",
            "product_id",
            f"row 2: products.product_id = {top + 1} already exists in batch batch0001",
        ),
    ]
    with open_database(second.database) as connection:  # the snapshot holds each key once
        keys = connection.execute("SELECT product_id FROM raw.products ORDER BY __row").fetchall()
    assert [k[0] for k in keys] == [top + 1, top + 2, top + 3]


def test_a_batch_arriving_while_a_full_run_loads_is_neither_lost_nor_read_twice(
    world: Path, tmp_path: Path
) -> None:
    """Batch 1 is accepted; a full run starts and lists batch 1; batch 2 (events on batch 1's
    products, and new products) arrives and is accepted while it loads; the full load lands.
    Batch 3 (events on batch 2's products) is then accepted in full: batch 2, which the full
    load did not read, was validated again on the new warehouse, and batch 1, which it did
    read, is no longer part of the state. A late run of batch 1 quarantines every row of it."""
    spec, warehouse, work, top = loaded(world, tmp_path)
    write_batch(world, "batch0001", {"products": new_products(world, top + 1, 2)})
    accept_batch(spec, "batch0001", warehouse, work)
    listed = only_batches_up_to(spec, "batch0001")  # what the full run's load reads
    write_batch(
        world,
        "batch0002",
        {"products": new_products(world, top + 3, 2), "events": events_on(world, [top + 1])},
    )
    during = accept_batch(spec, "batch0002", warehouse, work)
    assert during.tables["events"].accepted == 1
    full = load_dataset(listed, warehouse)  # lands: a new warehouse with batch 1 in it
    assert full.tables["products"].accepted == len(pd.read_parquet(world / "products.parquet")) + 2
    write_batch(world, "batch0003", {"events": events_on(world, [top + 3, top + 4])})

    after = accept_batch(spec, "batch0003", warehouse, work)

    assert after.tables["events"].accepted == 2 and after.tables["events"].quarantined == 0
    state = read_state(work, warehouse)
    assert state.accepted == ["batch0002", "batch0003"]
    assert state.reports["batch0002"]["tables"]["events"]["accepted"] == 1
    with open_database(after.database) as connection:
        products = connection.execute("SELECT product_id FROM raw.products").fetchall()
    assert sorted(p[0] for p in products) == [top + 3, top + 4]  # batch 2's only, once

    late = accept_batch(spec, "batch0001", warehouse, tmp_path / "late")
    assert late.tables["products"].accepted == 0
    assert late.tables["products"].quarantined_by_reason == {"loaded_by_full_run": 2}
    assert late.tables["products"].reconciles
    reason, column, detail = quarantine(late, "products")[0]
    assert (reason, column) == ("loaded_by_full_run", "")
    assert detail.startswith("row 1 of products: incoming/batch0001 was read by the full load")
