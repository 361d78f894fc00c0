"""The temporal sampler: no leakage, exact neighbourhoods, fanouts, determinism, disjoint roots."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from torch_geometric.data import HeteroData

from hier_pipeline.graph.csr import Strategy, draw_offsets
from hier_pipeline.graph.sampler import (
    SampledSubgraph,
    SamplerConfig,
    StageFanouts,
    TemporalNeighborSampler,
)

BOUGHT = ("transactions", "by_user", "users")
CONTAINS = ("transactions", "of_item", "items")
ALWAYS = torch.iinfo(torch.int64).min  # the graph's "known since always" time


def _link(
    data: HeteroData,
    edge_type: tuple[str, str, str],
    src: list[int],
    dst: list[int],
    time: list[int],
) -> None:
    """An edge type and its reverse (``rev_<rel>``), both with the same edge times."""
    src_type, rel, dst_type = edge_type
    data[edge_type].edge_index = torch.tensor([src, dst])
    data[edge_type].edge_time = torch.tensor(time)
    data[dst_type, f"rev_{rel}", src_type].edge_index = torch.tensor([dst, src])
    data[dst_type, f"rev_{rel}", src_type].edge_time = torch.tensor(time)


def _nodes(data: HeteroData, node_type: str, time: list[int]) -> None:
    data[node_type].num_nodes = len(time)
    data[node_type].time = torch.tensor(time)


def random_graph(seed: int = 0, users: int = 60, items: int = 80, events: int = 3000) -> HeteroData:
    """Users and items joined by transactions, plus direct user->item views, with times in 0..99.

    Times come from a small range so that ties with seed times are common (a ``<=`` bug shows up),
    and node times are independent of edge times, so the node-time rule is exercised too.
    """
    rng = np.random.default_rng(seed)

    def times(n: int, always: float) -> list[int]:
        t = rng.integers(0, 100, n)
        return np.where(rng.random(n) < always, ALWAYS, t).tolist()

    data = HeteroData()
    _nodes(data, "users", times(users, 0.5))
    _nodes(data, "items", times(items, 0.5))
    _nodes(data, "transactions", rng.integers(0, 100, events).tolist())
    event_time = data["transactions"].time.tolist()
    _link(data, BOUGHT, list(range(events)), rng.integers(0, users, events).tolist(), event_time)
    _link(data, CONTAINS, list(range(events)), rng.integers(0, items, events).tolist(), event_time)
    views = events // 2
    _link(
        data,
        ("users", "viewed", "items"),
        rng.integers(0, users, views).tolist(),
        rng.integers(0, items, views).tolist(),
        rng.integers(0, 100, views).tolist(),
    )
    return data


@pytest.fixture(scope="module")
def graph() -> HeteroData:
    return random_graph()


def _random_seeds(
    data: HeteroData, node_type: str, n: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    nodes = rng.integers(0, data[node_type].num_nodes, n)
    return torch.from_numpy(nodes), torch.from_numpy(rng.integers(0, 101, n))


def _usable_from(data: HeteroData, edge_type: tuple[str, str, str]) -> np.ndarray:
    """When each edge and both its ends are known: the latest of the three times."""
    src, _, dst = edge_type
    index = data[edge_type].edge_index.numpy()
    ends = np.maximum(data[src].time.numpy()[index[0]], data[dst].time.numpy()[index[1]])
    return np.maximum(data[edge_type].edge_time.numpy(), ends)


def _valid(data: HeteroData, edge_type: tuple[str, str, str], before: int) -> np.ndarray:
    """Brute force: which edges of this type are usable at a seed time (all three times < it)."""
    return _usable_from(data, edge_type) < before


def _brute_force(
    data: HeteroData, seed_type: str, seed: int, before: int, hops: int
) -> set[tuple[object, int]]:
    """Every (edge type, edge id) a full-fanout disjoint sample of one root must contain."""
    seen, frontier, edges = {(seed_type, seed)}, [(seed_type, seed)], set()
    for _ in range(hops):
        reached = []
        for edge_type in data.edge_types:
            index, valid = data[edge_type].edge_index.numpy(), _valid(data, edge_type, before)
            for node_type, node in frontier:
                if node_type != edge_type[2]:
                    continue
                for e in np.flatnonzero(valid & (index[1] == node)):
                    edges.add((edge_type, int(e)))
                    if (edge_type[0], int(index[0, e])) not in seen:
                        seen.add((edge_type[0], int(index[0, e])))
                        reached.append((edge_type[0], int(index[0, e])))
        frontier = reached
    return edges


def _check_no_leakage(data: HeteroData, out: SampledSubgraph) -> None:
    """Every sampled edge (and both its ends) is strictly before its root's seed time."""
    for edge_type, e_id in out.e_id.items():
        src, _, dst = edge_type
        local = out.edge_index[edge_type]
        root = out.root[dst][local[1]]
        assert torch.equal(out.root[src][local[0]], root), "an edge joins two roots"
        limit = out.seed_time[root]
        assert (data[edge_type].edge_time[e_id] < limit).all()
        assert torch.equal(out.edge_time[edge_type], data[edge_type].edge_time[e_id])
        ends = torch.stack([out.n_id[src][local[0]], out.n_id[dst][local[1]]])
        assert torch.equal(ends, data[edge_type].edge_index[:, e_id]), "e_id and nodes disagree"
        assert (data[src].time[ends[0]] < limit).all() and (data[dst].time[ends[1]] < limit).all()
    for node_type, n_id in out.n_id.items():
        reached = out.hop[node_type] > 0
        time = data[node_type].time[n_id][reached]
        limit = out.seed_time[out.root[node_type][reached]]
        assert ((time < limit) | (time == ALWAYS)).all()


