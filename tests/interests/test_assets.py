"""The two interests assets materialise with passing checks and readable metadata."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from assets.config import HierarchyLaunchConfig
from hier_pipeline.interests import find_interest_folder
from tests.interests.conftest import InterestInputs, Materialised, materialise_interests


def test_hierarchy_and_tokens_materialise_with_passing_checks(materialised: Materialised) -> None:
    result = materialised.result
    assert result.success
    checks = {
        (e.asset_key.to_user_string(), e.check_name): e
        for e in result.get_asset_check_evaluations()
    }
    assert set(checks) == {
        ("interest_hierarchy", "tree_is_valid"),
        ("interest_hierarchy", "no_empty_coarse_primitive"),
        ("interest_tokens", "every_entity_has_tokens_at_every_level"),
        ("interest_tokens", "every_token_parent_exists"),
    }
    assert all(c.passed for c in checks.values()), {k: c.metadata for k, c in checks.items()}


def test_metadata_shows_levels_tokens_and_the_map(materialised: Materialised) -> None:
    result = materialised.result
    (hierarchy,) = result.asset_materializations_for_node("interest_hierarchy")
    assert hierarchy.metadata["primitives_per_level"].value == "2 / 3 / 6"  # 150 items, 24 a leaf
    levels = hierarchy.metadata["levels"].value
    assert "stability ARI" in levels and "| L2 |" in levels
    (tokens,) = result.asset_materializations_for_node("interest_tokens")
    assert tokens.metadata["entities"].value == {"users": 100, "advertisers": 5, "products": 150}
    assert "| L0:0 |" in tokens.metadata["top_tokens"].value
    picture = tokens.metadata["primitive_map"].value.split("base64,")[1].rstrip(")")
    assert base64.b64decode(picture).startswith(b"\x89PNG")
    folder = find_interest_folder(materialised.home)
    assert {p.name for p in folder.iterdir()} == {
        "hierarchy.pt",
        "tokens.pt",
        "vocabulary.parquet",
        "primitives.png",
    }


def test_the_launch_config_pins_what_the_finest_codes_read(
    interest_inputs: InterestInputs, materialised: Materialised, tmp_path: Path
) -> None:
    """The default tree chooses its content on held-out events; a pinned one reads what the
    launchpad names, and a name that is no modality is refused, named."""
    (chosen,) = materialised.result.asset_materializations_for_node("interest_hierarchy")
    default = chosen.metadata["finest_codes_read"].value
    pin = "image" if default != "embedding + image" else "text"
    pinned = materialise_interests(interest_inputs, tmp_path, {"modalities": [pin]})
    (hierarchy,) = pinned.result.asset_materializations_for_node("interest_hierarchy")
    assert hierarchy.metadata["finest_codes_read"].value == f"embedding + {pin}"
    with pytest.raises(ValueError, match=r"unknown modalities \['txt'\]"):
        HierarchyLaunchConfig(modalities=["txt"]).to_core()
