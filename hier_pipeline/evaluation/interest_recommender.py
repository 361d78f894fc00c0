"""Our trained model scored like every baseline (`Recommender`): users and items embedded as of the
start of the evaluated window (inductively: cold items from their content and whatever
neighbourhood they have), ranked by inner product, or by the interest tokens they share.
Training happened before; `fit` has nothing left to learn."""

from __future__ import annotations

import copy
from collections.abc import Mapping

import torch
from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.graph.sampler import SamplerConfig, TemporalNeighborSampler
from hier_pipeline.interests.engaged import engaged_tokens
from hier_pipeline.interests.events import FunnelEvents
from hier_pipeline.interests.hierarchy import InterestHierarchy
from hier_pipeline.interests.prior import engagement_mass, token_shares
from hier_pipeline.interests.tokens import InvertedIndex, TokenConfig, code_bags
from hier_pipeline.model.factory import GraphEncoder
from hier_pipeline.model.infer import embed_nodes
from hier_pipeline.model.minibatch import GraphContext
from hier_pipeline.model.network import InterestModel
from hier_pipeline.ranking.metrics import PairScores


class Frozen:
    """A recommender that was trained before the evaluation: fitting is a no-op. Rows of its
    scores are looked up by user node id; only the users it was built for can be scored."""

    def __init__(self, users: Tensor) -> None:
        self.row = torch.full((int(users.max()) + 1 if len(users) else 0,), -1, dtype=torch.long)
        self.row[users] = torch.arange(len(users))
        self.size = len(users)

    def fit(self, history: Interactions) -> None:
        """Nothing to fit: the model was trained on events before t1 and is frozen."""

    def put(self, scores: Tensor, rows: Tensor, pairs: PairScores, accumulate: bool) -> None:
        """Write (or add) the `pairs` of `rows` into `scores` ([len(rows), I]) in place."""
        position = torch.full((self.size,), -1, dtype=torch.long)
        position[rows] = torch.arange(len(rows))
        at = position[pairs.rows]
        keep = at >= 0
        scores.index_put_((at[keep], pairs.items[keep]), pairs.values[keep], accumulate=accumulate)

    def rows(self, users: Tensor) -> Tensor:
        known = users < len(self.row)
        rows = torch.full_like(users, -1)
        rows[known] = self.row[users[known]]
        if (rows < 0).any():
            raise KeyError(f"users {users[rows < 0].tolist()[:5]} were not embedded")
        return rows


class EmbeddingRecommender(Frozen):
    """score(u, i) = <user_vectors[u], item_vectors[i]> (+ the model's personal-history term of
    the pair, `pairs`, where it has one): the model's own full-ranking score.

    Shapes: user_vectors [U, dim] for the node ids `users` [U]; item_vectors [I, dim]; pairs
    rows index `users`.
    """

    def __init__(
        self,
        users: Tensor,
        user_vectors: Tensor,
        item_vectors: Tensor,
        pairs: PairScores | None = None,
    ) -> None:
        super().__init__(users)
        self.user_vectors, self.item_vectors, self.pairs = user_vectors, item_vectors, pairs

    def score(self, users: Tensor) -> Tensor:
        rows = self.rows(users)
        scores = self.user_vectors[rows] @ self.item_vectors.T
        if self.pairs is not None:
            self.put(scores, rows, self.pairs, accumulate=True)
        return scores


class RankedRecommender(Frozen):
    """score(u, i) = the second-stage ranker's P(relevant) of the pair where it is one of u's
    candidates (`InterestRanker`); every other item below all of them, by inner product where
    there are vectors (else tied, so ordered by popularity).

    Shapes: user_vectors [U, dim] for `users` [U] or None; item_vectors [I, dim] or None; pairs
    rows index `users`.
    """

    def __init__(
        self,
        users: Tensor,
        pairs: PairScores,
        num_items: int,
        vectors: tuple[Tensor, Tensor] | None = None,
    ) -> None:
        super().__init__(users)
        self.pairs, self.num_items, self.vectors = pairs, num_items, vectors

    def score(self, users: Tensor) -> Tensor:
        rows = self.rows(users)
        if self.vectors is None:
            scores = torch.full((len(rows), self.num_items), -1.0)
        else:  # inner products lie in [-1, 1], probabilities in [0, 1]
            scores = self.vectors[0][rows] @ self.vectors[1].T - 2.0
        self.put(scores, rows, self.pairs, accumulate=False)
        return scores