@pytest.mark.parametrize("strategy", ["uniform", "recent"])
@pytest.mark.parametrize("seed_type", ["users", "items", "transactions"])
def test_no_sampled_edge_or_node_is_at_or_after_its_roots_time(
    graph: HeteroData, seed_type: str, strategy: Strategy
) -> None:
    sampler = TemporalNeighborSampler(graph, SamplerConfig(fanouts=(4, 3, 2), strategy=strategy))
    for batch in range(20):
        out = sampler.sample(seed_type, *_random_seeds(graph, seed_type, 64, batch))
        _check_no_leakage(graph, out)


def _tiny() -> HeteroData:
    """One user; items bought at times 5, 10 (the seed time), 3, 7; item 3 is only created at 20."""
    data = HeteroData()
    _nodes(data, "users", [ALWAYS, ALWAYS])
    _nodes(data, "items", [0, 0, 0, 20])
    _link(data, ("users", "bought", "items"), [0, 0, 0, 0, 1], [0, 1, 2, 3, 0], [5, 10, 3, 7, 9])
    return data


def test_an_edge_exactly_at_the_seed_time_is_not_sampled() -> None:
    out = TemporalNeighborSampler(_tiny(), SamplerConfig(fanouts=(-1,))).sample(
        "users", torch.tensor([0]), torch.tensor([10])
    )
    edge_type = ("items", "rev_bought", "users")
    # Edge 1 is at exactly t=10 (a `<=` bug would take it); edge 3 is old but its item is from t=20.
    assert sorted(out.e_id[edge_type].tolist()) == [0, 2]
    assert sorted(out.n_id["items"].tolist()) == [0, 2]
    later = TemporalNeighborSampler(_tiny(), SamplerConfig(fanouts=(-1,))).sample(
        "users", torch.tensor([0]), torch.tensor([11])
    )
    assert sorted(later.e_id[edge_type].tolist()) == [0, 1, 2]


def test_a_seed_that_does_not_exist_yet_has_no_neighbours() -> None:
    data = _tiny()
    data["users"].time = torch.tensor([50, ALWAYS])
    out = TemporalNeighborSampler(data, SamplerConfig(fanouts=(-1,))).sample(
        "users", torch.tensor([0, 0]), torch.tensor([50, 51])
    )
    assert out.root["items"].tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize("fanouts", [(-1, -1), (1000, 1000)])
