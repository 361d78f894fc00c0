"""The incremental path in the core: a batch validated on its own, its entities embedded by the
current model exactly as a full run over the same rows would embed them, and served at once."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch

from hier_pipeline.dataset import DatasetError, DatasetSpec, LoadReport, load_dataset
from hier_pipeline.dataset.arrivals import batch_files, list_batches, with_batches
from hier_pipeline.dataset.sql import open_database
from hier_pipeline.graph import RelationalGraph, build_graph
from hier_pipeline.graph.columns import plan_columns
from hier_pipeline.graph.features import FeatureConfig, encode_table
from hier_pipeline.graph.sampler import TemporalNeighborSampler
from hier_pipeline.incremental.extend import batch_rows, extend_content
from hier_pipeline.incremental.update import update_batch
from hier_pipeline.incremental.validate import validate_batch
from hier_pipeline.interests.arrivals import load_batch_tokens
from hier_pipeline.interests.artifact import load_hierarchy
from hier_pipeline.interests.entities import primary_keys
from hier_pipeline.interests.index import InterestIndex
from hier_pipeline.model.artifact import load_model, load_sampling
from hier_pipeline.model.embeddings import embed_entities
from hier_pipeline.model.infer import embed_nodes
from hier_pipeline.model.minibatch import GraphContext
from tests.incremental.conftest import Base
from tests.incremental.extension import extended


def test_a_generated_batch_is_validated_alone(arrivals: Path, base: Base, tmp_path: Path) -> None:
    assert list_batches(arrivals) == ["batch0001"]
    report = validate_batch(base.spec, "batch0001", base.raw.database, tmp_path / "b.duckdb")
    files = batch_files(base.spec, "batch0001")
    assert set(report.tables) == set(files)  # only the batch's tables were read
    for table, path in files.items():
        rows = len(pd.read_parquet(path))
        assert report.tables[table].read == report.tables[table].accepted == rows
    products = len(pd.read_parquet(arrivals / "products.parquet"))
    assert report.tables["products"].accepted == round(0.05 * products)


def test_bad_batch_rows_are_quarantined_with_table_column_and_row(
    arrivals: Path, base: Base, tmp_path: Path
) -> None:
    good = batch_files(base.spec, "batch0001")
    bad = arrivals / "incoming" / "bad"
    bad.mkdir()
    try:
        products = pd.read_parquet(good["products"]).head(3)
        products["advertiser_id"] = 1  # an advertiser of the dataset (this batch brings none)
        products.loc[0, "product_id"] = 1  # the dataset has it already
        products.loc[1, "advertiser_id"] = 10**9  # nobody
        products.to_parquet(bad / "products.parquet", index=False)
        events = pd.read_parquet(good["events"]).head(2)
        events["product_id"] = products["product_id"].iloc[2]
        events.loc[1, "user_id"] = 10**9
        events.to_parquet(bad / "events.parquet", index=False)
        report = validate_batch(base.spec, "bad", base.raw.database, tmp_path / "bad.duckdb")
    finally:
        for path in bad.iterdir():
            path.unlink()
        bad.rmdir()
    assert report.tables["products"].quarantined_by_reason == {
        "existing_primary_key": 1,
        "dangling_foreign_key": 1,
    }
    assert report.tables["events"].quarantined_by_reason == {"dangling_foreign_key": 1}
    assert all(t.reconciles for t in report.tables.values())
    with open_database(report.database) as connection:
        details = dict(
            connection.execute(
                "SELECT reason || '/' || column_name, detail FROM meta.quarantine"
                " WHERE table_name = 'products'"
            ).fetchall()
        )
    assert details["existing_primary_key/product_id"] == (
        "row 1: products.product_id = 1 already exists in the dataset"
    )
    assert (
        "row 2: products.advertiser_id = 1000000000 not found"
        in (details["dangling_foreign_key/advertiser_id"])
    )


def test_a_file_named_after_no_table_is_refused(arrivals: Path, base: Base) -> None:
    odd = arrivals / "incoming" / "odd"
    odd.mkdir()
    (odd / "orders.parquet").write_bytes(b"")
    try:
        with pytest.raises(DatasetError, match=r"orders\.parquet.*names no file table"):
            batch_files(base.spec, "odd")
    finally:
        (odd / "orders.parquet").unlink()
        odd.rmdir()


def test_the_extension_equals_a_full_build_over_the_same_rows(
    arrivals: Path, base: Base, tmp_path: Path
) -> None:
    """Node features, edges and the model's embeddings of the new entities: as if the batch had
    been in the data all along, its features normalised as the model saw the others; the
    dataset's nodes keep their indices and the input graph is left untouched."""
    spec = base.spec
    batch = validate_batch(spec, "batch0001", base.raw.database, tmp_path / "b.duckdb")
    before = {t: int(base.graph.data[t].num_nodes) for t in base.graph.data.node_types}
    rows = batch_rows(spec, base.graph, base.raw.database, batch.database)
    extension = extended(base.graph, rows)
    full_raw = load_dataset(with_batches(spec), tmp_path / "full.duckdb")
    full = build_graph(spec, full_raw.database)
    assert {t: int(base.graph.data[t].num_nodes) for t in before} == before
    data, expected = extension.data, full.data
    for node_type in expected.node_types:
        for name in ("x_cat", "time", "row"):
            assert torch.equal(data[node_type][name], expected[node_type][name]), (node_type, name)
        # The dataset's rows keep their features; the batch's are encoded with the statistics
        # the graph was built with, not re-fitted to the batch.
        n = before[node_type]
        assert torch.equal(data[node_type].x_num[:n], base.graph.data[node_type].x_num)
        assert torch.equal(data[node_type].x_num[n:], _encoded(spec, base, full_raw, node_type)[n:])
    assert extension.metadata.num_features == full.metadata.num_features
    for edge_type in expected.edge_types:
        for name, value in expected[edge_type].items():
            assert torch.equal(data[edge_type][name], value), (edge_type, name)
    new = rows.new_nodes["products"]
    assert new.tolist() == list(range(before["products"], int(expected["products"].num_nodes)))

    content, embedded = extend_content(
        spec, base.content, batch.database, tmp_path / "cache", tmp_path / "c.pt"
    )
    assert embedded.tables["products"].rows == len(new)  # only the batch was embedded
    sampling = load_sampling(base.model)
    ours = embed_entities(base.trained, extension, content, tmp_path / "e1.pt", sampling)
    theirs = embed_entities(base.trained, full, content, tmp_path / "e2.pt", sampling)
    cosine = (ours.load()["products"][new] * theirs.load()["products"][new]).sum(dim=1)
    assert cosine.min() > 0.99  # only the old rows' normalisation differs, by the batch's share


