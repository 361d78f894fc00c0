"""Users with no interaction before t2, evaluated rather than dropped. Our model embeds them
inductively from what they have as of t2 (their own row's features and whatever rows reference
them, no events); a baseline has nothing to go on and serves the popularity list (with the
popularity setting tuned for the warm users), as a practitioner would."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions
from hier_pipeline.evaluation.baselines.protocol import users_by_history
from hier_pipeline.evaluation.baselines.recommender import Recommender
from hier_pipeline.evaluation.baselines.tuning import fit_and_rank
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.ranking.window import EvaluationWindow

POPULARITY = "popularity"


def cold_user_rankings(
    graph: RelationalGraph,
    start: int,
    end: int,
    ours: Mapping[str, Callable[[EvaluationWindow], Recommender]],
    popularity: Recommender,
    depth: int,
    max_users: int,
    seed: int,
) -> tuple[EvaluationWindow, dict[str, Tensor]]:
    """(the cold users' window on [start, end), model -> its ranking of them): each of `ours`
    built for these users, and `popularity` (the tuned baseline, fitted here) under
    `POPULARITY`, for every baseline. Shapes: -> [U, depth] each."""
    history = Interactions.from_graph(graph, start)
    window = users_by_history(graph, history, start, end, max_users, seed, warm=False)
    builders = {**ours, POPULARITY: lambda _: popularity}
    return window, {
        name: fit_and_rank(build(window), history, window, depth, exclude_seen=False)
        for name, build in builders.items()
    }
