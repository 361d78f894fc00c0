from __future__ import annotations

import pytest
import torch
from torch import nn

from hier_pipeline.model.distill import (
    DistillationConfig,
    DistillationLoss,
    ema_update,
    make_teacher,
)

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
