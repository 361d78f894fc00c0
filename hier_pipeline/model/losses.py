"""Training objectives: funnel-weighted link prediction and the primitive-usage regulariser.

Users score items by inner product, s(u, i) = <u, i> / tau. Every funnel event (user, item, stage)
is a positive; the deepest stage (e.g. purchase) is the target and weighs most, shallower stages
(impression, click) are dense auxiliary signal that weighs less.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def default_stage_weights(num_stages: int, ratio: float = 0.3) -> Tensor:
    """w_s = ratio ** (S - 1 - s): the deepest stage weighs 1.0, each shallower one x `ratio`.

    Shapes: output [S], float32, stages ordered shallow -> deep (as `GraphMetadata.stages`).
    """
    if num_stages < 1:
        raise ValueError(f"num_stages must be >= 1, got {num_stages}")
    return ratio ** torch.arange(num_stages - 1, -1, -1, dtype=torch.float32)


def funnel_softmax_loss(
    user: Tensor,
    item: Tensor,
    item_ids: Tensor,
    stage: Tensor,
    stage_weights: Tensor,
    *,
    random_negatives: Tensor | None = None,
    hard_negatives: Tensor | None = None,
    hard_negative_mask: Tensor | None = None,
    temperature: float = 1.0,
    log_q: Tensor | None = None,
    pair_scores: Tensor | None = None,
) -> Tensor:
    """Stage-weighted sampled softmax over in-batch, random and explicit-feedback negatives.

    For event b with user u_b and positive item i_b, the candidates are i_b, every other in-batch
    item i_j whose id differs from i_b (an accidental duplicate of the positive is not a negative),
    the shared random negatives r_m, and the event's own hard negatives n_bh where present (e.g. a
    "not interested" item)::

        l_b = -log( exp s(u_b, i_b) / (exp s(u_b, i_b) + sum_{j: id_j != id_b} exp s(u_b, i_j)
                                       + sum_m exp s(u_b, r_m) + sum_h [has n_bh] exp s(u_b, n_bh)) )
        L   = (1 / B) sum_b w[stage_b] l_b

    The mean is over B, not over the weights, so a batch of impressions counts less than one of
    purchases. Popular items are over-represented among the sampled candidates, which without a
    correction teaches the model to score them *down* (it learns PMI, not p(item | user)). With
    `log_q` every sampled candidate's logit (the positive's too) becomes s / tau - log q_j, q_j
    the item's expected count among the candidates (Yi et al. 2019, "sampling-bias-corrected"),
    so the scores estimate the full softmax and keep the popularity a full ranking needs.

    Args:
        temperature: tau. 1.0 scores raw inner products; use ~0.05-0.1 for unit-norm embeddings.
        log_q: log expected candidate count of the in-batch items, then of the random
            negatives. Hard negatives are chosen per event (expected count 1): not corrected.
        pair_scores: a per-(user, candidate) term added to the inner products (before tau),
            e.g. the history bias; columns as `log_q`.

    Shapes:
        user, item: [B, d]; item_ids, stage: [B] long (stage in [0, S)); stage_weights: [S];
        random_negatives: [M, d]; hard_negatives: [B, H, d] (or [B, d] for H = 1);
        hard_negative_mask: [B, H] or [B] bool (default: all present); log_q: [B + M];
        pair_scores: [B, B + M (+ H)].
        Output: scalar.
    """
    if bool((stage < 0).any()):
        raise ValueError("every positive needs a funnel stage >= 0 (negative feedback is not one)")
    sampled = [item] if random_negatives is None else [item, random_negatives]
    scores = user @ torch.cat(sampled).T  # [B, B + M], the positive on the diagonal
    if pair_scores is not None:
        scores = scores + pair_scores[:, : scores.size(1)]
    scores = scores / temperature
    if log_q is not None:
        scores = scores - log_q
    duplicate = item_ids.unsqueeze(0) == item_ids.unsqueeze(1)
    duplicate.fill_diagonal_(False)
    columns = [scores[:, : len(item)].masked_fill(duplicate, -math.inf), scores[:, len(item) :]]
    if hard_negatives is not None:
        grouped = hard_negatives.view(len(user), -1, user.size(1))  # [B, H, d]
        hard = torch.einsum("bd,bhd->bh", user, grouped)
        if pair_scores is not None:
            hard = hard + pair_scores[:, scores.size(1) :]
        hard = hard / temperature
        if hard_negative_mask is not None:
            hard = hard.masked_fill(~hard_negative_mask.view(hard.shape), -math.inf)
        columns.append(hard)
    logits = torch.cat(columns, dim=1)
    target = torch.arange(len(user), device=user.device)
    per_event = F.cross_entropy(logits, target, reduction="none")
    return (stage_weights[stage] * per_event).mean()


def bpr_loss(
    user: Tensor, positive: Tensor, negative: Tensor, weight: Tensor | None = None
) -> Tensor:
    """Bayesian personalised ranking: L = mean_b w_b softplus(<u_b, n_b> - <u_b, p_b>).

    softplus(-x) = -log sigmoid(x). Pass `weight = stage_weights[stage]` for funnel weighting.

    Shapes: user, positive, negative: [B, d]; weight: [B] (default 1). Output: scalar.
    """
    margin = (user * positive).sum(dim=-1) - (user * negative).sum(dim=-1)
    per_event = F.softplus(-margin)
    if weight is not None:
        per_event = weight * per_event
    return per_event.mean()


def primitive_usage_loss(assignments: Tensor, normalised: bool = False) -> Tensor:
    """Negative entropy of the mean assignment, so that every primitive stays in use.

    With p = mean_n assignments[n] (a distribution over K primitives)::

        L = sum_k p_k log p_k = -H(p)          in [-log K, 0]; minimal when all are used equally
        L_normalised = 1 - H(p) / log K        in [0, 1]; 0 = uniform use, 1 = one primitive

    Shapes: assignments [N, K], rows summing to 1. Output: scalar.
    """
    mean = assignments.mean(dim=0)
    negative_entropy = (mean * torch.log(mean.clamp_min(1e-12))).sum()
    if not normalised:
        return negative_entropy
    return 1.0 + negative_entropy / math.log(assignments.size(1))