def _encoded(spec: DatasetSpec, base: Base, raw: LoadReport, table: str) -> torch.Tensor:
    """The full build's encoding of every row of `table`, with the base graph's statistics."""
    with open_database(raw.database) as connection:
        columns = {
            str(r[0]): str(r[1]) for r in connection.execute(f"DESCRIBE raw.{table}").fetchall()
        }
        rows = connection.execute(f"SELECT count(*) FROM raw.{table}").fetchone()
        assert rows is not None
        features = encode_table(
            connection,
            f"raw.{table}",
            plan_columns(spec.tables[table], columns),
            spec.tables[table].time,
            int(rows[0]),
            FeatureConfig(),
            statistics=base.graph.metadata.feature_statistics[table],
        )
    return torch.from_numpy(features.x_num)


def test_new_entities_are_served_with_tokens_right_after(base: Base, tmp_path: Path) -> None:
    folder = base.tokens.path.parent
    before = InterestIndex.open(folder)
    update = update_batch(
        base.spec, "batch0001", base.current(folder, tmp_path / "cache"), tmp_path
    )
    try:
        after = InterestIndex.open(folder)
        new_products = [k for k in after.keys["products"] if k not in set(before.keys["products"])]
        assert len(new_products) == update.entities["products"] > 0
        assert update.entities["advertisers"] > 0
        for key in new_products:
            levels = {i.level for i in after.interests_of("item", key)}
            assert levels == set(range(before.hierarchy.levels))
            assert len(after.similar_items(key, 5)) == 5
        user = after.keys["users"][0]
        by_embedding = {m.key for m in after.top_items(user, len(after.keys["products"]))}
        assert set(new_products) <= by_embedding
        advertiser = [k for k in after.keys["advertisers"] if k not in before.keys["advertisers"]]
        assert after.advertiser_interests(advertiser[0])
        assert update.refreshed["users"] > 0  # the batch's events are by the dataset's users
        for node_type in before.keys:  # served as before, but for those the batch points at
            n = len(before.keys[node_type])
            assert after.keys[node_type][:n] == before.keys[node_type]
            changed = ~(after.vectors[node_type][:n] == before.vectors[node_type]).all(dim=1)
            assert int(changed.sum()) <= update.refreshed.get(node_type, 0)
            assert changed.any() == (node_type == "users")
    finally:
        update.path.unlink()


