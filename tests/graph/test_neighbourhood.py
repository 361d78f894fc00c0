"""The reachable part of a graph: a sampler built over it draws what one over the whole graph
draws, for every seed time, while indexing a fraction of the edges."""

from __future__ import annotations

import pytest
import torch

from hier_pipeline.graph.csr import Strategy
from hier_pipeline.graph.neighbourhood import reachable_edges
from hier_pipeline.graph.sampler import SamplerConfig, TemporalNeighborSampler
from tests.graph.test_sampler import random_graph


@pytest.mark.parametrize("strategy", ["recent", "uniform"])
def test_a_sampler_over_the_reachable_edges_draws_the_same_neighbourhoods(
    strategy: Strategy,
) -> None:
    data = random_graph(seed=3, users=400, items=600, events=500)
    seeds = torch.tensor([3, 17, 17, 250])
    times = torch.tensor([100, 50, 100, 101])
    config = SamplerConfig((4, 3), strategy, seed=7)
    reachable = reachable_edges(data, {"items": seeds}, hops=2)

    everywhere = TemporalNeighborSampler(data, config).sample("items", seeds, times)
    nearby = TemporalNeighborSampler(reachable, config).sample("items", seeds, times)

    kept = sum(reachable[t].edge_index.shape[1] for t in data.edge_types)
    assert 0 < kept < sum(data[t].edge_index.shape[1] for t in data.edge_types) / 4
    assert sum(len(n) for n in nearby.n_id.values()) > len(seeds)  # the seeds have neighbours
    for node_type in data.node_types:
        assert torch.equal(nearby.n_id[node_type], everywhere.n_id[node_type])
        assert torch.equal(nearby.root[node_type], everywhere.root[node_type])
    for edge_type in data.edge_types:
        assert torch.equal(nearby.edge_index[edge_type], everywhere.edge_index[edge_type])
        assert torch.equal(nearby.edge_time[edge_type], everywhere.edge_time[edge_type])
        ours, theirs = reachable[edge_type], data[edge_type]  # e_ids differ, the edges do not
        assert torch.equal(
            ours.edge_index[:, nearby.e_id[edge_type]],
            theirs.edge_index[:, everywhere.e_id[edge_type]],
        )


def test_the_input_graph_keeps_its_edges() -> None:
    data = random_graph(seed=1, users=300, items=300, events=200)
    before = {t: data[t].edge_index.clone() for t in data.edge_types}
    reachable_edges(data, {"users": torch.tensor([0])}, hops=2)
    assert all(torch.equal(data[t].edge_index, before[t]) for t in data.edge_types)
