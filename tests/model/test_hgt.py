"""The HGTConv peer: same inputs and batches as the interest model, trainable by the same loop."""

from __future__ import annotations

from dataclasses import replace

import torch

from hier_pipeline.graph.sampler import SamplerConfig, TemporalNeighborSampler
from hier_pipeline.model.factory import build_model
from hier_pipeline.model.hgt import HGTBaseline
from hier_pipeline.model.inputs import node_type_shapes
from hier_pipeline.model.minibatch import GraphContext, make_batch
from hier_pipeline.model.network import ModelConfig
from hier_pipeline.model.train import train_model
from hier_pipeline.model.train_config import TrainConfig

HGT = ModelConfig(backbone="hgt", dim=32, heads=4, layers=2)


def test_hgt_embeds_root_seeds_and_every_layer_gets_gradients(synthetic_pipeline: tuple) -> None:
    graph, content, _ = synthetic_pipeline
    data, meta = graph.data, graph.metadata
    torch.manual_seed(0)
    model = build_model(
        node_type_shapes(data, content), list(data.edge_types), len(meta.stages), HGT
    )
    assert isinstance(model, HGTBaseline)
    sampler = TemporalNeighborSampler(data, SamplerConfig(fanouts=(8, 4)))
    users = torch.arange(16)
    sampled = sampler.sample(
        meta.user_type, users, torch.full((16,), int(data[meta.user_type].time.max()) + 1)
    )
    context = GraphContext.of(data, list(data.edge_types), len(meta.stages), content)
    out = model(make_batch(sampled, data, context))
    assert out.shape == (16, 32)
    assert torch.allclose(out.norm(dim=1), torch.ones(16), atol=1e-5)
    out.sum().backward()
    for index, layer in enumerate(model.layers):
        grads = [p.grad for p in layer.parameters() if p.grad is not None]
        assert grads and any(g.abs().sum() > 0 for g in grads), f"layer {index}"


def test_the_training_loop_trains_hgt_within_its_time_budget(synthetic_pipeline: tuple) -> None:
    graph, content, split = synthetic_pipeline
    config = TrainConfig(
        model=HGT,
        epochs=5,
        steps_per_epoch=50,
        batch_size=32,
        use_distillation=False,
        time_budget_seconds=3.0,
        patience=10,
    )
    result = train_model(graph, content, split, config)
    steps = (
        sum(h["throughput/examples_per_second"] * h["time/epoch_seconds"] for h in result.history)
        / 32
    )
    assert "loss/usage" not in result.history[0]  # the peer has no primitives
    assert 1 <= len(result.history) < 5 and round(steps) < 5 * 50  # the budget ended it early
    assert all(torch.isfinite(torch.tensor(h["val/map@10"])) for h in result.history)
    unlimited = replace(config, epochs=1, steps_per_epoch=2, time_budget_seconds=None)
    assert len(train_model(graph, content, split, unlimited).history) == 1
