"""K learned interest primitives: the global super-node tokens of the sparse long-range attention
(O(N*K) instead of O(N^2)) and the prototypes that embeddings are softly assigned to."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.utils import to_dense_batch


class _Projections(nn.Module):
    """Query, key, value and output maps of one multi-head cross-attention."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)


class InterestPrimitives(nn.Module):
    r"""K learned primitive vectors :math:`P \in \mathbb{R}^{K \times dim}` in the node space.

    :meth:`exchange` routes long-range information through the primitives in two multi-head
    cross-attention steps, each with residual and LayerNorm. With nodes grouped by ``batch``
    (:math:`b_i`, e.g. each node's root seed, so that disjoint temporal neighbourhoods never see
    each other) and optional node weights :math:`w_i \ge 0`:

    .. math::
        P'_{b,k} = \mathrm{LN}\Big(P_k + W_o^g \big\Vert_h \sum_{i: b_i = b}
            \mathrm{softmax}_i\Big(\frac{q(P_k)^h \cdot k(x_i)^h}{\sqrt{d_h}} + \log w_i\Big)
            v(x_i)^h\Big)

        x'_i = \mathrm{LN}\Big(x_i + W_o^r \big\Vert_h \sum_k
            \mathrm{softmax}_k\Big(\frac{q(x_i)^h \cdot k(P'_{b_i,k})^h}{\sqrt{d_h}}\Big)
            v(P'_{b_i,k})^h\Big)

    Both attention maps are [G, M, K, heads] (G groups padded to the largest, M nodes): time
    O(N K dim), memory O(G M K heads), never N x N.

    :meth:`logits` and :meth:`assign` compare embeddings with the base primitives by cosine
    similarity: :math:`\ell_{ik} = \cos(z_i, P_k) / \tau`, :math:`a_{ik} = \mathrm{softmax}_k
    (\ell_{ik})`.

    The primitives start orthogonal (when ``K <= dim``) and of unit norm, so they start spread out.

    Args:
        num_primitives (int): K.
        dim (int): Node embedding size; must be divisible by ``heads``.
        heads (int): Attention heads of :meth:`exchange`. (default: ``4``)
        dropout (float): Dropout on the updates of :meth:`exchange` (before each residual). (default: ``0.0``)

    Shapes:
        - :meth:`exchange`: ``x`` [N, dim], ``batch`` [N] (int, groups ``0 .. B - 1``),
          ``weights`` [N] -> ``x'`` [N, dim] and ``P'`` [K, dim] ([B, K, dim] when ``batch``
          is given)
        - :meth:`logits`, :meth:`assign`: ``z`` [N, dim] -> [N, K]
    """

    def __init__(self, num_primitives: int, dim: int, heads: int = 4, dropout: float = 0.0) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim ({dim}) must be divisible by heads ({heads})")
        self.num_primitives, self.dim, self.heads = num_primitives, dim, heads
        self.head_dim = dim // heads
        primitives = nn.init.orthogonal_(torch.empty(num_primitives, dim))
        self.primitives = nn.Parameter(F.normalize(primitives, dim=-1))
        self.gather = _Projections(dim)
        self.gather_norm = nn.LayerNorm(dim)
        self.read = _Projections(dim)
        self.read_norm = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)

    def exchange(
        self,
        x: Tensor,
        batch: Tensor | None = None,
        weights: Tensor | None = None,
        rows: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Primitives gather from the nodes of each group, then those nodes read their group's
        updated primitives. ``weights`` (e.g. a 0/1 mask as floats) scale each node's say in the
        gathering; a group whose weights are all zero gathers as if unweighted. Only ``rows``
        (indices), if given, take part, both gathering and reading: in a layer that updated only
        some nodes, the others' states are stale, and skipping them is what makes the exchange
        cheap (most of a sampled neighbourhood is its last hop). The other nodes come back
        unchanged, and a group without a row gathers nothing.

        Shapes: see the class.
        """
        num_nodes = x.size(0)
        group = x.new_zeros(num_nodes, dtype=torch.long) if batch is None else batch
        num_groups = 1 if batch is None or num_nodes == 0 else int(batch.max()) + 1
        members = torch.arange(num_nodes, device=x.device) if rows is None else rows
        selected, selected_group = x[members], group[members]
        selected_weights = None if weights is None else weights[members]
        primitives = x.new_empty(num_groups, self.num_primitives, self.dim)
        read = x.new_empty(len(members), self.dim)
        for groups, subset, local in _size_buckets(selected_group, num_groups):
            order = torch.argsort(local, stable=True)  # to_dense_batch wants groups sorted
            subset, local = subset[order], local[order]
            dense, mask = to_dense_batch(selected[subset], local, batch_size=len(groups))
            gathered = self._gather(
                dense, mask, None if selected_weights is None else selected_weights[subset]
            )
            primitives[groups] = gathered
            read[subset] = self._read(dense, gathered)[mask]
        nodes = x.index_copy(0, members, read)
        return nodes, primitives[0] if batch is None else primitives

    def _gather(self, dense: Tensor, mask: Tensor, weights: Tensor | None) -> Tensor:
        """Each group's primitives after attending over its nodes, in the dense per-group layout
        [G, M, ...] (M = largest group): batched matrix products over [G, K, M] maps, never
        [N, K, dim] temporaries and never N x N. A group without nodes keeps its primitives.
        Shapes: dense [G, M, dim], mask [G, M], weights [N] (N = mask.sum()) -> [G, K, dim]."""
        num_primitives, heads, head_dim = self.num_primitives, self.heads, self.head_dim
        groups, width = dense.shape[:2]
        query = self.gather.query(self.primitives) / math.sqrt(head_dim)
        key = self.gather.key(dense).view(groups, width, heads, head_dim)
        value = self.gather.value(dense).view(groups, width, heads, head_dim)
        # One additive [G, M] term instead of masked_fill(-inf) + nan_to_num passes over the
        # [G, K, heads, M] map, which dominate the exchange's cost on a CPU.
        lowest = torch.finfo(dense.dtype).min / 4
        additive = torch.zeros_like(mask, dtype=dense.dtype).masked_fill(~mask, lowest)
        if weights is not None:
            weight = dense.new_ones(groups, width)
            weight[mask] = weights.to(dense.dtype)
            # log(tiny) for every node of an all-zero group: a constant shift, so it gathers
            # as if unweighted.
            additive = additive + weight.clamp_min(torch.finfo(dense.dtype).tiny).log()
        logits = torch.einsum(
            "khd,gmhd->gkhm", query.view(num_primitives, heads, head_dim), key
        ) + additive.view(groups, 1, 1, width)
        pooled = torch.einsum("gkhm,gmhd->gkhd", logits.softmax(dim=-1), value)
        update = self.dropout(self.gather.out(pooled.reshape(groups, num_primitives, self.dim)))
        update = update * mask.any(dim=1).view(groups, 1, 1)
        return self.gather_norm(self.primitives + update)

    def _read(self, dense: Tensor, primitives: Tensor) -> Tensor:
        """Nodes updated from their group's primitives. Shapes: [G, M, dim], [G, K, dim] -> [G, M, dim]."""
        num_primitives, heads, head_dim = self.num_primitives, self.heads, self.head_dim
        groups, width = dense.shape[:2]
        query = self.read.query(dense).view(groups, width, heads, head_dim) / math.sqrt(head_dim)
        key = self.read.key(primitives).view(groups, num_primitives, heads, head_dim)
        value = self.read.value(primitives).view(groups, num_primitives, heads, head_dim)
        alpha = torch.einsum("gmhd,gkhd->gmhk", query, key).softmax(dim=-1)
        read = torch.einsum("gmhk,gkhd->gmhd", alpha, value).reshape(groups, width, self.dim)
        return self.read_norm(dense + self.dropout(self.read.out(read)))

    def logits(self, z: Tensor, temperature: float = 0.1) -> Tensor:
        """Cosine similarity to each base primitive over ``temperature``. Shapes: [N, dim] -> [N, K]."""
        return F.normalize(z, dim=-1) @ F.normalize(self.primitives, dim=-1).T / temperature

    def assign(self, z: Tensor, temperature: float = 0.1) -> Tensor:
        """Soft assignments over the K primitives (rows sum to 1). Shapes: [N, dim] -> [N, K]."""
        return self.logits(z, temperature).softmax(dim=-1)


def _size_buckets(group: Tensor, num_groups: int) -> list[tuple[Tensor, Tensor, Tensor]]:
    """Groups in buckets of similar size (within a factor of 2), so that padding each bucket to
    its largest group wastes little however skewed the sizes: one huge neighbourhood never pads
    thousands of small ones. Per bucket: (its groups [G_b], its rows [N_b], their group in 0..G_b-1).
    """
    sizes = torch.bincount(group, minlength=num_groups)
    bucket_of_group = torch.log2(sizes.clamp_min(1).double()).ceil().long()
    buckets = []
    for bucket in torch.unique(bucket_of_group).tolist():
        members = torch.nonzero(bucket_of_group == bucket).flatten()
        local_group = torch.full((num_groups,), -1, dtype=torch.long, device=group.device)
        local_group[members] = torch.arange(len(members), device=group.device)
        rows = torch.nonzero(local_group[group] >= 0).flatten()
        buckets.append((members, rows, local_group[group[rows]]))
    return buckets
