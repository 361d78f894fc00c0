"""BiasAwareGraphAttention: shapes, gradients, determinism, isolated nodes, permutation
equivariance, bias switches, a learnable stage preference, and the recency buckets."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
import torch
from torch import Tensor
from torch_geometric.utils import scatter

from hier_pipeline.model.attention import AttentionConfig, BiasAwareGraphAttention, recency_bucket
from hier_pipeline.model.edges import EdgeFeatures

CONFIG = AttentionConfig(
    dim=16, heads=2, num_relations=3, num_stages=3, recency_buckets=8, max_hops=3
)
SWITCHES = {
    "use_relation_bias": "relation_bias",
    "use_stage_bias": "stage_bias",
    "use_recency_bias": "recency_bias",
    "use_hop_bias": "hop_bias",
    "use_popularity_correction": "popularity",
}


@dataclass(frozen=True)
class Graph:
    x: Tensor
    edges: EdgeFeatures


def _graph(num_nodes: int = 7, num_edges: int = 16, seed: int = 0) -> Graph:
    """A random graph in which the last node has no incoming edge."""
    generator = torch.Generator().manual_seed(seed)

    def ints(low: int, high: int) -> Tensor:
        return torch.randint(low, high, (num_edges,), generator=generator)

    return Graph(
        x=torch.randn(num_nodes, CONFIG.dim, generator=generator),
        edges=EdgeFeatures(
            index=torch.stack([ints(0, num_nodes), ints(0, num_nodes - 1)]),
            relation=ints(0, CONFIG.num_relations),
            stage=ints(-1, CONFIG.num_stages),
            age=torch.rand(num_edges, generator=generator) ** 4 * 1e6,
            hop=ints(0, CONFIG.max_hops),
            source_log_degree=torch.log1p(ints(1, 100).float()),
        ),
    )


def _block(config: AttentionConfig = CONFIG, seed: int = 0) -> BiasAwareGraphAttention:
    torch.manual_seed(seed)
    return BiasAwareGraphAttention(config).eval()


def test_shapes_and_attention_normalised_per_destination() -> None:
    graph, block = _graph(), _block()
    assert block(graph.x, graph.edges).shape == (7, CONFIG.dim)
    alpha = block.attention_weights(graph.x, graph.edges)
    assert alpha.shape == (16, CONFIG.heads)
    totals = scatter(alpha, graph.edges.destination, dim=0, dim_size=7)
    has_incoming = torch.zeros(7, dtype=torch.bool)
    has_incoming[graph.edges.destination] = True
    assert torch.allclose(totals[has_incoming], torch.ones(1))
    assert torch.all(totals[~has_incoming] == 0)


def test_gradients_reach_every_parameter() -> None:
    graph, block = _graph(), _block()
    out = block(graph.x, graph.edges)
    (out * torch.randn_like(out)).sum().backward()
    for name, parameter in block.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_deterministic_under_a_seed() -> None:
    graph = _graph()
    first = _block(seed=3)(graph.x, graph.edges)
    second = _block(seed=3)(graph.x, graph.edges)
    assert torch.equal(first, second)


def test_node_without_incoming_edges_keeps_its_input_under_attention() -> None:
    graph, block = _graph(), _block()
    isolated = graph.x[-1:]
    assert torch.equal(block.attend(graph.x, graph.edges)[-1:], isolated)
    assert torch.allclose(block(graph.x, graph.edges)[-1:], block.feed_forward(isolated), atol=1e-6)


def test_relabelling_nodes_permutes_the_output() -> None:
    graph, block = _graph(), _block()
    permutation = torch.randperm(7, generator=torch.Generator().manual_seed(1))
    new_label = torch.empty_like(permutation)
    new_label[permutation] = torch.arange(7)
    relabelled = Graph(
        graph.x[permutation], replace(graph.edges, index=new_label[graph.edges.index])
    )
    expected = block(graph.x, graph.edges)[permutation]
    assert torch.allclose(block(relabelled.x, relabelled.edges), expected, atol=1e-6)


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_each_bias_switch_changes_the_output_and_owns_its_parameters(switch: str) -> None:
    graph, prefix = _graph(), SWITCHES[switch]
    on, off = _block(), _block(replace(CONFIG, **{switch: False}))
    assert any(name.startswith(prefix) for name, _ in on.named_parameters())
    assert not any(name.startswith(prefix) for name, _ in off.named_parameters())
    assert sum(p.numel() for p in off.parameters()) < sum(p.numel() for p in on.parameters())
    missing, unexpected = off.load_state_dict(on.state_dict(), strict=False)
    assert not missing and unexpected and all(key.startswith(prefix) for key in unexpected)
    assert not torch.allclose(on(graph.x, graph.edges), off(graph.x, graph.edges))


def test_temporal_messages_carry_an_edges_age_and_stage_where_biases_cannot() -> None:
    """A destination with one incoming edge gives it all its attention whatever the biases, so
    only a message that encodes the edge's age (or stage) can tell a fresh engagement from an
    old one; without the option the block has no such parameters and ignores both."""
    single = EdgeFeatures(
        index=torch.tensor([[0], [1]]),
        relation=torch.tensor([0]),
        stage=torch.tensor([2]),
        age=torch.tensor([60.0]),
        hop=torch.tensor([0]),
        source_log_degree=torch.tensor([1.0]),
    )
    older = replace(single, age=torch.tensor([1e6]))
    shallower = replace(single, stage=torch.tensor([0]))
    x = _graph().x[:2]
    plain, timed = _block(), _block(replace(CONFIG, temporal_messages=True))
    assert not any(name.startswith("event_") for name, _ in plain.named_parameters())
    assert torch.equal(plain(x, single), plain(x, older))
    assert torch.equal(plain(x, single), plain(x, shallower))
    assert not torch.allclose(timed(x, single), timed(x, older))
    assert not torch.allclose(timed(x, single), timed(x, shallower))
    missing, unexpected = timed.load_state_dict(plain.state_dict(), strict=False)
    assert sorted(missing) == ["event_key.weight", "event_value.weight"] and not unexpected


def test_stage_bias_learns_to_prefer_the_deep_funnel_edge() -> None:
    """Each of 32 destinations has a view, a cart and a purchase neighbour; the target is what the
    block returns when the purchase edge is the only one. Only the stage bias is trained."""
    block, destinations = _block(), 32
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4 * destinations, CONFIG.dim, generator=generator)
    edge_index = torch.stack(
        [
            torch.arange(destinations, 4 * destinations),
            torch.arange(destinations).repeat_interleave(3),
        ]
    )
    num_edges = edge_index.size(1)
    stage = torch.tensor([0, 1, 2]).repeat(destinations)
    graph = Graph(
        x=x,
        edges=EdgeFeatures(
            index=edge_index,
            relation=torch.zeros(num_edges, dtype=torch.long),
            stage=stage,
            age=torch.rand(num_edges, generator=generator) * 1e5,
            hop=torch.zeros(num_edges, dtype=torch.long),
            source_log_degree=torch.rand(num_edges, generator=generator) * 4,
        ),
    )
    purchase = stage == 2
    with torch.no_grad():
        target = block.attend(x, graph.edges.select(purchase))[:destinations]
    block.requires_grad_(False)
    assert block.stage_bias is not None
    block.stage_bias.requires_grad_(True)
    optimiser = torch.optim.Adam(block.stage_bias.parameters(), lr=0.1)
    for _ in range(50):
        optimiser.zero_grad()
        loss = (block.attend(x, graph.edges)[:destinations] - target).pow(2).mean()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        alpha = block.attention_weights(x, graph.edges)
    assert alpha[purchase].mean() > 0.9
    assert alpha[purchase].min() > 0.5  # the purchase edge dominates at every destination


def test_recency_buckets_are_monotone_and_clipped() -> None:
    ages = torch.tensor([-5.0, 0.0, 59.0, 60.0, 179.0, 180.0, 3600.0, 86400.0, 1e7, 1e12, 9e18])
    buckets = recency_bucket(ages, 8)
    assert buckets.dtype == torch.long
    assert torch.all(buckets[1:] >= buckets[:-1])
    assert buckets.tolist()[:6] == [0, 0, 0, 1, 1, 2]
    assert buckets.max() == 7 and buckets.min() == 0
