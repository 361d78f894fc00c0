"""What a newcomer sees of each asset in the Dagster UI and the README, checked against the one
Definitions object."""

from __future__ import annotations

from assets.definitions import defs
from assets.readme import README, render


def test_every_asset_has_a_description_group_kinds_and_owners() -> None:
    missing = {
        node.key.to_user_string(): [
            what
            for what, value in {
                "description": node.description,
                "group": node.group_name != "default",
                "kinds": node.kinds,
                "owners": node.owners,
            }.items()
            if not value
        ]
        for node in defs.resolve_asset_graph().asset_nodes
    }
    assert not {asset: gaps for asset, gaps in missing.items() if gaps}


def test_readme_generated_blocks_match_the_definitions() -> None:
    text = README.read_text(encoding="utf-8")
    assert render(text, defs) == text, "README is stale: run `.venv/bin/python -m assets.readme`"
