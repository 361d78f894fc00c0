"""Relational paths: found in the schema, scored as a walk over the edges one by one would."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from hier_pipeline.graph.build import NEVER, RelationalGraph
from hier_pipeline.ranker.paths import PathScores, SchemaPath, schema_paths

HALF_LIFE_DAYS = 10.0


def _graph(dataset: Path, work: Path) -> RelationalGraph:
    from hier_pipeline.pipeline.prepare import prepare

    return prepare(dataset, work, work / "cache").graph


def _weight(graph: RelationalGraph, node_type: str, node: int, as_of: int) -> float:
    if node_type == graph.metadata.item_type:
        return 1.0
    time = int(graph.data[node_type].time[node])
    if time == NEVER:
        return 1.0
    if time >= as_of:
        return 0.0
    return 2.0 ** (-(as_of - time) / 86_400.0 / HALF_LIFE_DAYS)


def _walked(graph: RelationalGraph, path: SchemaPath, user: int, as_of: int) -> dict[int, float]:
    """Item -> the summed weight products of the path's walks from `user`, edge by edge."""
    frontier = {user: 1.0}
    for edge in path.edges:
        reached: defaultdict[int, float] = defaultdict(float)
        for source, target in graph.data[edge].edge_index.t().tolist():
            if source in frontier:
                reached[target] += frontier[source] * _weight(graph, edge[2], target, as_of)
        frontier = reached
    return frontier


def _check_against_walks(graph: RelationalGraph, path: SchemaPath, as_of: int) -> int:
    """Asserts the path's scores of a few users equal the walks'; returns the pairs reached."""
    users = torch.arange(min(6, int(graph.data[graph.metadata.user_type].num_nodes)))
    scores = PathScores(graph, path, users, as_of, HALF_LIFE_DAYS)(torch.arange(len(users)))
    expected = torch.zeros_like(scores)
    for row, user in enumerate(users.tolist()):
        for item, weight in _walked(graph, path, user, as_of).items():
            expected[row, item] = math.log1p(weight)
    torch.testing.assert_close(scores, expected, rtol=1e-5, atol=1e-6)
    return int((expected > 0).sum())


def test_the_synthetic_worlds_path_runs_through_its_campaigns(synthetic_pipeline: tuple) -> None:
    graph = synthetic_pipeline[0]
    paths = schema_paths(graph)
    # users -> their events -> the events' campaigns -> their advertisers -> those advertisers'
    # products; users -> events -> products (and -> feedback -> products) are the events
    # themselves, which the counts read, so they are no path
    assert [path.name for path in paths] == ["path:events>campaigns>advertisers"]
    times = graph.data["events"].time
    as_of = int(times.float().quantile(0.5))
    assert _check_against_walks(graph, paths[0], as_of) > 0


def test_a_path_sees_nothing_from_its_scoring_time_on(synthetic_pipeline: tuple) -> None:
    graph = synthetic_pipeline[0]
    path = schema_paths(graph)[0]
    first_event = int(graph.data["events"].time.min())
    users = torch.arange(10)
    before = PathScores(graph, path, users, first_event, HALF_LIFE_DAYS)(torch.arange(10))
    assert not before.any()  # no event yet: no walk from any user
    later = int(graph.data["events"].time.max()) + 1
    assert PathScores(graph, path, users, later, HALF_LIFE_DAYS)(torch.arange(10)).any()


def test_complete_journeys_coupons_link_households_to_products(
    completejourney: Path, tmp_path: Path
) -> None:
    graph = _graph(completejourney, tmp_path)
    paths = {path.name: path for path in schema_paths(graph)}
    assert "path:campaign_targets>campaigns>coupons" in paths
    assert not any(name.startswith("path:transactions>products") for name in paths)
    times = graph.data["transactions"].time
    as_of = int(np.quantile(times.numpy(), 0.9))
    reached = _check_against_walks(graph, paths["path:campaign_targets>campaigns>coupons"], as_of)
    assert reached > 0


def test_paths_are_at_most_the_cap_and_shortest_first(
    completejourney: Path, tmp_path: Path
) -> None:
    from hier_pipeline.ranker.paths import MAX_PATHS

    paths = schema_paths(_graph(completejourney, tmp_path))
    hops = [len(path.edges) for path in paths]
    assert 0 < len(paths) <= MAX_PATHS and hops == sorted(hops)
    assert len({path.name for path in paths}) == len(paths)


@pytest.mark.parametrize("hops", [1, 2])
def test_a_short_hop_limit_finds_no_path_in_the_synthetic_world(
    synthetic_pipeline: tuple, hops: int
) -> None:
    assert schema_paths(synthetic_pipeline[0], max_hops=hops) == []
