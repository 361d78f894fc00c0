"""One batch through the incremental path: validate it on top of the batches accepted since the
full load, embed its content, build the graph of their rows (apart from the dataset's), embed the
batch's entities inductively with the current model from the neighbourhoods it draws over both,
and give them bags from the current tree as a full run would (`bags.py`): a new product its code
from its content and embedding (the tree's finest codebook), a user from the items they engaged
with, an advertiser from the events on its products or else from its catalogue.

The entities that the batch's rows point at, the dataset's or an earlier batch's (the users whose
events are in it, yesterday's products that got their first purchases today), are embedded again
too, as of the batch, from every batch since the full load: their neighbourhood changed, and a
user who just engaged with new items should be matched to them. Nothing else is recomputed:
the model, the tree, the dataset's embeddings and tokens stay as they are; what the batch adds is
one file beside the tokens (`interests/arrivals.py`) that `InterestIndex.open` merges, so the
retrieval API answers for the new entities, and with the refreshed ones, at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from hier_pipeline.content.embed import Encoders
from hier_pipeline.content.tables import ContentArtifact
from hier_pipeline.dataset.report import LoadReport
from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.neighbourhood import recent_neighbourhood
from hier_pipeline.graph.sampler import TemporalNeighborSampler
from hier_pipeline.incremental.accumulated import accept_batch, accumulated_batches
from hier_pipeline.incremental.bags import arrival_bags
from hier_pipeline.incremental.extend import BatchRows, batch_rows, extend_content
from hier_pipeline.interests.arrivals import (
    BatchTokens,
    fingerprint,
    load_batch_tokens,
    save_batch_tokens,
)
from hier_pipeline.interests.artifact import Tokens, load_hierarchy
from hier_pipeline.interests.entities import keys_of_rows
from hier_pipeline.interests.tokens import TokenConfig
from hier_pipeline.model.artifact import load_model, load_sampling
from hier_pipeline.model.embeddings import role_types
from hier_pipeline.model.factory import GraphEncoder
from hier_pipeline.model.infer import embed_nodes
from hier_pipeline.model.minibatch import GraphContext


@dataclass(frozen=True)
class Current:
    """What the batch is fitted into: the materialised dataset and the serving model and tree."""

    warehouse: Path  # the dataset's validated tables
    graph: RelationalGraph
    content: dict[str, dict[str, Tensor]]
    model: Path  # a `save_model` file
    tokens: Tokens  # the tree (`tokens.hierarchy`) and the folder the batch files go to
    folder: Path  # where `tokens.pt` lives: batch files go to `folder/batches/`
    content_cache: Path  # the content stage's cache: a text or image seen before is not re-embedded
    temperature: float = TokenConfig.temperature  # of the served bags' weights (not stored)


@dataclass(frozen=True)
class BatchUpdate:
    batch: str
    load: LoadReport
    content: ContentArtifact
    entities: dict[str, int]  # node type -> new entities embedded and tokenised
    refreshed: dict[str, int]  # node type -> the dataset's and earlier batches' embedded again
    caught_up: list[str]  # earlier batches whose entities were not served, served with these
    keys: dict[str, list[str]]  # node type -> the new entities' keys, then those embedded again
    placed_by: dict[str, dict[str, int]]  # node type -> how their bags were placed (`bags.py`)
    path: Path  # the batch's tokens file
    seconds: dict[str, float]  # per step


@dataclass(frozen=True)
class Loaded:
    """What a process that fits batch after batch loads once: the serving model and the content
    encoders (`worker.py`); a one-shot run loads them for its batch alone."""

    model: GraphEncoder
    encoders: Encoders

    @classmethod
    def of(cls, current: Current) -> Loaded:
        """The model (its shapes come from the graph and content, which a batch extends but does
        not reshape); the encoders load on their first need."""
        return cls(load_model(current.model, current.graph, current.content), Encoders())


def update_batch(
    spec: DatasetSpec,
    batch: str,
    current: Current,
    work: Path,
    load: LoadReport | None = None,
    loaded: Loaded | None = None,
) -> BatchUpdate:
    """Run `batch` through the incremental path; `work` holds its content vectors, and the
    state of the batches since the full load (`accumulated.py`), unless `load` is the batch's
    validation (`accept_batch`) done before; `loaded`: the model and encoders, kept warm."""
    return _Run(spec, batch, current, work, loaded or Loaded.of(current)).run(load)


class _Run:
    def __init__(
        self, spec: DatasetSpec, batch: str, current: Current, work: Path, loaded: Loaded
    ) -> None:
        self.spec, self.batch, self.current, self.work = spec, batch, current, work
        self.loaded = loaded
        self.seconds: dict[str, float] = {}
        self.started = time.perf_counter()

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        self.seconds[step] = round(now - self.started, 3)
        self.started = now

    def run(self, load: LoadReport | None) -> BatchUpdate:
        spec, current, work = self.spec, self.current, self.work
        if load is None:
            load = accept_batch(spec, self.batch, current.warehouse, work)
            self.lap("validate")
        database = load.database
        content, embedded = extend_content(
            spec,
            current.content,
            database,
            current.content_cache,
            work / f"{self.batch}_content.pt",
            self.loaded.encoders,
        )
        self.lap("content")
        batch = batch_rows(spec, current.graph, current.warehouse, database, latest=self.batch)
        self.lap("graph")
        roles = role_types(current.graph)
        # Earlier batches not served under the current tree (a full run released another since
        # they came, and did not read them): their entities are embedded again with these.
        earlier = load_batch_tokens(current.folder, current.tokens.hierarchy)
        unserved = accumulated_batches(database) - {self.batch} - {b.batch for b in earlier}
        start = batch.first if unserved else batch.latest
        since = batch.nodes_from(start)
        new = {t: nodes for t, nodes in since.items() if t in roles and len(nodes)}
        referenced = {  # those not among the new ones
            t: nodes[nodes < start[t]] if t in start else nodes
            for t, nodes in batch.referenced(current.graph).items()
        }
        refreshed = {t: referenced[t] for t in roles if len(referenced.get(t, ()))}
        empty = torch.zeros(0, dtype=torch.int64)
        seeds = {
            t: torch.cat([new.get(t, empty), refreshed.get(t, empty)])
            for t in roles
            if t in new or t in refreshed
        }
        vectors = _embed(current, self.loaded.model, batch, content, seeds) if seeds else {}
        self.lap("embed")
        tree = load_hierarchy(current.tokens.hierarchy)
        served = next(iter(current.tokens.bags.values()))  # as many tokens per level as these
        config = TokenConfig(top_k=served.tokens.shape[2], temperature=current.temperature)
        served_items = self._served_items(batch, database, seeds, earlier, tree.levels)
        placed = arrival_bags(
            tree, config, current.graph, batch, seeds, vectors, content, served_items
        )
        keys = {t: _keys(spec, current, batch, database, t, nodes) for t, nodes in seeds.items()}
        path = save_batch_tokens(
            BatchTokens(
                self.batch, fingerprint(current.tokens.hierarchy), keys, vectors, placed.bags
            ),
            current.folder,
        )
        self.lap("tokens")
        return BatchUpdate(
            self.batch,
            load,
            embedded,
            {t: len(v) for t, v in new.items()},
            {t: len(v) for t, v in refreshed.items()},
            sorted(unserved),
            keys,
            placed.placed_by,
            path,
            self.seconds,
        )

    def _served_items(
        self,
        batch: BatchRows,
        database: Path,
        seeds: dict[str, Tensor],
        earlier: list[BatchTokens],
        levels: int,
    ) -> tuple[Tensor, Tensor]:
        """The earlier batches' items that this one does not embed, with the codes those
        batches (`earlier`, served under the current tree) served them: (nodes [M], codes
        [M, levels])."""
        item = self.current.graph.metadata.item_type
        nodes = batch.nodes_from(batch.first).get(item, torch.zeros(0, dtype=torch.int64))
        nodes = nodes[~torch.isin(nodes, seeds.get(item, nodes[:0]))]
        code_of: dict[str, Tensor] = {}
        for served in earlier:  # in batch order: a later batch's code of an item replaces one
            if item in served.keys:
                code_of.update(zip(served.keys[item], served.bags[item].path, strict=True))
        keys = _keys(self.spec, self.current, batch, database, item, nodes) if len(nodes) else []
        found = [i for i, key in enumerate(keys) if key in code_of]
        codes = torch.zeros(len(found), levels, dtype=torch.long)
        for row, i in enumerate(found):
            codes[row] = code_of[keys[i]]
        return nodes[found], codes


def _keys(
    spec: DatasetSpec,
    current: Current,
    batch: BatchRows,
    snapshot: Path,
    node_type: str,
    nodes: Tensor,
) -> list[str]:
    """The primary keys of `nodes`: the dataset's in the warehouse, the batches' in the snapshot."""
    rows = current.graph.data[node_type].row
    first = batch.first.get(node_type, len(rows))
    dataset = nodes < first
    keys = [""] * len(nodes)
    for mask, database, found in (
        (dataset, current.warehouse, lambda n: rows[n]),
        (~dataset, snapshot, lambda n: batch.rows[node_type].row[n - first]),
    ):
        if mask.any():
            at = mask.nonzero().flatten().tolist()
            for i, key in zip(
                at,
                keys_of_rows(database, spec, node_type, found(nodes[mask]).tolist()),
                strict=True,
            ):
                keys[i] = key
    return keys


def _embed(
    current: Current,
    model: GraphEncoder,
    batch: BatchRows,
    content: dict[str, dict[str, Tensor]],
    seeds: dict[str, Tensor],
) -> dict[str, Tensor]:
    """The seeds' embeddings from the current model, as of the end of the extended data, from
    the neighbourhoods it draws (`recent_neighbourhood`: the dataset's graph and the batch's rows
    are read side by side, never concatenated); degrees count every edge of both."""
    graph, rows = current.graph, batch.rows
    times = [graph.data[t].time for t in graph.data.node_types] + [
        rows[t].time for t in rows.node_types
    ]
    as_of = 1 + max(int(time.max()) for time in times if len(time))
    sampling = load_sampling(current.model)  # as the model was trained and is served
    near = recent_neighbourhood(graph.data, rows, seeds, sampling, as_of)
    data = near.graph
    context = GraphContext.of(data, list(data.edge_types), len(graph.metadata.stages), content)
    sampler = TemporalNeighborSampler(data, sampling)
    with torch.inference_mode():
        return {
            t: embed_nodes(model, sampler, data, context, t, near.seeds[t], as_of) for t in seeds
        }