def test_full_fanout_equals_the_brute_force_neighbourhood(
    graph: HeteroData, fanouts: tuple[int, ...]
) -> None:
    sampler = TemporalNeighborSampler(graph, SamplerConfig(fanouts=fanouts))
    for seed_type in ("users", "items"):
        seeds, times = _random_seeds(graph, seed_type, 12, 7)
        out = sampler.sample(seed_type, seeds, times)
        for root, (seed, time) in enumerate(zip(seeds.tolist(), times.tolist(), strict=True)):
            sampled = Counter(
                (edge_type, int(e))
                for edge_type, e_id in out.e_id.items()
                for e in e_id[out.root[edge_type[2]][out.edge_index[edge_type][1]] == root]
            )
            assert set(sampled) == _brute_force(graph, seed_type, seed, time, len(fanouts))
            assert max(sampled.values(), default=1) == 1


def test_recent_takes_exactly_the_latest_valid_edges() -> None:
    data = HeteroData()
    _nodes(data, "users", [ALWAYS])
    _nodes(data, "items", [ALWAYS] * 8)
    _link(data, ("users", "bought", "items"), [0] * 8, list(range(8)), [4, 1, 6, 2, 9, 5, 3, 8])
    out = TemporalNeighborSampler(data, SamplerConfig(fanouts=(3,), strategy="recent")).sample(
        "users", torch.tensor([0]), torch.tensor([8])
    )
    assert sorted(out.edge_time["items", "rev_bought", "users"].tolist()) == [4, 5, 6]


def test_a_stage_drawn_apart_stays_in_view_behind_more_recent_shallow_edges() -> None:
    """Three purchases (stage 1) older than eight views (stage 0): a recent draw of 2 over the
    relation sees views only; with stage 1 drawn apart under its own cap, all three purchases too,
    by their ids in the whole relation."""
    data = HeteroData()
    _nodes(data, "users", [ALWAYS])
    _nodes(data, "items", [ALWAYS] * 11)
    times = [1, 2, 3, *range(10, 18)]
    _link(data, ("users", "engaged", "items"), [0] * 11, list(range(11)), times)
    stage = torch.tensor([1, 1, 1, *[0] * 8])
    relation = ("items", "rev_engaged", "users")
    data[relation].edge_stage = data["users", "engaged", "items"].edge_stage = stage

    def drawn(config: SamplerConfig) -> list[int]:
        out = TemporalNeighborSampler(data, config).sample(
            "users", torch.tensor([0]), torch.tensor([100])
        )
        return sorted(out.e_id[relation].tolist())

    assert drawn(SamplerConfig(fanouts=(2,), strategy="recent")) == [9, 10]
    apart = SamplerConfig(fanouts=(2,), strategy="recent", stage=StageFanouts(1, (5,)))
    assert drawn(apart) == [0, 1, 2, 9, 10]
    uniform = SamplerConfig(fanouts=(2,), strategy="uniform", stage=StageFanouts(1, (2,)))
    chosen = drawn(uniform)
    assert len(chosen) == 4 and stage[chosen].tolist().count(1) == 2
    with pytest.raises(ValueError, match="one cap per hop"):
        SamplerConfig(fanouts=(2, 1), stage=StageFanouts(1, (5,)))


def test_recent_on_the_random_graph_keeps_the_last_k_to_become_usable(graph: HeteroData) -> None:
    sampler = TemporalNeighborSampler(graph, SamplerConfig(fanouts=(5,), strategy="recent"))
    seeds, times = _random_seeds(graph, "users", 40, 3)
    out = sampler.sample("users", seeds, times)
    for edge_type in (BOUGHT, ("items", "rev_viewed", "users")):
        index, usable = graph[edge_type].edge_index, _usable_from(graph, edge_type)
        root = out.root["users"][out.edge_index[edge_type][1]]
        for r, (seed, time) in enumerate(zip(seeds.tolist(), times.tolist(), strict=True)):
            valid = (usable < time) & (index[1] == seed).numpy()
            expected = np.sort(usable[valid])[-5:].tolist()
            assert sorted(usable[out.e_id[edge_type][root == r].numpy()].tolist()) == expected


