"""A heterogeneous GraphSAGE two-tower, in the spirit of RelBench's relational deep learning
baseline (Robinson et al. 2024): every table a node type, every foreign key an edge type, per-type
input encoders, `HeteroConv(SAGEConv)` layers over time-respecting sampled neighbourhoods.

As in RelBench, the graph is the foreign-key graph alone: the derived user -> item `engaged`
shortcut edges (which mix every funnel stage and "not interested") are our model's addition, so
they are left out; a user reaches its items in two hops through the event rows instead.

Two additions make it a competitor rather than a strawman (issue 17: every baseline at its
strongest). Items get an identity (a learned row per item, added to the tower's output, dropped
out in training so the columns and content still have to carry an item): without it the towers
cannot tell apart items with the same columns and text (Complete Journey: 92k products, 19k
texts), and GraphSAGE scored MAP@10 0.0001 there. And the buy-again blend every trained baseline
has (`plus_buy_again`), one fit serving every weight of the grid, as for LightGCN."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.data import HeteroData
from torch_geometric.nn import HeteroConv, SAGEConv
from torch_geometric.typing import EdgeType

from hier_pipeline.evaluation.baselines.interactions import Interactions, PairMatrix
from hier_pipeline.evaluation.baselines.recommender import (
    DEFAULT_BUDGET,
    FitBudget,
    Fits,
    Memo,
    plus_buy_again,
)
from hier_pipeline.graph.build import ENGAGED, RelationalGraph
from hier_pipeline.graph.sampler import SampledSubgraph, SamplerConfig, TemporalNeighborSampler
from hier_pipeline.model.inputs import InputConfig, NodeInputEncoder, node_type_shapes


class HeteroSAGE(nn.Module):
    """Encodes the root seeds of a sampled neighbourhood: per-type inputs (`NodeInputEncoder`:
    numeric, hashed categorical, text and image columns), then `layers` x (HeteroConv of one
    SAGEConv per edge type, summed; ReLU; residual; LayerNorm), then a linear head.

    Shapes: forward(sampled, inputs) -> [B, dim] for the B roots, unit norm.
    """

    def __init__(
        self,
        data: HeteroData,
        content: Mapping[str, Mapping[str, Tensor]],
        hash_buckets: int,
        dim: int,
        layers: int,
        identities: tuple[str, float] | None = None,
    ) -> None:
        """`identities`: (node type, dropout), a learned row per node of that type added to its
        roots' output, zeroed for a node with probability dropout in training."""
        super().__init__()
        self.dim = dim
        self.identities: nn.Embedding | None = None
        self.identity_type, self.identity_dropout = identities or ("", 0.0)
        if identities is not None:
            self.identities = nn.Embedding(int(data[self.identity_type].num_nodes), dim)
            nn.init.zeros_(self.identities.weight)
        self.inputs = NodeInputEncoder(
            node_type_shapes(data, content), InputConfig(dim=dim, hash_buckets=hash_buckets)
        )
        self.convs = nn.ModuleList(
            HeteroConv({edge_type: SAGEConv(dim, dim) for edge_type in data.edge_types})
            for _ in range(layers)
        )
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(layers))
        self.head = nn.Linear(dim, dim)
        # A step reads a few hundred rows of the embedding tables (the item identities, 92k rows
        # on Complete Journey, and the 65k hashed categories): sparse gradients (`optimizers`).
        for table in self.modules():
            if isinstance(table, nn.Embedding):
                table.sparse = True

    def optimizers(self, learning_rate: float) -> list[torch.optim.Optimizer]:
        """`SparseAdam` for the embedding tables, which updates the rows a step read and their
        moments, and Adam for the rest. Dense Adam wrote every row and both moments each step:
        0.11-0.13 s a step against 0.067 on one thread (Complete Journey)."""
        tables = [m.weight for m in self.modules() if isinstance(m, nn.Embedding)]
        in_tables = {id(weight) for weight in tables}
        layers = [p for p in self.parameters() if id(p) not in in_tables]
        return [
            torch.optim.SparseAdam(tables, lr=learning_rate),
            torch.optim.Adam(layers, lr=learning_rate, fused=True),
        ]

    def forward(
        self, sampled: SampledSubgraph, inputs: Mapping[str, Mapping[str, Tensor]]
    ) -> Tensor:
        x = {
            node_type: self.inputs(node_type, inputs[node_type])
            if len(n_id)
            else torch.zeros(0, self.dim)
            for node_type, n_id in sampled.n_id.items()
        }
        edge_index: dict[EdgeType, Tensor] = {
            edge_type: index for edge_type, index in sampled.edge_index.items() if index.numel()
        }
        for conv, norm in zip(self.convs, self.norms, strict=True):
            messages = conv(x, edge_index) if edge_index else {}
            x = {t: norm(h + F.relu(messages[t])) if t in messages else h for t, h in x.items()}
        out = self.head(x[sampled.seed_type][sampled.seed_local])
        if self.identities is not None and sampled.seed_type == self.identity_type:
            seeds = sampled.n_id[sampled.seed_type][sampled.seed_local]
            kept = torch.ones(len(seeds), 1)
            if self.training:
                kept = (torch.rand(len(seeds), 1) >= self.identity_dropout).float()
            out = out + self.identities(seeds) * kept
        return F.normalize(out, dim=-1)


