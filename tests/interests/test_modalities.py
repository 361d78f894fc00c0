"""Which content modalities the tree's finest codes read, chosen on held-out events: every one
the items have, unless one alone retrieves the later events clearly better; a refit reads the
served tree's."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from hier_pipeline.interests import HierarchyConfig, build_hierarchy
from hier_pipeline.interests.build import build_interest_hierarchy
from hier_pipeline.interests.events import FunnelEvents
from hier_pipeline.interests.growth import candidate_modalities
from hier_pipeline.interests.matching import ServingTree
from hier_pipeline.interests.quality import level_agreement
from tests.interests.conftest import InterestInputs
from tests.interests.planted import planted_vectors

GROUPS, FINE, PER_FINE = 4, 24, 20
SIZES = (GROUPS, FINE)


def _content(text: torch.Tensor, image: torch.Tensor) -> dict[str, torch.Tensor]:
    present = torch.ones(len(text), dtype=torch.bool)
    return {"text": text, "has_text": present, "image": image, "has_image": present}


def _world(fine: torch.Tensor) -> FunnelEvents:
    """Per user: views of three items of one fine interest at time 0, then purchases of two
    others of it at time 100: the later events follow the fine interests."""
    generator = torch.Generator().manual_seed(0)
    rows: list[tuple[int, int, int, int]] = []
    for user in range(160):
        items = torch.nonzero(fine == user % FINE).flatten()
        items = items[torch.randperm(len(items), generator=generator)]
        rows += [(user, int(i), 0, 0) for i in items[:3]]
        rows += [(user, int(i), 1, 100) for i in items[3:5]]
    return FunnelEvents(*(torch.tensor(column) for column in zip(*rows, strict=True)))


def _planted() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(text vectors that carry the planted fine interests, behaviour vectors that carry
    nothing, the fine labels)."""
    text, truth = planted_vectors(branching=(GROUPS, FINE // GROUPS), per_leaf=PER_FINE)
    noise = F.normalize(torch.randn(len(text), 16, generator=torch.Generator().manual_seed(1)))
    return text, noise, truth[:, 1]


def test_an_image_that_says_nothing_of_the_interests_is_left_out_of_the_tree() -> None:
    text, behaviour, fine = _planted()
    image = torch.randn(len(text), 3, generator=torch.Generator().manual_seed(2))
    content, events = _content(text, image), _world(fine)
    config = HierarchyConfig(sizes=SIZES)
    tree = build_hierarchy(behaviour, config, content, events)
    assert tree.modalities == ("text",)
    both = build_hierarchy(
        behaviour, HierarchyConfig(sizes=SIZES, modalities=("text", "image")), content, events
    )
    assert both.modalities == ("text", "image")
    finer = level_agreement(tree.members[:, 1], fine)["ami"]
    assert finer > level_agreement(both.members[:, 1], fine)["ami"] + 0.1
    # The chosen tree is the one text alone grows: the same seed, the same codes.
    alone = build_hierarchy(
        behaviour, HierarchyConfig(sizes=SIZES, modalities=("text",)), content, events
    )
    assert torch.equal(tree.members, alone.members)


def test_where_every_modality_carries_the_interests_all_of_them_are_read() -> None:
    text, behaviour, fine = _planted()
    turn = torch.linalg.qr(torch.randn(16, 16, generator=torch.Generator().manual_seed(3)))[0]
    image = text @ turn  # another view with the same geometry: neither alone does better
    tree = build_hierarchy(
        behaviour, HierarchyConfig(sizes=SIZES), _content(text, image), _world(fine)
    )
    assert tree.modalities == ("text", "image")
    assert level_agreement(tree.members[:, 1], fine)["ami"] > 0.8


def test_the_options_are_all_modalities_first_then_each_alone() -> None:
    text, _, _ = _planted()
    content = _content(text, text)
    assert candidate_modalities(content, None) == [("text", "image"), ("text",), ("image",)]
    assert candidate_modalities(content, ("image",)) == [("image",)]
    content["has_image"] = torch.zeros(len(text), dtype=torch.bool)
    assert candidate_modalities(content, None) == [("text",)]
    assert candidate_modalities(None, None) == [()]


def test_a_refit_reads_the_modalities_of_the_tree_it_starts_from(
    interest_inputs: InterestInputs, tmp_path: Path
) -> None:
    graph, content = interest_inputs.graph.load(), interest_inputs.content
    grown = build_interest_hierarchy(
        interest_inputs.embeddings, graph, tmp_path / "grown", HierarchyConfig(), content
    )
    served = grown.load()
    assert grown.modalities == served.modalities and served.modalities
    other = tuple(m for m in ("text", "image") if m not in served.modalities) or ("text",)
    refitted = build_interest_hierarchy(
        interest_inputs.embeddings,
        graph,
        tmp_path / "refit",
        HierarchyConfig(),
        content,
        ServingTree(served.members, other),
    )
    assert refitted.modalities == other and refitted.merge_share is None
