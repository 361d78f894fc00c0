"""Implicit tables after batches: a full load numbers an implicit table's keys in sorted order,
the incremental path appends a batch's new keys after the known ones. A new key that sorts
before every known one therefore gets a different node number in the two paths; what must agree
is which key each row points at."""

from __future__ import annotations

from pathlib import Path

from hier_pipeline.dataset import load_dataset, parse_dataset
from hier_pipeline.dataset.arrivals import with_batches
from hier_pipeline.graph import build_graph
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.incremental.accumulated import accept_batch
from hier_pipeline.incremental.extend import batch_rows
from hier_pipeline.interests.entities import primary_keys
from tests.builders import write_dataset

EDGE = ("products", "brand_id", "brands")


def _brand_of(graph: RelationalGraph, products: list[str], brands: list[str]) -> dict[str, str]:
    source, target = graph.data[EDGE].edge_index.tolist()
    return {products[p]: brands[b] for p, b in zip(source, target, strict=True)}


def test_a_new_implicit_key_that_sorts_first_is_pointed_at_by_key_in_both_paths(
    tmp_path: Path,
) -> None:
    folder = write_dataset(tmp_path / "d")
    batch = folder / "incoming" / "b1"
    batch.mkdir(parents=True)
    (batch / "products.csv").write_text(
        "product_id,brand_id,title,price,created_at\n"
        "13,50,blue running shoes,61.0,2024-02-10\n"  # brand 50: new, before 100 and 200
        "14,200,milk frother,29.0,2024-02-10\n"
    )
    spec = parse_dataset(folder)
    warehouse = load_dataset(spec, tmp_path / "warehouse.duckdb").database
    graph = build_graph(spec, warehouse)
    load = accept_batch(spec, "b1", warehouse, tmp_path / "work")
    assert load.tables["brands"].accepted == 1
    rows = batch_rows(spec, graph, warehouse, load.database, latest="b1")
    known = primary_keys(warehouse, spec, ["products", "brands"])
    added = primary_keys(load.database, spec, ["products", "brands"])
    assert added["brands"] == ["50"]
    source, target = rows.rows[EDGE].edge_index.tolist()
    keys = {t: known[t] + added[t] for t in known}  # node first[t] + i is the batch's row i
    incremental = {
        **_brand_of(graph, known["products"], known["brands"]),
        **{keys["products"][p]: keys["brands"][b] for p, b in zip(source, target, strict=True)},
    }
    everything = with_batches(spec)
    full_database = load_dataset(everything, tmp_path / "full.duckdb").database
    full_keys = primary_keys(full_database, everything, ["products", "brands"])
    assert full_keys["brands"].index("50") < len(known["brands"])  # numbered first there
    full = build_graph(everything, full_database, statistics=graph.metadata.feature_statistics)
    rebuilt = _brand_of(full, full_keys["products"], full_keys["brands"])
    assert (
        incremental
        == rebuilt
        == {
            "10": "100",
            "11": "100",
            "12": "200",
            "13": "50",
            "14": "200",
        }
    )
