"""Batches that build on each other: products one day, their first events the next, a new
advertiser's products and events the day after, served between full runs as a full rebuild over
the same rows would serve them."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from hier_pipeline.dataset import DatasetSpec, load_dataset, parse_dataset
from hier_pipeline.dataset.arrivals import incoming_folder, with_batches
from hier_pipeline.dataset.report import LoadReport
from hier_pipeline.graph import build_graph
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.sampler import TemporalNeighborSampler
from hier_pipeline.incremental.update import BatchUpdate, update_batch
from hier_pipeline.interests import TokenConfig, assign_tokens
from hier_pipeline.interests.arrivals import load_batch_tokens
from hier_pipeline.interests.artifact import load_hierarchy
from hier_pipeline.interests.engaged import engaged_tokens, owner_tokens
from hier_pipeline.interests.entities import primary_keys
from hier_pipeline.interests.events import funnel_events, item_owners
from hier_pipeline.interests.index import InterestIndex
from hier_pipeline.model.artifact import load_model, load_sampling
from hier_pipeline.model.infer import embed_nodes
from hier_pipeline.model.minibatch import GraphContext
from hier_pipeline.release.promotion import PromotionConfig, promote
from hier_pipeline.synthetic.arrivals import BatchConfig, generate_batch
from tests.incremental.conftest import Base
from tests.incremental.test_promotion import PASSING

CHAIN = ("batch0001", "batch0002", "batch0003")


def world_without_batches(arrivals: Path, folder: Path) -> Path:
    """A copy of the world the base state was built from, with no batch yet."""
    shutil.copytree(arrivals, folder, ignore=shutil.ignore_patterns("incoming"))
    return folder


def only_batches_up_to(spec: DatasetSpec, last: str) -> DatasetSpec:
    """What a full load reads when `last` is the latest batch in incoming/."""
    everything = with_batches(spec)
    return replace(
        everything,
        tables={
            name: replace(t, batch_files=tuple(p for p in t.batch_files if p.parent.name <= last))
            for name, t in everything.tables.items()
        },
    )


def rebuilt(
    spec: DatasetSpec, base: Base, last: str, folder: Path
) -> tuple[DatasetSpec, LoadReport, RelationalGraph]:
    """A full rebuild of the dataset plus the batches up to `last`: `load_dataset`, and
    `build_graph` with the serving graph's feature statistics (a refit would move every
    normalised column by the batches' share, which no incremental path reproduces)."""
    prefix = only_batches_up_to(spec, last)
    raw = load_dataset(prefix, folder / f"{last}.duckdb")
    assert sum(t.quarantined for t in raw.tables.values()) == 0
    return (
        prefix,
        raw,
        build_graph(prefix, raw.database, statistics=base.graph.metadata.feature_statistics),
    )


@pytest.fixture(scope="module")
def chain(
    arrivals: Path, base: Base, tmp_path_factory: pytest.TempPathFactory
) -> tuple[DatasetSpec, Path, Path, list[BatchUpdate]]:
    """Three batches through the incremental path, one after the other: new advertisers and
    their products (batch 1), the first events on those products (batch 2), another new
    advertiser's products with their events (batch 3). Returns the spec, the served folder, the
    work folder and the three updates."""
    root = tmp_path_factory.mktemp("chain")
    world = world_without_batches(arrivals, root / "world")
    first = generate_batch(world, CHAIN[0], BatchConfig(products_fraction=0.03, seed=1))
    second = incoming_folder(world) / CHAIN[1]
    second.mkdir()
    (first / "events.parquet").rename(second / "events.parquet")
    generate_batch(world, CHAIN[2], BatchConfig(products_fraction=0.03, seed=2))
    spec, work = parse_dataset(world), root / "work"
    served = promote(
        PASSING, base.model, base.tokens, root / "serving", PromotionConfig(), {}
    ).folder
    current = base.current(served, root / "cache")
    return spec, served, work, [update_batch(spec, b, current, work) for b in CHAIN]


