from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hier_pipeline.model.distill import (
    DistillationConfig,
    DistillationLoss,
    ema_update,
    make_teacher,
)
from hier_pipeline.model.primitives import InterestPrimitives

K = 8


def test_ema_moves_the_teacher_by_exactly_the_momentum_formula() -> None:
    torch.manual_seed(0)
    student = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    teacher = make_teacher(student)
    assert not any(p.requires_grad for p in teacher.parameters())
    student(torch.randn(6, 4))  # moves the student's running statistics
    with torch.no_grad():
        for p in student.parameters():
            p.add_(1.0)
    before = {k: v.clone() for k, v in teacher.state_dict().items()}
    ema_update(teacher, student, momentum=0.9)
    for name, value in teacher.state_dict().items():
        source = student.state_dict()[name]
        if value.is_floating_point():
            assert torch.allclose(value, 0.9 * before[name] + 0.1 * source), name
        else:
            assert torch.equal(value, source), name


def test_ema_refuses_a_teacher_that_would_receive_gradients() -> None:
    student = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="require grad"):
        ema_update(nn.Linear(2, 2), student, 0.9)


def test_loss_is_minimal_when_the_student_matches_the_teacher() -> None:
    torch.manual_seed(0)
    loss_fn = DistillationLoss(DistillationConfig(num_primitives=K)).eval()
    teacher = torch.randn(5, K)
    targets = loss_fn.teacher_probabilities(teacher)
    # Student logits that give exactly the teacher's sharpened distribution at tau_s = 0.1.
    matched = (torch.log(targets) * 0.1).requires_grad_(True)
    loss = loss_fn(matched, teacher)
    entropy = -(targets * torch.log(targets)).sum(dim=1).mean()
    assert loss.item() == pytest.approx(entropy.item(), abs=1e-5)  # CE = H(P_t) at the minimum
    loss.backward()
    assert matched.grad is not None and matched.grad.abs().max() < 1e-6
    for _ in range(5):
        assert loss_fn(matched.detach() + 0.05 * torch.randn(5, K), teacher) > loss


def test_gradients_reach_the_student_only() -> None:
    loss_fn = DistillationLoss(DistillationConfig(num_primitives=K))
    student, teacher = torch.randn(3, K, requires_grad=True), torch.randn(3, K, requires_grad=True)
    loss_fn(student, teacher).backward()
    assert student.grad is not None and teacher.grad is None


def test_centre_moves_towards_the_mean_teacher_logits_in_training_only() -> None:
    loss_fn = DistillationLoss(DistillationConfig(num_primitives=K, center_momentum=0.9))
    teacher = torch.randn(10, K) + 3.0
    loss_fn(torch.randn(10, K), teacher)
    assert torch.allclose(loss_fn.center, 0.1 * teacher.mean(dim=0))
    for _ in range(60):  # 0.9 ** 60 < 2e-3
        loss_fn(torch.randn(10, K), teacher)
    assert torch.allclose(loss_fn.center, teacher.mean(dim=0), rtol=3e-3)
    loss_fn.eval()
    before = loss_fn.center.clone()
    loss_fn(torch.randn(10, K), teacher + 5.0)
    assert torch.equal(loss_fn.center, before)


def test_centring_removes_a_primitive_that_wins_for_everyone() -> None:
    loss_fn = DistillationLoss(DistillationConfig(num_primitives=K, center_momentum=0.0))
    teacher = torch.randn(64, K)
    teacher[:, 0] += 10.0  # collapse: primitive 0 dominates every entity
    loss_fn(torch.randn(64, K), teacher)
    winners = loss_fn.teacher_probabilities(teacher).argmax(dim=1)
    assert (winners == 0).float().mean() < 0.5


def test_symmetric_pairs_each_student_view_with_the_other_teacher_view() -> None:
    torch.manual_seed(0)
    loss_fn = DistillationLoss(DistillationConfig(num_primitives=K)).eval()
    s_b, s_c, t_b, t_c = (torch.randn(4, K) for _ in range(4))
    expected = 0.5 * (loss_fn(s_c, t_b) + loss_fn(s_b, t_c))
    assert torch.allclose(loss_fn.symmetric(s_b, s_c, t_b, t_c), expected)
    loss_fn.train()
    loss_fn.symmetric(s_b, s_c, t_b, t_c)
    assert torch.allclose(loss_fn.center, 0.1 * torch.cat([t_b, t_c]).mean(dim=0))


def _toy_views(seed: int = 0) -> tuple[InterestPrimitives, Tensor, Tensor, Tensor]:
    """256 entities in 8 behaviour clusters. The graph view sits near its cluster's primitive; the
    content view sees the cluster only through a random 24-dim code plus noise."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    primitives = InterestPrimitives(K, 16, heads=2).requires_grad_(False)
    cluster = torch.arange(256) % K
    graph_view = F.normalize(
        primitives.primitives[cluster] + 0.3 * torch.randn(256, 16, generator=generator), dim=-1
    )
    codes = torch.randn(K, 24, generator=generator)
    content = codes[cluster] + 0.5 * torch.randn(256, 24, generator=generator)
    return primitives, graph_view, content, cluster


def _distil_content_tower(teacher_view: Tensor, seed: int = 0) -> tuple[float, float]:
    """Train a content encoder on the distillation loss alone; return (agreement, cosine) of its
    output with the graph view: primitive argmax agreement and mean cosine similarity."""
    primitives, graph_view, content, _ = _toy_views(seed)
    torch.manual_seed(seed)
    encoder = nn.Linear(24, 16)
    loss = DistillationLoss(DistillationConfig(num_primitives=K))
    optimiser = torch.optim.Adam(encoder.parameters(), lr=1e-2)
    for _ in range(200):
        optimiser.zero_grad()
        student = F.normalize(encoder(content), dim=-1)
        loss(primitives.logits(student, 1.0), primitives.logits(teacher_view, 1.0)).backward()
        optimiser.step()
    with torch.no_grad():
        student = F.normalize(encoder(content), dim=-1)
    agreement = (
        (primitives.logits(student).argmax(1) == primitives.logits(graph_view).argmax(1))
        .float()
        .mean()
    )
    return float(agreement), float((student * graph_view).sum(1).mean())


def test_distillation_pulls_the_content_view_onto_the_graph_view() -> None:
    primitives, graph_view, content, _ = _toy_views()
    torch.manual_seed(0)
    untrained = F.normalize(nn.Linear(24, 16)(content), dim=-1).detach()
    chance = (
        (primitives.logits(untrained).argmax(1) == primitives.logits(graph_view).argmax(1))
        .float()
        .mean()
    )
    agreement, cosine = _distil_content_tower(graph_view)
    assert chance < 0.3 and agreement > 0.9
    assert cosine > float((untrained * graph_view).sum(1).mean()) + 0.3
    # Control: a teacher whose views belong to other entities teaches nothing transferable.
    shuffled = graph_view[torch.randperm(256, generator=torch.Generator().manual_seed(1))]
    assert _distil_content_tower(shuffled)[0] < 0.4
