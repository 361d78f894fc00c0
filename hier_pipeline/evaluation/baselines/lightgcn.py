"""LightGCN (He et al., SIGIR 2020) on the bipartite user-item graph of the training interactions,
trained with BPR: the standard graph collaborative-filtering baseline, on PyG's `LightGCN` (its
embedding and loss) with a faster propagation (`propagate`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import Tensor
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.models import LightGCN
from torch_geometric.utils import to_torch_csr_tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions, PairMatrix, quiet_csr
from hier_pipeline.evaluation.baselines.recommender import (
    DEFAULT_BUDGET,
    UNSCORED,
    FitBudget,
    Fits,
    Memo,
    plus_buy_again,
)


class _Propagation(torch.autograd.Function):
    """sum_l alpha_l A^l x for a symmetric sparse A, with a backward written out: by symmetry
    the gradient is sum_l alpha_l A^l g, which Horner's rule gives in as many products
    (h = alpha_L g; h = A h + alpha_l g, l = L-1 .. 0). Autograd's graph of the same sum
    allocated, scaled and summed a [N, dim] tensor per layer in both passes: half of a Complete
    Journey step beside the sparse products themselves (profiled, `bench_lightgcn.py`)."""

    @staticmethod
    def forward(ctx: Any, adjacency: Tensor, x: Tensor, alpha: list[float]) -> Tensor:
        ctx.adjacency, ctx.alpha = adjacency, alpha
        out = x * alpha[0]
        layer = x
        for weight in alpha[1:]:
            layer = adjacency @ layer
            out.add_(layer, alpha=weight)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, Tensor, None]:
        alpha = ctx.alpha
        h = grad * alpha[-1]
        for weight in reversed(alpha[:-1]):
            h = ctx.adjacency @ h
            h.add_(grad, alpha=weight)
        return None, h, None


def propagate(model: LightGCN, adjacency: Tensor) -> Tensor:
    """`model.get_embedding`'s layer-weighted sum over a symmetric CSR adjacency: one sparse-dense
    product per layer and per backward pass (`_Propagation`). On Complete Journey's 665k pairs
    and 2 layers a BPR step takes 0.096 s on 2 threads, where PyG's message passing (one
    message per edge) takes 1.00 s and autograd over the same products 0.127 s
    (`benchmarks/bench_lightgcn.py`).

    Shapes: adjacency [N, N] sparse CSR, symmetric -> [N, dim]."""
    alpha = model.alpha.tolist()
    out: Tensor = _Propagation.apply(adjacency, model.embedding.weight, alpha)
    return out


def normalised_edges(
    user: Tensor, item: Tensor, weight: Tensor, num_nodes: int
) -> tuple[Tensor, Tensor]:
    """The weighted user-item graph, both directions, symmetrically normalised (D^-1/2 A D^-1/2),
    as PyG's (edge_index, edge_weight). Shapes: user, item, weight [E] (item ids offset past the
    users) -> [2, 2E], [2E]."""
    return gcn_norm(
        torch.stack([torch.cat([user, item]), torch.cat([item, user])]),
        weight.repeat(2),
        num_nodes=num_nodes,
        add_self_loops=False,
    )


def symmetric_adjacency(user: Tensor, item: Tensor, weight: Tensor, num_nodes: int) -> Tensor:
    """`normalised_edges` as a CSR matrix [num_nodes, num_nodes], what `propagate` reads."""
    edge_index, edge_weight = normalised_edges(user, item, weight, num_nodes)
    with quiet_csr():
        return to_torch_csr_tensor(edge_index, edge_weight, size=(num_nodes, num_nodes))


def bpr_step(
    model: LightGCN,
    optimizer: torch.optim.Optimizer,
    embedding: Tensor,
    user: Tensor,
    item: Tensor,
    negative: Tensor,
    l2: float,
) -> None:
    """One optimiser step of BPR on this step's propagated `embedding` ([N, dim]): each user
    ranks its item above its negative (node ids [B] each), `l2` on the batch's own embeddings
    (PyG's `recommendation_loss`)."""
    anchor = embedding[user]
    loss = model.recommendation_loss(
        (anchor * embedding[item]).sum(-1),
        (anchor * embedding[negative]).sum(-1),
        node_id=torch.cat([user, item, negative]),
        lambda_reg=l2,
    )
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()  # no gradients held between steps (`Fits` keeps fits between rungs)


class LightGCNRecommender:
    """score(u, i) = <e_u, e_i> + repeat_weight x sd_u x c_ui: the layer-averaged propagated
    embeddings, plus the user's own confidence (`plus_buy_again`, the spread over the known
    items, since BPR leaves their scale free). Items not yet created at the cutoff (node time
    >= it) score UNSCORED and are never drawn as negatives. The embeddings are fitted once per
    history and depth (`memo`): the repeat weights of a grid share them.

    The graph's edges are the (user, item) pairs with a positive confidence (`confidence()` of the
    profiled history), weighted by it before the symmetric normalisation, so a staple bought
    weekly pulls harder than an item glanced at once. Each step: `batch_size` of those pairs drawn
    uniformly (with replacement), a uniformly drawn known item as the negative of each, BPR loss plus `l2` on
    the batch's embeddings (`LightGCN.recommendation_loss`), one Adam step after a full-graph
    propagation. The default learning rate suits a budget of a few hundred steps: in a pilot on
    the synthetic world (scale 1, 300 steps, 1 layer) 5e-3 reached MAP@10 0.044, 2e-2 0.087.

    Args:
        item_time: node time of every item [I], to know which items exist at the cutoff.
    """

    def __init__(
        self,
        item_time: Tensor,
        num_layers: int = 2,
        dim: int = 64,
        budget: FitBudget = DEFAULT_BUDGET,
        batch_size: int = 2048,
        learning_rate: float = 2e-2,
        l2: float = 1e-4,
        repeat_weight: float = 0.0,
        seed: int = 0,
        memo: Memo | None = None,
    ) -> None:
        self.item_time = item_time
        self.num_layers, self.dim = num_layers, dim
        self.budget, self.batch_size = budget, batch_size
        self.learning_rate, self.l2, self.seed = learning_rate, l2, seed
        self.repeat_weight, self.memo = repeat_weight, memo or Memo()
        self.users = self.items = torch.zeros(0, dim)
        self.known = torch.zeros(0, dtype=torch.bool)
        self.own: PairMatrix | None = None

    def fit(self, history: Interactions) -> None:
        self.known = self.item_time < history.before
        self.own = pairs = history.confidence()
        key = (history, self.num_layers, self.dim, self.budget, self.batch_size, self.learning_rate)
        self.users, self.items = self.memo.get(
            "lightgcn", (*key, self.l2, self.seed), lambda: self._embed(history, pairs)
        )

    def _embed(self, history: Interactions, pairs: PairMatrix) -> tuple[Tensor, Tensor]:
        """The propagated user and item embeddings, BPR-trained for the budget on the positive
        `pairs` (the history's confidence); a longer fit continues a shorter one (`Fits`)."""
        positive = pairs.value > 0
        user, item = pairs.user[positive], pairs.item[positive] + history.num_users
        num_nodes = history.num_users + history.num_items
        adjacency = symmetric_adjacency(user, item, pairs.value[positive], num_nodes)
        known_items = self.known.nonzero().flatten() + history.num_users

        def start() -> tuple[LightGCN, torch.optim.Optimizer, torch.Generator]:
            torch.manual_seed(self.seed)
            model = LightGCN(num_nodes, self.dim, self.num_layers)
            optimizer = torch.optim.Adam(model.parameters(), lr=self.learning_rate, fused=True)
            return model, optimizer, torch.Generator().manual_seed(self.seed)

        def step(state: tuple[LightGCN, torch.optim.Optimizer, torch.Generator]) -> None:
            model, optimizer, generator = state
            batch = torch.randint(len(user), (self.batch_size,), generator=generator)
            negative = known_items[
                torch.randint(len(known_items), (self.batch_size,), generator=generator)
            ]
            embedding = propagate(model, adjacency)
            bpr_step(model, optimizer, embedding, user[batch], item[batch], negative, self.l2)

        fits = self.memo.get("lightgcn_fits", history.lineage[:1], Fits)
        setting = (self.num_layers, self.dim, self.batch_size, self.learning_rate, self.l2)
        budget = self.budget if len(user) else replace(self.budget, steps=0)
        model = fits.train((history.lineage, *setting, self.seed), budget, start, step)[0]
        with torch.no_grad():
            embedding = propagate(model, adjacency)
        return embedding[: history.num_users], embedding[history.num_users :]

    def score(self, users: Tensor) -> Tensor:
        scores = self.users[users] @ self.items.T
        if self.own is not None:
            scores = plus_buy_again(scores, self.own, users, self.repeat_weight, self.known)
        return scores.masked_fill(~self.known, UNSCORED)