def test_a_chain_of_batches_is_served_whole_with_nothing_quarantined(
    chain: tuple[DatasetSpec, Path, Path, list[BatchUpdate]], base: Base
) -> None:
    """Every row of the three batches is accepted (batch 2's events on batch 1's products
    included), every new product and advertiser is served with a bag at every level, and the
    products of batch 1 are embedded again by batch 2, which brought their first events."""
    _, served, _, updates = chain
    for update in updates:
        assert {t: r.quarantined for t, r in update.load.tables.items()} == dict.fromkeys(
            update.load.tables, 0
        ), update.batch
        assert all(r.reconciles for r in update.load.tables.values())
    products, products_again = updates[0].entities["products"], updates[1].refreshed["products"]
    assert products > 0 and updates[1].entities == {} and products_again > 0
    assert updates[2].entities["advertisers"] > 0 and updates[2].entities["products"] > 0
    # batch 1's advertisers have no events yet: placed by their catalogue; batch 2's users by the
    # events they brought (`bags.py`)
    new_advertisers = updates[0].entities["advertisers"]
    assert updates[0].placed_by["advertisers"] == {
        "events": 0,
        "catalogue": new_advertisers,
        "embedding": 0,
    }
    assert updates[0].placed_by["products"] == {"code": products}
    users = updates[1].refreshed["users"]
    assert updates[1].placed_by["users"] == {"events": users, "embedding": 0}
    before = base.tokens.load()
    index = InterestIndex.open(served)
    for node_type, kind in (("products", "item"), ("advertisers", "advertiser")):
        new = [k for k in index.keys[node_type] if k not in set(before.keys[node_type])]
        assert len(new) == updates[0].entities[node_type] + updates[2].entities[node_type]
        for key in new:
            levels = {i.level for i in index.interests_of(kind, key)}
            assert levels == set(range(index.hierarchy.levels)), (node_type, key)
    (batch2,) = [b for b in load_batch_tokens(served, before.hierarchy) if b.batch == CHAIN[1]]
    batch1_products = set(index.keys["products"][len(before.keys["products"]) :][:products])
    assert set(batch2.keys["products"]) <= batch1_products  # known from batch 1, embedded again


def test_served_vectors_equal_the_model_over_a_full_rebuild_of_each_prefix(
    chain: tuple[DatasetSpec, Path, Path, list[BatchUpdate]], base: Base, tmp_path: Path
) -> None:
    """What is equal: the vectors each batch served (its new entities and those it embedded
    again, the dataset's and earlier batches') and the same frozen model's inference, as of the
    same time (the end of that batch), over a full rebuild: `load_dataset` of the dataset plus
    the batches up to that one, `build_graph` with the serving graph's feature statistics (a
    refit would move every normalised column by the batches' share, which no incremental path
    reproduces, and which the model never saw), a `recent` sampler over the whole rebuilt graph,
    degrees counted on it. Content vectors are the ones the incremental path embedded (a
    deterministic encoder through the cache), so the comparison is of the graph and the model's
    reading of it; the tolerance is float noise (1e-5)."""
    spec, served, work, updates = chain
    batches = {b.batch: b for b in load_batch_tokens(served, base.tokens.load().hierarchy)}
    for update in updates:
        prefix, raw, full = rebuilt(spec, base, update.batch, tmp_path)
        added = torch.load(work / f"{update.batch}_content.pt", weights_only=True)
        content = {
            t: {k: torch.cat([v, added[t][k]]) for k, v in c.items()} if t in added else c
            for t, c in base.content.items()
        }
        data = full.data
        as_of = 1 + max(int(data[t].time.max()) for t in data.node_types if data[t].num_nodes)
        sampler = TemporalNeighborSampler(data, load_sampling(base.model))
        context = GraphContext.of(data, list(data.edge_types), len(spec.funnel), content)
        model = load_model(base.model, base.graph, content)
        batch = batches[update.batch]
        assert batch.keys, update.batch
        for node_type, keys in batch.keys.items():
            nodes = {
                k: i
                for i, k in enumerate(primary_keys(raw.database, prefix, [node_type])[node_type])
            }
            index = torch.tensor([nodes[k] for k in keys])
            expected = embed_nodes(model, sampler, data, context, node_type, index, as_of)
            assert torch.allclose(batch.vectors[node_type], expected, atol=1e-5), (
                update.batch,
                node_type,
            )