class TokenRecommender(Frozen):
    """score(u, i) = the weighted tokens u's and i's Bag-of-Meaning share (`InvertedIndex`), each
    times the item's share of its token's engagement (`prior.py`; with `item_shares`): retrieval
    by interest tokens alone. An item's bag is its code in the tree (grown on these items); a
    user's comes from their `events` before `as_of` (by embedding without any), as do the items'
    shares. Without `item_shares`, every item of a token scores alike: the overlap the ranker
    reads next to popularity features of its own (`ours.py`).

    Shapes: user_vectors [U, dim] unit norm for `users` [U]; `events` over all users.
    """

    def __init__(
        self,
        users: Tensor,
        user_vectors: Tensor,
        tree: InterestHierarchy,
        config: TokenConfig,
        events: FunnelEvents,
        as_of: int,
        item_shares: bool = True,
    ) -> None:
        super().__init__(users)
        mine = events.of_users(users)
        self.bags = engaged_tokens(user_vectors, mine, tree.members, tree, config, as_of)
        prior = None
        if item_shares:
            mass = engagement_mass(events, len(tree.members), as_of, config.half_life_days)
            prior = token_shares(tree.members, mass)
        self.index = InvertedIndex(code_bags(tree.members, config.top_k), len(tree.parent), prior)
        self.num_items = len(tree.members)

    def score(self, users: Tensor) -> Tensor:
        rows, bags = self.rows(users).tolist(), self.bags
        scores = [self.index.scores(bags.tokens[r], bags.weights[r]).float() for r in rows]
        return torch.stack(scores) if scores else torch.zeros(0, self.num_items)


class AsOf:
    """Embeds nodes of a graph from their neighbourhoods strictly before `as_of`, with degrees
    counted before `as_of` too; the sampler and context are built once for every call."""

    def __init__(
        self,
        model: GraphEncoder,
        graph: RelationalGraph,
        content: Mapping[str, Mapping[str, Tensor]],
        sampling: SamplerConfig,
        as_of: int,
    ) -> None:
        data, meta = graph.data, graph.metadata
        self.model, self.data, self.as_of = model, data, as_of
        self.sampler = TemporalNeighborSampler(data, sampling.as_served())
        self.context = GraphContext.of(
            data, list(data.edge_types), len(meta.stages), _plain(content), before=as_of
        )

    def for_model(self, model: GraphEncoder) -> AsOf:
        """The same sampler and context (the graph's, as of the same time: they hold an index of
        every edge, gigabytes on a real database) for another model."""
        other = copy.copy(self)
        other.model = model
        return other

    def __call__(self, node_type: str, nodes: Tensor) -> Tensor:
        """Shapes: nodes [N] -> [N, dim]."""
        return embed_nodes(
            self.model, self.sampler, self.data, self.context, node_type, nodes, self.as_of
        )


@torch.inference_mode()
def content_item_vectors(
    model: GraphEncoder, graph: RelationalGraph, content: Mapping[str, Mapping[str, Tensor]]
) -> Tensor:
    """Every item from its content view alone (text, image; no graph, no id): how the model
    places a product nobody has engaged with. Shapes: -> [I, dim]."""
    if not isinstance(model, InterestModel):
        raise TypeError(f"{type(model).__name__} has no content view")
    item_type = graph.metadata.item_type
    store = graph.data[item_type]
    features = {
        "x_num": store.x_num,
        "x_cat": store.x_cat,
        "n_id": torch.arange(int(store.num_nodes)),
        **content.get(item_type, {}),
    }
    was_training = model.training
    model.eval()
    vectors = model.content_embedding(item_type, features)
    model.train(was_training)
    return vectors


def _plain(content: Mapping[str, Mapping[str, Tensor]]) -> dict[str, dict[str, Tensor]]:
    return {node_type: dict(tables) for node_type, tables in content.items()}
