"""Bias-aware, relation-aware graph-transformer block over a homogeneous view of a sampled batch.

Every node is already embedded to ``dim``; every edge carries its relation id, funnel stage, age
relative to its root seed's time, sampling hop and the degree of its source node. Attention runs
over each destination's incoming edges only (softmax per destination), so cost is O(E), never O(N^2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch_geometric.utils import scatter, softmax

from hier_pipeline.model.edges import EdgeFeatures

SECONDS_PER_MINUTE = 60.0


@dataclass(frozen=True)
class AttentionConfig:
    """Sizes of a :class:`BiasAwareGraphAttention` block and which attention biases it learns.

    Args:
        dim (int): Node embedding size; must be divisible by ``heads``. (default: ``64``)
        heads (int): Attention heads. (default: ``4``)
        num_relations (int): Relation ids are ``0 .. num_relations - 1``. (default: ``1``)
        num_stages (int): Funnel stages are ``0 .. num_stages - 1``; ``-1`` means none.
            (default: ``0``)
        recency_buckets (int): Logarithmic edge-age buckets; ages of ``2 ** (recency_buckets - 1)``
            minutes and more share the last one (20 buckets: about a year). (default: ``20``)
        max_hops (int): Sampling hops are ``0 .. max_hops - 1``. (default: ``3``)
        dropout (float): Dropout on attention weights and in the feed-forward block.
            (default: ``0.0``)
        use_relation_bias, use_stage_bias, use_recency_bias, use_hop_bias,
        use_popularity_correction (bool): Switch each additive bias term on or off (ablations);
            a term that is off has no parameters. (default: ``True``)
        temporal_messages (bool): Add a learned vector of the edge's (funnel stage, age bucket)
            to its key and value, as HGT's relative temporal encoding adds one of its age: what
            a neighbour says then carries when and how deep it was engaged, where the bias
            terms only decide how much it is listened to (issue 18, item 2). (default: ``False``)
    """

    dim: int = 64
    heads: int = 4
    num_relations: int = 1
    num_stages: int = 0
    recency_buckets: int = 20
    max_hops: int = 3
    dropout: float = 0.0
    use_relation_bias: bool = True
    use_stage_bias: bool = True
    use_recency_bias: bool = True
    use_hop_bias: bool = True
    use_popularity_correction: bool = True
    temporal_messages: bool = False

    @classmethod
    def with_biases(cls, enabled: bool) -> AttentionConfig:
        """Every bias term on, or every one off (the "no attention biases" ablation)."""
        return cls(
            use_relation_bias=enabled,
            use_stage_bias=enabled,
            use_recency_bias=enabled,
            use_hop_bias=enabled,
            use_popularity_correction=enabled,
        )

    def __post_init__(self) -> None:
        if self.dim % self.heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by heads ({self.heads})")


def recency_bucket(edge_age: Tensor, buckets: int) -> Tensor:
    """``floor(log2(1 + dt / 60))`` clipped to ``[0, buckets - 1]``: minute-scale resolution for
    fresh edges, coarser with age. Negative ages count as zero.

    Shapes: ``edge_age`` [E] (seconds, float) -> [E] (int64).
    """
    minutes = edge_age.float().clamp_min(0.0) / SECONDS_PER_MINUTE
    return torch.log2(1.0 + minutes).floor().clamp_max(buckets - 1).long()


def _bias_table(rows: int, width: int) -> nn.Embedding:
    table = nn.Embedding(rows, width)
    nn.init.normal_(table.weight, std=0.02)
    return table


def _popularity_mlp(heads: int) -> nn.Sequential:
    last = nn.Linear(16, heads)
    # Near zero, not zero: the correction starts neutral but its first layer still gets gradients.
    nn.init.normal_(last.weight, std=0.01)
    nn.init.zeros_(last.bias)
    return nn.Sequential(nn.Linear(1, 16), nn.GELU(), last)


class BiasAwareGraphAttention(nn.Module):
    r"""A pre-norm transformer block whose attention runs over each node's incoming edges, with
    relation-aware keys and values and additive biases for relation, funnel stage, recency, hop and
    source popularity.

    For edge :math:`j \to i` with relation :math:`r`, head :math:`h` (:math:`d_h = dim / heads`),
    on :math:`\tilde x = \mathrm{LN}(x)`:

    .. math::
        e_{ij}^h = \frac{q_i^h \cdot (k_j^h + r_k[r]^h)}{\sqrt{d_h}} + b_{rel}[r, h]
            + b_{stage}[s + 1, h] + b_{recency}[\mathrm{bucket}(\Delta t), h] + b_{hop}[\mathrm{hop}, h]
            + \mathrm{pop}(\log(1 + \deg_j))_h

        \alpha_{ij}^h = \mathrm{softmax}_{j \in \mathcal{N}(i)}(e_{ij}^h), \quad
        x'_i = x_i + W_o \big\Vert_h \textstyle\sum_j \alpha_{ij}^h (v_j^h + r_v[r]^h), \quad
        x''_i = x'_i + \mathrm{FFN}(\mathrm{LN}(x'_i))

    with :math:`q, k, v` linear in :math:`\tilde x`, :math:`W_o` without bias (a node with no
    incoming edge leaves the attention step unchanged), FFN ``dim -> 4 dim -> dim`` with GELU, and
    ``pop`` an MLP ``1 -> 16 -> heads`` initialised near zero that lets the model discount heavy
    (high-exposure) source nodes. The relation-aware :math:`r_k, r_v` are always on; each bias term
    can be switched off in ``config``. With ``temporal_messages``, :math:`k_j` and :math:`v_j` also
    get :math:`t_k[s, \mathrm{bucket}(\Delta t)]` and :math:`t_v[\cdot]` added.

    Args:
        config (AttentionConfig): Sizes and bias switches.

    Shapes:
        - **input:** node features ``x`` [N, dim] and :class:`EdgeFeatures` (``index`` row 0 is
          the source j, row 1 the destination i)
        - **output:** node features [N, dim]; :meth:`attention_weights` [E, heads]
    """

    def __init__(self, config: AttentionConfig) -> None:
        super().__init__()
        self.config = config
        dim, heads = config.dim, config.heads
        self.head_dim = dim // heads
        self.attention_norm = nn.LayerNorm(dim)
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim, bias=False)
        self.relation_key = _bias_table(config.num_relations, dim)
        self.relation_value = _bias_table(config.num_relations, dim)
        self.relation_bias = (
            _bias_table(config.num_relations, heads) if config.use_relation_bias else None
        )
        self.stage_bias = (
            _bias_table(config.num_stages + 1, heads) if config.use_stage_bias else None
        )
        self.recency_bias = (
            _bias_table(config.recency_buckets, heads) if config.use_recency_bias else None
        )
        self.hop_bias = _bias_table(config.max_hops, heads) if config.use_hop_bias else None
        self.popularity = _popularity_mlp(heads) if config.use_popularity_correction else None
        events = (config.num_stages + 1) * config.recency_buckets
        self.event_key = _bias_table(events, dim) if config.temporal_messages else None
        self.event_value = _bias_table(events, dim) if config.temporal_messages else None
        self.attention_dropout = nn.Dropout(config.dropout)
        self.feed_forward_norm = nn.LayerNorm(dim)
        self.feed_forward_net = nn.Sequential(
            nn.Linear(dim, 4 * dim),
            nn.GELU(),
            nn.Dropout(config.dropout),
            nn.Linear(4 * dim, dim),
            nn.Dropout(config.dropout),
        )

    def forward(self, x: Tensor, edges: EdgeFeatures, rows: Tensor | None = None) -> Tensor:
        """The full block: attention step then feed-forward step. Shapes: see the class.

        ``rows`` (indices, [R]) are the only nodes whose output is needed, ``edges`` must hold all
        their incoming edges, and every other node comes back unchanged: deeper layers skip the
        nodes whose output can no longer reach a root (PyG's trim-to-layer, tighter).
        """
        return self.feed_forward(self.attend(x, edges, rows), rows)

    def attend(self, x: Tensor, edges: EdgeFeatures, rows: Tensor | None = None) -> Tensor:
        """The attention step with its residual, ``x'`` above. Shapes: as ``forward``."""
        alpha, values = self._attention(x, edges)
        messages = self.attention_dropout(alpha).unsqueeze(-1) * values
        aggregated = scatter(messages, edges.destination, dim=0, dim_size=x.size(0), reduce="sum")
        aggregated = aggregated.reshape(x.size(0), self.config.dim)
        if rows is None:
            return x + self.out(aggregated)
        return x.index_copy(0, rows, x[rows] + self.out(aggregated[rows]))

    def feed_forward(self, x: Tensor, rows: Tensor | None = None) -> Tensor:
        """The feed-forward step with its residual, ``x''`` above, on ``rows`` only if given.
        Shapes: [N, dim] -> [N, dim]."""
        if rows is None:
            return x + self.feed_forward_net(self.feed_forward_norm(x))
        selected = x[rows]
        return x.index_copy(
            0, rows, selected + self.feed_forward_net(self.feed_forward_norm(selected))
        )

    def attention_weights(
        self,
        x: Tensor,
        edges: EdgeFeatures,
    ) -> Tensor:
        """``alpha`` per edge and head (each destination's incoming weights sum to 1), without
        dropout. Shapes: inputs as ``forward`` -> [E, heads]."""
        return self._attention(x, edges)[0]

    def edge_bias(self, edges: EdgeFeatures) -> Tensor:
        """The sum of the switched-on additive bias terms. Shapes: -> [E, heads]."""
        weight = self.out.weight
        bias = torch.zeros(len(edges), self.config.heads, dtype=weight.dtype, device=weight.device)
        if self.relation_bias is not None:
            bias = bias + self.relation_bias(edges.relation)
        if self.stage_bias is not None:
            bias = bias + self.stage_bias(edges.stage + 1)
        if self.recency_bias is not None:
            bias = bias + self.recency_bias(recency_bucket(edges.age, self.config.recency_buckets))
        if self.hop_bias is not None:
            bias = bias + self.hop_bias(edges.hop)
        if self.popularity is not None:
            log_degree = edges.source_log_degree.to(weight.dtype).clamp_min(0.0).unsqueeze(-1)
            bias = bias + self.popularity(log_degree)
        return bias

    def _attention(
        self,
        x: Tensor,
        edges: EdgeFeatures,
    ) -> tuple[Tensor, Tensor]:
        """Attention weights and relation-aware values per edge. Shapes: [E, H], [E, H, d_h]."""
        num_nodes, num_edges = x.size(0), len(edges)
        heads, head_dim = self.config.heads, self.head_dim
        normed = self.attention_norm(x)  # projected per edge end: O(E) work, O(N) only for norms
        query = self.query(normed[edges.destination]).view(num_edges, heads, head_dim)
        source = normed[edges.source]
        key = self.key(source) + self.relation_key(edges.relation)
        value = self.value(source) + self.relation_value(edges.relation)
        if self.event_key is not None and self.event_value is not None:
            age = recency_bucket(edges.age, self.config.recency_buckets)
            event = (edges.stage + 1) * self.config.recency_buckets + age
            key, value = key + self.event_key(event), value + self.event_value(event)
        logits = (query * key.view(num_edges, heads, head_dim)).sum(-1) / math.sqrt(head_dim)
        logits = logits + self.edge_bias(edges)
        alpha = softmax(logits, edges.destination, num_nodes=num_nodes)
        return alpha, value.view(num_edges, heads, head_dim)
