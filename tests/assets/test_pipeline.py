"""The graph and content stages materialised after ingest, checks included, on two schemas."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.assets.materialise import materialise

STAGES = ["raw_tables", "relational_graph", "content_embeddings"]


@pytest.mark.parametrize("dataset", ["synthetic_world", "completejourney"])
def test_stages_materialise_and_every_check_passes(
    dataset: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    folder: Path = request.getfixturevalue(dataset)
    result = materialise(STAGES, folder, tmp_path)
    assert result.success
    evaluations = {
        (e.asset_key.path[-1], e.check_name): e for e in result.get_asset_check_evaluations()
    }
    failed = {key: e.metadata for key, e in evaluations.items() if not e.passed}
    assert not failed
    assert ("relational_graph", "no_edge_crosses_split") in evaluations
    assert ("content_embeddings", "embeddings_finite_and_normalised") in evaluations
    graph = result.output_for_node("relational_graph")
    content = result.output_for_node("content_embeddings")
    assert graph.nodes["products"] == content.tables["products"].rows
    assert content.tables["products"].with_text == content.tables["products"].rows


def test_second_materialisation_embeds_nothing_new(synthetic_world: Path, tmp_path: Path) -> None:
    materialise(STAGES, synthetic_world, tmp_path)
    again = materialise(STAGES, synthetic_world, tmp_path)
    content = again.output_for_node("content_embeddings")
    assert sum(t.text_misses + t.image_misses for t in content.tables.values()) == 0
    assert sum(t.text_hits for t in content.tables.values()) > 0
