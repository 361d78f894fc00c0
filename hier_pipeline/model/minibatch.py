"""Turn sampled temporal neighbourhoods into the flat tensors the interest model consumes.

The model runs on a homogeneous view: every node of every type is one row (its type kept as an
index), every edge carries its relation id, funnel stage, age relative to its root seed's time,
hop and the source node's log-degree (`EdgeFeatures`), the inputs of the bias-aware attention.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor
from torch_geometric.data import HeteroData
from torch_geometric.data.storage import EdgeStorage
from torch_geometric.typing import EdgeType

from hier_pipeline.graph.sampler import SampledSubgraph
from hier_pipeline.model.edges import EdgeFeatures

NO_STAGE = -1


@dataclass
class ModelBatch:
    """Shapes: per node type dicts of [N_t, ...]; flat edge tensors [E]; ``seed_index`` [B]."""

    node_types: list[str]  # in model order; offsets index into the flat node list
    offsets: dict[str, tuple[int, int]]
    features: dict[str, dict[str, Tensor]]  # per type: x_num, x_cat, n_id (global), content...
    root: Tensor  # [N] root seed of every node (its sampled neighbourhood)
    hop: Tensor  # [N] sampling hop at which each node was first reached; within a type, sorted
    # Flat node indices; stage is num_stages for explicit negative feedback, -1 for neither;
    # source degree is counted in the sampled-from graph.
    edges: EdgeFeatures
    seed_index: Tensor  # [B] flat indices of the root seeds, in seed order

    def to(self, device: torch.device) -> ModelBatch:
        """The same batch with every tensor on `device` (itself when they are there already)."""
        return replace(
            self,
            features={
                t: {name: v.to(device) for name, v in values.items()}
                for t, values in self.features.items()
            },
            root=self.root.to(device),
            hop=self.hop.to(device),
            edges=self.edges.to(device),
            seed_index=self.seed_index.to(device),
        )


@dataclass
class GraphContext:
    """Per-graph lookups a batch needs: node order, relation ids, degrees, global ids, content."""

    node_types: list[str]
    relations: list[EdgeType]
    num_stages: int
    log_degree: dict[str, Tensor]
    global_id: dict[str, Tensor]
    content: dict[str, dict[str, Tensor]]

    @staticmethod
    def of(
        data: HeteroData,
        relations: list[EdgeType],
        num_stages: int,
        content: dict[str, dict[str, Tensor]],
        before: int | None = None,
    ) -> GraphContext:
        """Degrees count only edges before `before` when given: a model judged as of t1 must not
        see later popularity. A graph cut out of a larger one (`recent_neighbourhood`) carries
        its nodes' `degree` in that graph; its own edges would undercount them."""
        degree = _stored_degree(data, before)
        if degree is None:
            degree = {t: torch.zeros(int(data[t].num_nodes)) for t in data.node_types}
            for edge_type in data.edge_types:
                store = data[edge_type]
                source = store.edge_index[0]
                if before is not None:
                    source = source[store.edge_time < before]
                degree[edge_type[0]].index_add_(0, source, torch.ones(source.numel()))
        global_id = {
            t: data[t].global_id if "global_id" in data[t] else torch.arange(int(data[t].num_nodes))
            for t in data.node_types
        }
        return GraphContext(
            node_types=list(data.node_types),
            relations=relations,
            num_stages=num_stages,
            log_degree={t: torch.log1p(d) for t, d in degree.items()},
            global_id=global_id,
            content=content,
        )


def _stored_degree(data: HeteroData, before: int | None) -> dict[str, Tensor] | None:
    if not all("degree" in data[t] for t in data.node_types):
        return None
    if before is not None:
        raise ValueError("stored degrees count every edge; they cannot be limited to `before`")
    return {t: data[t].degree for t in data.node_types}


def make_batch(sampled: SampledSubgraph, data: HeteroData, context: GraphContext) -> ModelBatch:
    """Gather features by node id and flatten a sampled heterogeneous neighbourhood."""
    offsets, features, roots, hops, start = {}, {}, [], [], 0
    for node_type in context.node_types:
        n_id = sampled.n_id[node_type]
        offsets[node_type] = (start, start + len(n_id))
        start += len(n_id)
        store = data[node_type]
        global_id = context.global_id[node_type][n_id]
        features[node_type] = {
            "x_num": store.x_num[n_id],
            "x_cat": store.x_cat[n_id],
            "n_id": global_id,
        }
        for name, values in context.content.get(node_type, {}).items():
            features[node_type][name] = values[global_id]
        roots.append(sampled.root[node_type])
        hops.append(sampled.hop[node_type])
    relation_id = {edge_type: i for i, edge_type in enumerate(context.relations)}
    parts: dict[str, list[Tensor]] = {
        k: [] for k in ("index", "relation", "stage", "age", "hop", "degree")
    }
    for edge_type, local in sampled.edge_index.items():
        if local.numel() == 0:
            continue
        src, _, dst = edge_type
        e_id = sampled.e_id[edge_type]
        destination_root = sampled.root[dst][local[1]]
        store = data[edge_type]
        parts["index"].append(torch.stack([local[0] + offsets[src][0], local[1] + offsets[dst][0]]))
        parts["relation"].append(torch.full_like(e_id, relation_id[edge_type]))
        parts["stage"].append(_edge_stage(store, e_id, context.num_stages))
        age = sampled.seed_time[destination_root].double() - sampled.edge_time[edge_type].double()
        parts["age"].append(age.clamp(min=0).float())
        parts["hop"].append(sampled.hop[dst][local[1]])
        parts["degree"].append(context.log_degree[src][sampled.n_id[src][local[0]]])
    seed_start = offsets[sampled.seed_type][0]
    return ModelBatch(
        node_types=context.node_types,
        offsets=offsets,
        features=features,
        root=torch.cat(roots),
        hop=torch.cat(hops),
        edges=EdgeFeatures(
            index=torch.cat(parts["index"], dim=1),
            relation=torch.cat(parts["relation"]),
            stage=torch.cat(parts["stage"]),
            age=torch.cat(parts["age"]),
            hop=torch.cat(parts["hop"]),
            source_log_degree=torch.cat(parts["degree"]),
        )
        if parts["index"]
        else EdgeFeatures.empty(),
        seed_index=seed_start + sampled.seed_local,
    )


def _edge_stage(store: EdgeStorage, e_id: Tensor, num_stages: int) -> Tensor:
    """Funnel stage of engaged edges; explicit "not interested" gets its own id (num_stages)."""
    if "edge_stage" not in store:
        return torch.full_like(e_id, NO_STAGE)
    stage = store.edge_stage[e_id]
    return torch.where(store.edge_negative[e_id] & (stage == NO_STAGE), num_stages, stage)