def test_batches_not_served_under_the_current_tree_are_served_with_the_next(
    chain: tuple[DatasetSpec, Path, Path, list[BatchUpdate]], base: Base, tmp_path: Path
) -> None:
    """A release swaps the serving folder, and the batch files with it; the batches since the
    full load that it did not read lose their tokens. The next batch (more events on batch 3's
    products) embeds their entities again, once each, so that they are served, as of it."""
    spec, served, work, updates = chain
    folder = tmp_path / "released"
    shutil.copytree(served, folder)
    for path in (folder / "batches").iterdir():
        path.unlink()
    fourth = incoming_folder(spec.root) / "batch0004"
    fourth.mkdir()
    shutil.copy(incoming_folder(spec.root) / CHAIN[2] / "events.parquet", fourth)

    update = update_batch(spec, "batch0004", base.current(folder, tmp_path / "cache"), work)

    assert update.caught_up == list(CHAIN)
    earlier = {t: sum(u.entities.get(t, 0) for u in updates) for t in ("products", "advertisers")}
    (served_now,) = load_batch_tokens(folder, base.tokens.load().hierarchy)
    index = InterestIndex.open(folder)
    before = set(base.tokens.load().keys["products"])
    new = [k for k in index.keys["products"] if k not in before]
    assert update.entities["products"] == len(new) == earlier["products"]
    assert set(served_now.keys["products"]) >= set(new)
    for node_type, keys in served_now.keys.items():
        assert len(keys) == len(set(keys)), node_type  # embedded once each


def test_served_bags_place_users_by_events_and_advertisers_by_catalogue_as_a_full_run_would(
    chain: tuple[DatasetSpec, Path, Path, list[BatchUpdate]], base: Base, tmp_path: Path
) -> None:
    """Each batch's users and advertisers get the bags a full run's placement gives them over a
    full rebuild of the dataset plus the batches so far (`engaged_tokens`, `owner_tokens`), from
    the same vectors and tree, every item under the code it is served with (batch 3's users
    included, whose batch-2 events are on batch 1's products, which batch 3 does not embed).
    Batch 1's new advertisers have no events yet: placed by their catalogue, whose codes came
    from the new products' content; batch 2's users by the events they brought."""
    spec, served, _, _ = chain
    tokens = base.tokens.load()
    tree = load_hierarchy(tokens.hierarchy)
    config = TokenConfig(top_k=tokens.bags["users"].tokens.shape[2])
    code_of = dict(zip(tokens.keys["products"], tree.members, strict=True))
    checked = {"users": 0, "advertisers": 0}
    for batch in load_batch_tokens(served, tokens.hierarchy):
        code_of.update(zip(batch.keys["products"], batch.bags["products"].path, strict=True))
        _, raw, full = rebuilt(spec, base, batch.batch, tmp_path)
        keys = primary_keys(raw.database, spec, ["users", "advertisers", "products"])
        codes = torch.stack([code_of[k] for k in keys["products"]])
        events = funnel_events(full)
        as_of = int(events.time.max()) + 1
        for node_type in ("users", "advertisers"):
            if node_type not in batch.keys:
                continue
            node_of = {k: i for i, k in enumerate(keys[node_type])}
            nodes = torch.tensor([node_of[k] for k in batch.keys[node_type]])
            vectors = batch.vectors[node_type]
            if node_type == "users":
                mine = events.of_users(nodes)
                expected = engaged_tokens(vectors, mine, codes, tree, config, as_of)
            else:
                position = torch.full((len(node_of),), -1)
                position[nodes] = torch.arange(len(nodes))
                owner = item_owners(full, "advertisers")
                assert owner is not None
                owner = position[owner]
                expected = owner_tokens(vectors, events, owner, codes, tree, config, as_of)
            got = batch.bags[node_type]
            assert torch.equal(got.tokens, expected.tokens), (batch.batch, node_type)
            torch.testing.assert_close(got.weights, expected.weights)
            checked[node_type] += len(nodes)
    assert checked["users"] > 0 and checked["advertisers"] > 0
    (first,) = [b for b in load_batch_tokens(served, tokens.hierarchy) if b.batch == CHAIN[0]]
    by_embedding = assign_tokens(first.vectors["advertisers"], tree, config)
    assert not torch.equal(first.bags["advertisers"].tokens, by_embedding.tokens)
