"""Every blocking check after ingest, seen failing: each runs in a real Dagster materialisation on
crafted bad data (and passes on the same data made good), so none is a check that cannot fail.
The ingest checks fail on tampered tables in tests/dataset/test_quality.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pandas as pd
import pytest
import torch

from assets.content import content_embedding_checks
from assets.graph import relational_graph_checks
from assets.interests import interest_hierarchy_checks, interest_token_checks
from assets.model import entity_embedding_checks, interest_model_checks
from hier_pipeline.content.tables import ContentArtifact
from hier_pipeline.dataset import LoadReport, load_dataset, parse_dataset
from hier_pipeline.graph import GraphArtifact, build_graph, default_split, save_graph
from hier_pipeline.interests.artifact import (
    HierarchyArtifact,
    Tokens,
    save_hierarchy,
    save_tokens,
)
from hier_pipeline.interests.hierarchy import InterestHierarchy, token_ids
from hier_pipeline.interests.supergraph import SuperGraph
from hier_pipeline.interests.tokens import NO_TOKEN, TokenBags
from hier_pipeline.model.artifact import ModelArtifact
from hier_pipeline.model.embeddings import EmbeddingArtifact
from resources import DatasetResource
from tests.builders import TINY_FILES, write_dataset
from tests.interests.conftest import HandedOver


def run_checks(
    checks: dg.AssetChecksDefinition, upstream: dict[str, Any], **resources: Any
) -> dict[str, dg.AssetCheckEvaluation]:
    """Only `checks`, on `upstream` handed over as the assets they read."""
    result = dg.materialize(
        [checks, *(dg.AssetSpec(name) for name in upstream)],
        selection=dg.AssetSelection.all_asset_checks(),
        resources={
            **resources,
            "io_manager": dg.IOManagerDefinition.hardcoded_io_manager(HandedOver(dict(upstream))),
        },
        instance=dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert result.success == all(
        e.passed or e.severity != dg.AssetCheckSeverity.ERROR for e in evaluations.values()
    )
    return evaluations


def assert_blocks(evaluations: dict[str, dg.AssetCheckEvaluation], name: str) -> None:
    assert not evaluations[name].passed, evaluations[name].metadata
    assert evaluations[name].severity == dg.AssetCheckSeverity.ERROR


def _model(first: float, last: float) -> ModelArtifact:
    """One epoch's history: the loss of its first and last quarter of steps."""
    history = [{"loss/total": 3.0, "loss/first_steps": first, "loss/last_steps": last}]
    return ModelArtifact(
        Path("model.pt"), 0, {"val/map@10": 0.2}, history, {"popularity/map@10": 0.1}
    )


def test_training_loss_decreased_judges_a_single_epoch() -> None:
    assert run_checks(interest_model_checks, {"interest_model": _model(4.0, 2.0)})[
        "training_loss_decreased"
    ].passed
    for first, last in ((4.0, 4.5), (4.0, 4.0)):  # rose; one step, so nothing fell
        evaluations = run_checks(interest_model_checks, {"interest_model": _model(first, last)})
        assert_blocks(evaluations, "training_loss_decreased")


def _unit(rows: int, dim: int = 4) -> torch.Tensor:
    return torch.nn.functional.normalize(
        torch.randn(rows, dim, generator=torch.Generator().manual_seed(0)), dim=1
    )


def test_no_nan_fails_on_a_nan_and_on_a_vector_off_the_sphere(tmp_path: Path) -> None:
    vectors = _unit(5)
    good = {"embeddings": {"users": vectors}, "primitives": _unit(3)}
    torch.save(good, tmp_path / "good.pt")
    bad = vectors.clone()
    bad[1, 0], bad[3] = float("nan"), bad[3] * 2
    torch.save({**good, "embeddings": {"users": bad}}, tmp_path / "bad.pt")
    artifact = EmbeddingArtifact(tmp_path / "good.pt", 0, {"users": 5})
    assert run_checks(entity_embedding_checks, {"entity_embeddings": artifact})["no_nan"].passed
    evaluations = run_checks(
        entity_embedding_checks, {"entity_embeddings": replace(artifact, path=tmp_path / "bad.pt")}
    )
    assert_blocks(evaluations, "no_nan")
    assert evaluations["no_nan"].metadata["bad_rows"].value == {"users": 2}


def test_content_embeddings_fail_when_not_finite_normalised_or_zero_where_absent(
    tmp_path: Path,
) -> None:
    text, present = _unit(4), torch.tensor([True, True, True, False])
    text[3] = 0.0
    torch.save({"products": {"text": text, "has_text": present}}, tmp_path / "good.pt")
    bad = text.clone()
    bad[0, 0], bad[3] = float("inf"), _unit(1)[0]  # a real vector where none is present
    torch.save({"products": {"text": bad, "has_text": present}}, tmp_path / "bad.pt")
    name = "embeddings_finite_and_normalised"
    good = run_checks(
        content_embedding_checks, {"content_embeddings": ContentArtifact(tmp_path / "good.pt")}
    )
    assert good[name].passed
    evaluations = run_checks(
        content_embedding_checks, {"content_embeddings": ContentArtifact(tmp_path / "bad.pt")}
    )
    assert_blocks(evaluations, name)
    assert evaluations[name].metadata["bad_rows"].value == {"products/text": 2}