def test_fanout_is_respected_and_filled_when_possible(graph: HeteroData) -> None:
    fanouts = (4, 2)
    out = TemporalNeighborSampler(graph, SamplerConfig(fanouts=fanouts)).sample(
        "users", *_random_seeds(graph, "users", 64, 1)
    )
    for edge_type, local in out.edge_index.items():
        dst = edge_type[2]
        counts = torch.bincount(local[1], minlength=len(out.n_id[dst]))
        expanded = out.hop[dst] < len(fanouts)
        assert (counts[~expanded] == 0).all()
        valid = [
            int((_valid(graph, edge_type, t) & (graph[edge_type].edge_index[1] == v).numpy()).sum())
            for v, t in zip(
                out.n_id[dst].tolist(), out.seed_time[out.root[dst]].tolist(), strict=True
            )
        ]
        cap = torch.tensor(fanouts)[out.hop[dst].clamp(max=len(fanouts) - 1)]
        expected = torch.minimum(torch.tensor(valid), cap)
        # Nodes reached again (same root) are not re-expanded, so only first-reached nodes count.
        assert torch.equal(counts[expanded], expected[expanded])


def test_uniform_draws_are_distinct_and_unbiased() -> None:
    rng = np.random.default_rng(0)
    row, offset = draw_offsets(np.full(20000, 10), 3, "uniform", rng)
    picks = offset.reshape(-1, 3)
    assert (np.sort(picks, axis=1)[:, 1:] != np.sort(picks, axis=1)[:, :-1]).all()
    frequency = np.bincount(offset, minlength=10) / 20000
    assert np.allclose(frequency, 0.3, atol=0.015)
    assert np.array_equal(row, np.repeat(np.arange(20000), 3))


def test_same_seed_same_sample_other_seed_other_sample(graph: HeteroData) -> None:
    seeds = _random_seeds(graph, "items", 64, 2)

    def run(seed: int) -> SampledSubgraph:
        return TemporalNeighborSampler(graph, SamplerConfig(fanouts=(3, 2), seed=seed)).sample(
            "items", *seeds
        )

    first, again, other = run(0), run(0), run(1)
    for edge_type in graph.edge_types:
        assert torch.equal(first.e_id[edge_type], again.e_id[edge_type])
        assert torch.equal(first.edge_index[edge_type], again.edge_index[edge_type])
    assert any(not torch.equal(first.e_id[t], other.e_id[t]) for t in graph.edge_types)


def test_a_node_reached_from_two_roots_appears_once_per_root() -> None:
    out = TemporalNeighborSampler(_tiny(), SamplerConfig(fanouts=(-1, -1))).sample(
        "users", torch.tensor([0, 1, 0]), torch.tensor([6, 100, 6])
    )
    item = out.n_id["items"]
    # Item 0 was bought by both users before their times: once for each of the three roots.
    assert sorted(out.root["items"][item == 0].tolist()) == [0, 1, 2]
    # Through item 0, root 1 (user 1) reaches user 0 at hop 2, as its own copy of user 0.
    users = out.n_id["users"].tolist(), out.root["users"].tolist(), out.hop["users"].tolist()
    assert list(zip(*users, strict=True)) == [(0, 0, 0), (1, 1, 0), (0, 2, 0), (0, 1, 2)]


def test_heterogeneous_two_hops_to_hetero_data(graph: HeteroData) -> None:
    graph = graph.clone()
    graph["items"].x = torch.arange(graph["items"].num_nodes, dtype=torch.float).unsqueeze(1)
    out = TemporalNeighborSampler(graph, SamplerConfig(fanouts=(5, 3))).sample(
        "users", *_random_seeds(graph, "users", 32, 4)
    )
    batch = out.to_hetero_data(graph)
    assert batch.validate()
    assert set(batch.node_types) == set(graph.node_types)
    assert set(batch.edge_types) == set(graph.edge_types)
    assert {t for t in batch.node_types if (batch[t].hop == 2).any()} == {
        "users",
        "items",
        "transactions",
    }
    assert torch.equal(batch["items"].x.squeeze(1).long(), batch["items"].n_id)
    assert torch.equal(batch["items"].time, graph["items"].time[batch["items"].n_id])
    assert torch.equal(batch["users"].n_id[batch["users"].seed_local], out.n_id["users"][:32])
    assert torch.equal(batch["users"].root[batch["users"].seed_local], torch.arange(32))


def test_a_graph_without_times_is_refused() -> None:
    data = _tiny()
    del data["items"].time
    with pytest.raises(ValueError, match="'time'"):
        TemporalNeighborSampler(data)
