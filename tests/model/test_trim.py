"""Trim-to-layer: deeper layers skip nodes that can no longer reach a root, and the roots' outputs
are exactly what the untrimmed computation gives (attention and HGT; the primitive exchange, which
by design gathers from the nodes a layer updated only, is the documented exception)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hier_pipeline.graph.sampler import SamplerConfig, TemporalNeighborSampler
from hier_pipeline.model.factory import build_model
from hier_pipeline.model.hgt import HGTBaseline
from hier_pipeline.model.inputs import node_type_shapes
from hier_pipeline.model.minibatch import GraphContext, ModelBatch, make_batch
from hier_pipeline.model.network import InterestModel, ModelConfig


@pytest.fixture(scope="module")
def batch_and_shapes(synthetic_pipeline: tuple) -> tuple[ModelBatch, dict, list, int]:
    graph, content, _ = synthetic_pipeline
    data, meta = graph.data, graph.metadata
    sampler = TemporalNeighborSampler(data, SamplerConfig(fanouts=(6, 3), seed=0))
    end = int(data[meta.item_type].time.max()) + 1
    sampled = sampler.sample(meta.item_type, torch.arange(24), torch.full((24,), end))
    context = GraphContext.of(data, list(data.edge_types), len(meta.stages), content)
    batch = make_batch(sampled, data, context)
    return batch, node_type_shapes(data, content), list(data.edge_types), len(meta.stages)


def test_nodes_of_a_type_come_hop_by_hop(batch_and_shapes: tuple) -> None:
    batch = batch_and_shapes[0]
    for start, end in batch.offsets.values():
        hops = batch.hop[start:end]
        assert torch.all(hops[1:] >= hops[:-1])
    assert batch.hop.max() == 2 and torch.all(batch.edges.hop < 2)


def _model(batch_and_shapes: tuple, config: ModelConfig) -> torch.nn.Module:
    _, shapes, relations, stages = batch_and_shapes
    torch.manual_seed(0)
    return build_model(shapes, relations, stages, config).eval()


def test_trimmed_attention_layers_give_the_untrimmed_root_outputs(batch_and_shapes: tuple) -> None:
    batch = batch_and_shapes[0]
    model = _model(batch_and_shapes, ModelConfig(dim=32, layers=3, use_primitives=False))
    assert isinstance(model, InterestModel)
    with torch.no_grad():
        h = torch.cat(
            [
                model.inputs(t, batch.features[t])
                for t, (start, end) in batch.offsets.items()
                if end > start
            ]
        )
        for layer in model.layers:
            h = layer(h, batch.edges)
        untrimmed = F.normalize(model.output(h[batch.seed_index]), dim=-1)
        assert torch.allclose(model(batch), untrimmed, atol=1e-5)


def test_trimmed_hgt_gives_the_untrimmed_root_outputs(batch_and_shapes: tuple) -> None:
    batch = batch_and_shapes[0]
    model = _model(batch_and_shapes, ModelConfig(backbone="hgt", dim=32, layers=2))
    assert isinstance(model, HGTBaseline)
    with torch.no_grad():
        x = {
            t: model.inputs(t, batch.features[t]) if end > start else torch.zeros(0, 32)
            for t, (start, end) in batch.offsets.items()
        }
        everything = model._edge_index(batch, torch.ones(len(batch.edges), dtype=torch.bool))
        for layer in model.layers:
            updated = layer(x, everything)
            x = {t: updated.get(t, h) for t, h in x.items()}
        h = torch.cat([x[t] for t in batch.node_types])
        untrimmed = F.normalize(model.output(h[batch.seed_index]), dim=-1)
        assert torch.allclose(model(batch), untrimmed, atol=1e-5)


def test_a_node_two_hops_away_still_reaches_its_root(batch_and_shapes: tuple) -> None:
    """With the primitive exchange on, trimming must not cut the far hop off."""
    batch = batch_and_shapes[0]
    model = _model(batch_and_shapes, ModelConfig(dim=32, layers=2))
    far_type = next(
        t for t, (start, end) in batch.offsets.items() if (batch.hop[start:end] == 2).any()
    )
    start, end = batch.offsets[far_type]
    far = int(torch.nonzero(batch.hop[start:end] == 2)[0])
    root = int(batch.root[start + far])
    features = {k: v.clone() for k, v in batch.features[far_type].items()}
    features["x_num"][far] += 5.0
    changed = ModelBatch(**{**batch.__dict__, "features": {**batch.features, far_type: features}})
    with torch.no_grad():
        before, after = model(batch), model(changed)
    moved = (before - after).abs().sum(dim=1) > 1e-6
    assert moved[root] and int(moved.sum()) == 1  # and no other root's neighbourhood