def test_graph_checks_fail_when_the_graph_and_duckdb_disagree(tmp_path: Path) -> None:
    purchases = "2,12,purchase,2024-02-02 11:30:00\n1,11,purchase,2024-02-04 09:00:00\n"
    events = TINY_FILES["events.csv"] + purchases  # enough target events to split in time
    spec = parse_dataset(write_dataset(tmp_path / "d", files={"events.csv": events}))
    report = load_dataset(spec, tmp_path / "db.duckdb")
    graph = build_graph(spec, report.database)
    save_graph(graph, tmp_path / "graph.pt")
    artifact = GraphArtifact.describe(graph, tmp_path / "graph.pt", default_split(graph))
    dataset = DatasetResource(source=str(spec.root))

    def evaluate(raw: LoadReport) -> dict[str, dg.AssetCheckEvaluation]:
        upstream = {"relational_graph": artifact, "raw_tables": raw}
        return run_checks(relational_graph_checks, upstream, dataset=dataset)

    assert all(e.passed for e in evaluate(report).values())
    short = replace(report.tables["users"], accepted=2)  # a row the graph has and DuckDB lost
    assert_blocks(
        evaluate(replace(report, tables={**report.tables, "users": short})),
        "nodes_match_accepted_rows",
    )
    with duckdb.connect(str(report.database)) as connection:
        connection.execute("UPDATE raw.events SET product_id = NULL WHERE __row = 1")
    assert_blocks(evaluate(report), "edges_match_foreign_keys")


def _tree(
    parent: list[int], offsets: tuple[int, ...], members: list[list[int]]
) -> InterestHierarchy:
    parents = torch.tensor(parent)
    return InterestHierarchy(
        _unit(len(parent)), parents, offsets, token_ids(parents, offsets), torch.tensor(members)
    )


def _hierarchy(tree: InterestHierarchy, path: Path) -> HierarchyArtifact:
    empty = torch.zeros(2, 0, dtype=torch.long)
    supergraph = SuperGraph(empty, torch.zeros(0), torch.zeros(0), empty)
    return save_hierarchy(tree, supergraph, path, [], [])


GOOD_TREE = ([-1, -1, 0, 1], (0, 2, 4), [[0, 2], [1, 3], [0, 2]])


def test_hierarchy_checks_fail_on_a_broken_tree_and_an_empty_coarse_primitive(
    tmp_path: Path,
) -> None:
    good = run_checks(
        interest_hierarchy_checks,
        {"interest_hierarchy": _hierarchy(_tree(*GOOD_TREE), tmp_path / "good.pt")},
    )
    assert all(e.passed for e in good.values())
    # Item 1's level-1 primitive (3) now hangs under primitive 0, not under its level-0 one (1).
    unnested = _tree([-1, -1, 0, 0], (0, 2, 4), GOOD_TREE[2])
    assert_blocks(
        run_checks(
            interest_hierarchy_checks,
            {"interest_hierarchy": _hierarchy(unnested, tmp_path / "a.pt")},
        ),
        "tree_is_valid",
    )
    # A third coarse primitive, and a child under it, that no item's path passes through.
    empty = _tree([-1, -1, -1, 0, 1, 2], (0, 3, 6), [[0, 3], [1, 4], [0, 3]])
    evaluations = run_checks(
        interest_hierarchy_checks, {"interest_hierarchy": _hierarchy(empty, tmp_path / "b.pt")}
    )
    assert_blocks(evaluations, "no_empty_coarse_primitive")
    assert evaluations["no_empty_coarse_primitive"].metadata["empty"].value == 1


@pytest.mark.parametrize("broken", ["nothing", "a level of an item", "a parent"])
def test_token_checks_fail_on_an_entity_without_a_level_or_an_orphan(
    tmp_path: Path, broken: str
) -> None:
    tree = _tree(*GOOD_TREE)
    hierarchy = _hierarchy(tree, tmp_path / "hierarchy.pt")
    tokens = tree.members.unsqueeze(-1).clone()  # each item's own path, one token per level
    parents = [tree.token_ids[p] if p >= 0 else "" for p in tree.parent.tolist()]
    if broken == "a level of an item":
        tokens[2, 1, 0] = NO_TOKEN
    if broken == "a parent":
        parents[3] = "L0:9"
    vocabulary = pd.DataFrame(
        {"token": tree.token_ids, "parent": parents, "level": tree.level_of().tolist()}
    )
    bags = {"products": TokenBags(tree.members, tokens, (tokens >= 0).float())}
    described = Tokens(
        bags, {"products": ["a", "b", "c"]}, {"item": "products"}, tmp_path / "e.pt", hierarchy.path
    )
    artifact = save_tokens(described, vocabulary, tmp_path, [])
    evaluations = run_checks(interest_token_checks, {"interest_tokens": artifact})
    failing = {
        "a level of an item": "every_entity_has_tokens_at_every_level",
        "a parent": "every_token_parent_exists",
    }.get(broken)
    assert {name for name, e in evaluations.items() if not e.passed} == (
        {failing} if failing else set()
    )
    if failing:
        assert_blocks(evaluations, failing)
