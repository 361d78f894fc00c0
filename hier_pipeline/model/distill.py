"""Cross-view self-distillation over interest-primitive assignments (DINO, Caron et al. 2021).

Each entity has two views: the behaviour view (the graph encoder over its neighbourhood) and the
content view (its text/image/type inputs only). Each view yields logits over the K primitives. A
teacher, an exponential moving average of the student (BYOL, Grill et al. 2020) that receives no
gradients, produces targets on one view; the student is trained to match them on the other::

    P_t = softmax((z_t - c) / tau_t)          teacher: centred, sharpened (tau_t < tau_s), no grad
    L   = - mean_n sum_k P_t[n, k] log softmax(z_s / tau_s)[n, k]
    c  <- m c + (1 - m) mean_n z_t            centre: running mean of the teacher's logits

Why this does not collapse, although nothing contrasts entities: a student can cheat in two ways,
by putting every entity on one primitive, or by spreading every entity uniformly over all of them.
Centring subtracts the running mean logit, so a primitive that wins for everyone loses its edge:
that pushes the teacher towards uniform and rules out the one-primitive collapse. Sharpening with
a low teacher temperature pushes each target towards one-hot and rules out the uniform collapse.
Each alone would collapse the other way; together they leave only per-entity, confident and
balanced assignments. The stop-gradient and the slow EMA teacher keep the targets from chasing the
student. Distilling behaviour -> content is what lets a brand-new entity, which has only content,
be assigned primitives close to where the graph would put it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def make_teacher(student: nn.Module) -> nn.Module:
    """A frozen copy of the student, to be moved only by `ema_update`."""
    teacher = copy.deepcopy(student)
    teacher.requires_grad_(False)
    return teacher


@torch.no_grad()
def ema_update(teacher: nn.Module, student: nn.Module, momentum: float) -> None:
    """theta_teacher <- momentum * theta_teacher + (1 - momentum) * theta_student, in place.

    Floating-point buffers (e.g. running statistics) move the same way; others are copied.
    """
    if not 0.0 <= momentum <= 1.0:
        raise ValueError(f"momentum must be in [0, 1], got {momentum}")
    if any(p.requires_grad for p in teacher.parameters()):
        raise ValueError("teacher parameters must not require grad (see `make_teacher`)")
    pairs = [
        *zip(teacher.parameters(), student.parameters(), strict=True),
        *zip(teacher.buffers(), student.buffers(), strict=True),
    ]
    for target, source in pairs:
        if target.is_floating_point():
            target.mul_(momentum).add_(source.detach(), alpha=1.0 - momentum)
        else:
            target.copy_(source)


@dataclass(frozen=True)
class DistillationConfig:
    """Args:
    num_primitives: K, the width of the logits.
    student_temperature: tau_s.
    teacher_temperature: tau_t; lower than tau_s, so targets are sharper than predictions.
    center_momentum: m of the running centre.
    """

    num_primitives: int
    student_temperature: float = 0.1
    teacher_temperature: float = 0.04
    center_momentum: float = 0.9


class DistillationLoss(nn.Module):
    """Cross-entropy from centred, sharpened teacher assignments to student assignments.

    The centre buffer moves only in training mode, after the loss is computed from the old one.

    Shapes:
        student_logits, teacher_logits: [N, K]. Output: scalar. center: [K].
    """

    center: Tensor

    def __init__(self, config: DistillationConfig) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("center", torch.zeros(config.num_primitives))

    def forward(self, student_logits: Tensor, teacher_logits: Tensor) -> Tensor:
        """One direction: the teacher's view supervises the student's view."""
        loss = self._cross_entropy(student_logits, teacher_logits)
        self._update_center(teacher_logits)
        return loss

    def symmetric(
        self,
        student_behaviour: Tensor,
        student_content: Tensor,
        teacher_behaviour: Tensor,
        teacher_content: Tensor,
    ) -> Tensor:
        """Both directions, averaged: behaviour teacher -> content student and the reverse.

        The centre moves once, from both teacher views together.
        """
        loss = 0.5 * (
            self._cross_entropy(student_content, teacher_behaviour)
            + self._cross_entropy(student_behaviour, teacher_content)
        )
        self._update_center(torch.cat([teacher_behaviour, teacher_content]))
        return loss

    def teacher_probabilities(self, teacher_logits: Tensor) -> Tensor:
        """softmax((z_t - c) / tau_t), without gradient. Shapes: [N, K] -> [N, K]."""
        centred = teacher_logits.detach() - self.center
        return F.softmax(centred / self.config.teacher_temperature, dim=-1)

    def _cross_entropy(self, student_logits: Tensor, teacher_logits: Tensor) -> Tensor:
        targets = self.teacher_probabilities(teacher_logits)
        log_probs = F.log_softmax(student_logits / self.config.student_temperature, dim=-1)
        return -(targets * log_probs).sum(dim=-1).mean()

    @torch.no_grad()
    def _update_center(self, teacher_logits: Tensor) -> None:
        if self.training:
            momentum = self.config.center_momentum
            self.center.mul_(momentum).add_(teacher_logits.mean(dim=0), alpha=1.0 - momentum)