def foreign_key_sampler(
    graph: RelationalGraph, fanouts: tuple[int, ...]
) -> tuple[HeteroData, TemporalNeighborSampler]:
    """The foreign-key graph (no `engaged` shortcuts, module doc) and a sampler of its most recent
    neighbourhoods before each seed's time: deterministic, as a production system would embed."""
    foreign_keys = [t for t in graph.data.edge_types if t[1] not in (ENGAGED, f"rev_{ENGAGED}")]
    data = graph.data.edge_type_subgraph(foreign_keys)
    return data, TemporalNeighborSampler(data, SamplerConfig(fanouts, "recent"))


class GraphSAGERecommender:
    """score(u, i) = <f(u), f(i)> + repeat_weight x sd_u x c_ui, both embedded as of the cutoff
    from their neighbourhoods before it (cold items from their own columns and content alone,
    their identity row untrained: zero), plus the user's own confidence (`plus_buy_again`).

    Training: each step draws `batch_size` interactions with probability proportional to their
    weight (the profile's: a target-heavy profile oversamples the target stage), embeds each user
    and item as of the event's time (the event itself and anything later are invisible to the
    temporal sampler), and minimises the in-batch sampled softmax (other events' items are the
    negatives; copies of the positive item are masked) at `temperature`, with Adam, for the
    `budget`. In-batch negatives are drawn as often as items are positives, so without a
    correction popular items are pushed down in proportion to their popularity; each logit
    subtracts log q(item), the item's sampling probability (Yi et al., RecSys 2019, logQ).
    The embeddings are fitted once per history and setting (`memo`): the repeat weights of a
    grid share them.
    """

    def __init__(
        self,
        graph: RelationalGraph,
        content: Mapping[str, Mapping[str, Tensor]],
        temperature: float = 0.1,
        dim: int = 64,
        layers: int = 2,
        fanouts: tuple[int, ...] = (8, 4),
        budget: FitBudget = DEFAULT_BUDGET,
        batch_size: int = 128,
        learning_rate: float = 3e-3,
        seed: int = 0,
        chunk: int = 1024,
        repeat_weight: float = 0.0,
        identity_dropout: float = 0.5,
        memo: Memo | None = None,
    ) -> None:
        self.metadata, self.content = graph.metadata, content
        self.temperature, self.dim, self.layers = temperature, dim, layers
        self.budget, self.batch_size = budget, batch_size
        self.learning_rate, self.seed, self.chunk = learning_rate, seed, chunk
        self.repeat_weight, self.identity_dropout = repeat_weight, identity_dropout
        self.memo = memo or Memo()
        self.own: PairMatrix | None = None
        self.user_vectors: dict[tuple[int, ...], Tensor] = {}
        # Indexing the graph for the sampler takes seconds on Complete Journey, and a grid builds
        # one recommender per setting and rung: one index serves them all ("recent" draws no
        # random numbers, so sharing it changes no sample).
        self.data, self.sampler = self.memo.get(
            "graphsage_sampler", (graph, fanouts), lambda: foreign_key_sampler(graph, fanouts)
        )
        self.model: HeteroSAGE | None = None
        self.before = 0
        self.items = torch.zeros(0, dim)

    def fit(self, history: Interactions) -> None:
        self.own = history.confidence()
        key = (
            history,
            self.temperature,
            self.dim,
            self.layers,
            self.budget,
            self.batch_size,
            self.learning_rate,
            self.identity_dropout,
            self.seed,
        )
        self.model, self.before, self.items, self.user_vectors = self.memo.get(
            "graphsage", key, lambda: self._trained(history)
        )

    def _trained(
        self, history: Interactions
    ) -> tuple[HeteroSAGE, int, Tensor, dict[tuple[int, ...], Tensor]]:
        """The towers trained on `history` (class doc), the cutoff, every item embedded as of
        it, and an empty cache of users embedded as of it (shared by the fits that share it). A
        longer fit continues a shorter one (`Fits`)."""
        meta = self.metadata
        log_q = (history.popularity() / history.weight.sum()).log()

        def start() -> tuple[HeteroSAGE, list[torch.optim.Optimizer], torch.Generator]:
            torch.manual_seed(self.seed)
            generator = torch.Generator().manual_seed(self.seed)
            model = HeteroSAGE(
                self.data,
                self.content,
                meta.hash_buckets,
                self.dim,
                self.layers,
                (meta.item_type, self.identity_dropout),
            )
            return model, model.optimizers(self.learning_rate), generator

        def step(state: tuple[HeteroSAGE, list[torch.optim.Optimizer], torch.Generator]) -> None:
            self.model, optimizers, generator = state  # `_embed` reads `self.model`
            self.model.train()  # a fit continued was left in eval mode
            event = torch.multinomial(history.weight, self.batch_size, True, generator=generator)
            item, when = history.item[event], history.time[event]
            users = self._embed(meta.user_type, history.user[event], when)
            items = self._embed(meta.item_type, item, when)
            logits = users @ items.T / self.temperature - log_q[item]
            same_item = (item.unsqueeze(1) == item.unsqueeze(0)).fill_diagonal_(False)
            loss = F.cross_entropy(
                logits.masked_fill(same_item, -torch.inf), torch.arange(len(item))
            )
            loss.backward()
            for optimizer in optimizers:
                optimizer.step()
                optimizer.zero_grad()  # no gradients held between steps (`Fits` keeps the fit)

        fits = self.memo.get("graphsage_fits", history.lineage[:1], Fits)
        setting = (self.temperature, self.dim, self.layers, self.batch_size, self.learning_rate)
        budget = self.budget if len(history.user) else replace(self.budget, steps=0)
        key = (history.lineage, *setting, self.identity_dropout, self.seed)
        self.model = model = fits.train(key, budget, start, step)[0]
        model.eval()
        self.before = history.before
        items = self._embed_as_of_cutoff(meta.item_type, torch.arange(history.num_items))
        return model, history.before, items, {}

    def score(self, users: Tensor) -> Tensor:
        key = tuple(users.tolist())
        if key not in self.user_vectors:  # the repeat weights of a grid score the same users
            self.user_vectors[key] = self._embed_as_of_cutoff(self.metadata.user_type, users)
        scores = self.user_vectors[key] @ self.items.T
        if self.own is None:
            return scores
        return plus_buy_again(scores, self.own, users, self.repeat_weight)

    @torch.no_grad()
    def _embed_as_of_cutoff(self, node_type: str, nodes: Tensor) -> Tensor:
        parts = [torch.zeros(0, self.dim)]
        for start in range(0, len(nodes), self.chunk):
            chunk = nodes[start : start + self.chunk]
            parts.append(self._embed(node_type, chunk, torch.full_like(chunk, self.before)))
        return torch.cat(parts)

    def _embed(self, node_type: str, nodes: Tensor, when: Tensor) -> Tensor:
        assert self.model is not None, "fit first"
        sampled = self.sampler.sample(node_type, nodes, when)
        return self.model(sampled, self._inputs(sampled))

    def _inputs(self, sampled: SampledSubgraph) -> dict[str, dict[str, Tensor]]:
        """Each sampled node's columns and content, as `NodeInputEncoder` reads them."""
        inputs = {}
        for node_type, n_id in sampled.n_id.items():
            store = self.data[node_type]
            columns = {"x_num": store.x_num[n_id], "x_cat": store.x_cat[n_id], "n_id": n_id}
            for name, values in self.content.get(node_type, {}).items():
                columns[name] = values[n_id]
            inputs[node_type] = columns
        return inputs