def test_the_batch_is_embedded_as_over_the_extended_graph(base: Base, tmp_path: Path) -> None:
    """The vectors served for the batch's products and for the users its events touch equal the
    model's over the extended graph (a sampler over all of it, degrees counted on it), although
    the update reads the graph and the batch side by side and never concatenates them."""
    spec, folder = base.spec, tmp_path / "served"
    shutil.copytree(base.tokens.path.parent, folder)
    load = validate_batch(spec, "batch0001", base.raw.database, tmp_path / "b.duckdb")
    update_batch(spec, "batch0001", base.current(folder, tmp_path / "cache"), tmp_path, load)
    (served,) = load_batch_tokens(folder, base.tokens.load().hierarchy)

    rows = batch_rows(spec, base.graph, base.raw.database, load.database)
    content, _ = extend_content(
        spec, base.content, load.database, tmp_path / "cache", tmp_path / "c.pt"
    )
    data = extended(base.graph, rows).data
    as_of = 1 + max(int(data[t].time.max()) for t in data.node_types if data[t].num_nodes)
    sampler = TemporalNeighborSampler(data, load_sampling(base.model))
    context = GraphContext.of(data, list(data.edge_types), len(spec.funnel), content)
    model = load_model(base.model, base.graph, content)
    users = {k: i for i, k in enumerate(primary_keys(base.raw.database, spec, ["users"])["users"])}
    nodes = {
        "products": rows.new_nodes["products"],
        "users": torch.tensor([users[k] for k in served.keys["users"]]),
    }
    assert len(nodes["users"]) > 0
    for node_type, index in nodes.items():
        expected = embed_nodes(model, sampler, data, context, node_type, index, as_of)
        assert torch.allclose(served.vectors[node_type], expected, atol=1e-5), node_type
    # A new product is its code, as the tree's items are: from its content and embedding
    # through the tree's finest codebook (issue 19), one token per level, weight 1.
    tree = load_hierarchy(base.tokens.load().hierarchy)
    products = {k: v[nodes["products"]] for k, v in content["products"].items()}
    bags = served.bags["products"]
    assert tree.codebook is not None
    assert torch.equal(bags.tokens[:, :, 0], tree.item_codes(served.vectors["products"], products))
    assert torch.equal(bags.weights.sum(dim=2), torch.ones(len(bags), tree.levels))


def test_a_graph_without_feature_statistics_is_refused_with_what_to_do(
    base: Base, tmp_path: Path
) -> None:
    """A graph materialised before the statistics were kept cannot encode a batch's rows as the
    model saw the others: it is refused, naming the table and the asset to rebuild."""
    older = RelationalGraph(base.graph.data, replace(base.graph.metadata, feature_statistics={}))
    batch = validate_batch(base.spec, "batch0001", base.raw.database, tmp_path / "b.duckdb")
    with pytest.raises(ValueError, match=r"no feature statistics for table '.+'.*relational_graph"):
        batch_rows(base.spec, older, base.raw.database, batch.database)
