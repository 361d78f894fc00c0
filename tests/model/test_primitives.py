"""InterestPrimitives: shapes, gradients, determinism, equivariance, groups and weights, O(N*K)
exchange, spread-out initialisation and assignments."""

from __future__ import annotations

import time

import torch
from torch.profiler import ProfilerActivity, profile

from hier_pipeline.model.primitives import InterestPrimitives

DIM, K = 16, 4


def _primitives(seed: int = 0, num_primitives: int = K, dim: int = DIM) -> InterestPrimitives:
    torch.manual_seed(seed)
    return InterestPrimitives(num_primitives, dim, heads=2).eval()


def _nodes(num_nodes: int = 9, dim: int = DIM, seed: int = 0) -> torch.Tensor:
    return torch.randn(num_nodes, dim, generator=torch.Generator().manual_seed(seed))


def test_exchange_shapes_with_and_without_groups() -> None:
    module, x = _primitives(), _nodes()
    nodes, primitives = module.exchange(x)
    assert nodes.shape == (9, DIM) and primitives.shape == (K, DIM)
    nodes, primitives = module.exchange(x, batch=torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2]))
    assert nodes.shape == (9, DIM) and primitives.shape == (3, K, DIM)


def test_gradients_reach_every_parameter() -> None:
    module, x = _primitives(), _nodes()
    nodes, primitives = module.exchange(x)
    loss = (nodes * torch.randn_like(nodes)).sum() + (
        primitives * torch.randn_like(primitives)
    ).sum()
    (loss + module.logits(x).logsumexp(-1).sum()).backward()
    for name, parameter in module.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_deterministic_under_a_seed() -> None:
    x = _nodes()
    first, second = _primitives(seed=5).exchange(x), _primitives(seed=5).exchange(x)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


def test_relabelling_nodes_permutes_nodes_and_keeps_primitives() -> None:
    module, x = _primitives(), _nodes()
    permutation = torch.randperm(9, generator=torch.Generator().manual_seed(1))
    nodes, primitives = module.exchange(x)
    permuted_nodes, permuted_primitives = module.exchange(x[permutation])
    assert torch.allclose(permuted_nodes, nodes[permutation], atol=1e-6)
    assert torch.allclose(permuted_primitives, primitives, atol=1e-6)


def test_groups_never_see_each_other() -> None:
    module, x = _primitives(), _nodes()
    batch = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 1])
    changed = x.clone()
    changed[4:] += 1.0
    nodes, primitives = module.exchange(x, batch=batch)
    changed_nodes, changed_primitives = module.exchange(changed, batch=batch)
    assert torch.equal(changed_nodes[:4], nodes[:4])
    assert torch.equal(changed_primitives[0], primitives[0])
    assert not torch.allclose(changed_primitives[1], primitives[1])


def test_zero_weight_nodes_do_not_shape_the_primitives() -> None:
    module, x = _primitives(), _nodes()
    weights = torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    changed = x.clone()
    changed[6:] = torch.randn(3, DIM)
    _, primitives = module.exchange(x, weights=weights)
    _, changed_primitives = module.exchange(changed, weights=weights)
    assert torch.allclose(changed_primitives, primitives, atol=1e-6)
    assert not torch.allclose(module.exchange(changed)[1], module.exchange(x)[1])


def test_only_rows_gather_and_read() -> None:
    """Nodes outside ``rows`` (stale states a layer did not update) neither shape the primitives
    nor change; a group without a row gathers nothing."""
    module, x = _primitives(), _nodes()
    batch, rows = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2]), torch.tensor([0, 1, 3, 4])
    changed = x.clone()
    changed[[2, 5, 6, 7, 8]] = torch.randn(5, DIM)
    nodes, primitives = module.exchange(x, batch=batch, rows=rows)
    changed_nodes, changed_primitives = module.exchange(changed, batch=batch, rows=rows)
    assert torch.allclose(changed_primitives, primitives, atol=1e-6)
    assert torch.allclose(changed_nodes[rows], nodes[rows], atol=1e-6)
    assert torch.equal(nodes[[2, 5, 6, 7, 8]], x[[2, 5, 6, 7, 8]])
    assert not torch.allclose(nodes[rows], x[rows])
    assert torch.allclose(primitives[2], module.gather_norm(module.primitives), atol=1e-6)


def test_exchange_never_builds_an_n_by_n_tensor() -> None:
    num_nodes, module = 997, _primitives()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as profiler:
        module.exchange(_nodes(num_nodes), batch=torch.arange(num_nodes) % 3)
    shapes = [shape for event in profiler.events() for shape in event.input_shapes]
    sizes = [size for shape in shapes if isinstance(shape, list) for size in shape]
    assert sizes.count(num_nodes) > 0
    assert not any(isinstance(shape, list) and shape.count(num_nodes) > 1 for shape in shapes), (
        "an N x N tensor"
    )


def test_exchange_with_twenty_thousand_nodes_stays_small_and_fast() -> None:
    """An N x N float matrix would be 1.6 GB here; the [N, K, heads, d_h] tensors are 41 MB."""
    num_nodes, dim = 20_000, 32
    module, x = _primitives(num_primitives=16, dim=dim), _nodes(num_nodes, dim=dim)
    with torch.no_grad():
        module.exchange(x[:100])
        start = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
            nodes, _ = module.exchange(x)
        elapsed = time.perf_counter() - start
    assert nodes.shape == (num_nodes, dim)
    assert max(event.cpu_memory_usage for event in profiler.events()) <= num_nodes * 16 * dim * 4
    assert elapsed < 2.0  # well under 1 s on an idle core; headroom for a shared machine


def test_primitives_start_orthonormal() -> None:
    primitives = _primitives().primitives.detach()
    assert torch.allclose(primitives @ primitives.T, torch.eye(K), atol=1e-5)
    many = _primitives(num_primitives=40).primitives.detach()
    assert torch.allclose(many.norm(dim=-1), torch.ones(40), atol=1e-5)


def test_assignments_are_a_softmax_of_cosine_logits() -> None:
    module, z = _primitives(), _nodes()
    logits, assignments = module.logits(z, temperature=0.5), module.assign(z, temperature=0.5)
    assert assignments.shape == (9, K)
    assert torch.allclose(assignments.sum(-1), torch.ones(9))
    assert logits.abs().max() <= 2.0 + 1e-5
    assert torch.allclose(module.logits(3.0 * z, temperature=0.5), logits, atol=1e-6)
    nearest = module.assign(module.primitives.detach(), temperature=0.05)
    assert torch.equal(nearest.argmax(-1), torch.arange(K))
