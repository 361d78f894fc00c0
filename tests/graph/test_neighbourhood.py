"""The neighbourhood a `recent` sampler draws, as a small graph of its own: a sampler over it
draws what one over the whole graph draws, also when the graph is a dataset's plus rows added
after it that were never concatenated to it."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from hier_pipeline.graph.neighbourhood import recent_neighbourhood
from hier_pipeline.graph.sampler import SamplerConfig, StageFanouts, TemporalNeighborSampler
from tests.graph.test_sampler import random_graph

ADDED = 300  # the last transactions, as if a batch had brought them


@pytest.mark.parametrize("fanouts", [(4, 3), (2, 6), (3, -1)])
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("stage", [None, StageFanouts(1, (6, 1))])
def test_a_sampler_over_the_neighbourhood_draws_what_one_over_the_whole_graph_draws(
    fanouts: tuple[int, ...], split: bool, stage: StageFanouts | None
) -> None:
    data = random_graph(seed=3, users=200, items=300, events=2000)
    for node_type in data.node_types:  # features as a built graph has them
        rows = int(data[node_type].num_nodes)
        data[node_type].x_num = torch.randn(rows, 2)
        data[node_type].x_cat = torch.randint(0, 9, (rows, 1))
    views = data["users", "viewed", "items"]
    staged = (torch.rand(views.num_edges, generator=torch.Generator().manual_seed(0)) < 0.2).long()
    views.edge_stage = data["items", "rev_viewed", "users"].edge_stage = staged
    config = SamplerConfig(fanouts, "recent", stage=stage)
    users = torch.tensor([5, 9, 11])
    drawn = TemporalNeighborSampler(data, config).sample("users", users, torch.full_like(users, 60))
    near_users = drawn.n_id["items"][drawn.hop["items"] == 1]  # items a user seed expands next
    assert len(near_users) > 0
    seeds = {"items": torch.cat([torch.tensor([17, 17, 250]), near_users[:2]]), "users": users}
    base, added = _split(data) if split else (data, HeteroData())

    near = recent_neighbourhood(base, added, seeds, config, before=60)

    total = sum(data[t].edge_index.shape[1] for t in data.edge_types)
    assert 0 < sum(near.graph[t].edge_index.shape[1] for t in data.edge_types) < total / 4
    degree = {t: torch.zeros(int(data[t].num_nodes)) for t in data.node_types}
    for edge_type in data.edge_types:
        degree[edge_type[0]] += torch.bincount(
            data[edge_type].edge_index[0], minlength=int(data[edge_type[0]].num_nodes)
        )
    for node_type in data.node_types:
        ids = near.graph[node_type].global_id
        assert torch.equal(near.graph[node_type].degree, degree[node_type][ids])
        for name in ("time", "x_num", "x_cat"):
            assert torch.equal(near.graph[node_type][name], data[node_type][name][ids])
    for seed_type, nodes in seeds.items():  # an item seed may be a user seed's neighbour
        _assert_same_draws(data, near.graph, config, seed_type, nodes, near.seeds[seed_type])


def _assert_same_draws(
    data: HeteroData,
    near: HeteroData,
    config: SamplerConfig,
    seed_type: str,
    seeds: Tensor,
    local: Tensor,
) -> None:
    times = torch.full_like(seeds, 60)
    everywhere = TemporalNeighborSampler(data, config).sample(seed_type, seeds, times)
    nearby = TemporalNeighborSampler(near, config).sample(seed_type, local, times)
    assert sum(len(n) for n in nearby.n_id.values()) > len(seeds)  # the seeds have neighbours
    for node_type in data.node_types:
        global_id = near[node_type].global_id[nearby.n_id[node_type]]
        assert torch.equal(global_id, everywhere.n_id[node_type])
        assert torch.equal(nearby.root[node_type], everywhere.root[node_type])
    for edge_type in data.edge_types:
        assert torch.equal(nearby.edge_index[edge_type], everywhere.edge_index[edge_type])
        assert torch.equal(nearby.edge_time[edge_type], everywhere.edge_time[edge_type])


def _split(data: HeteroData) -> tuple[HeteroData, HeteroData]:
    """The graph without its last `ADDED` transactions, and those with their edges (numbered as
    in the whole graph, which lists a transaction's edges in transaction order)."""
    base, added = HeteroData(), HeteroData()
    kept = int(data["transactions"].num_nodes) - ADDED
    for node_type in data.node_types:
        base[node_type].num_nodes = data[node_type].num_nodes
    base["transactions"].num_nodes, added["transactions"].num_nodes = kept, ADDED
    for name in ("time", "x_num", "x_cat"):
        for node_type in data.node_types:
            base[node_type][name] = data[node_type][name]
        base["transactions"][name] = data["transactions"][name][:kept]
        added["transactions"][name] = data["transactions"][name][kept:]
    for edge_type in data.edge_types:
        store = data[edge_type]
        side = [i for i, t in enumerate((edge_type[0], edge_type[2])) if t == "transactions"]
        later = (
            store.edge_index[side[0]] >= kept
            if side
            else torch.zeros_like(store.edge_time, dtype=torch.bool)
        )
        for part, mask in ((base, ~later), (added, later)):
            if mask.any() or part is base:
                part[edge_type].edge_index = store.edge_index[:, mask]
                for name in ("edge_time", "edge_stage"):
                    if name in store:
                        part[edge_type][name] = store[name][mask]
    return base, added
