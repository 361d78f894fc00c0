"""`hier interests ...` on the materialised outputs, run as a user runs it."""

from __future__ import annotations

import json

import pytest

from tests.interests.conftest import Materialised
from tests.test_cli import hier


def test_recommend_and_explain_from_the_command_line(
    materialised: Materialised, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HIER_HOME", str(materialised.home))
    result = hier("interests", "recommend", "1", "--k", "3", "--by", "tokens", "--json")
    assert result.returncode == 0, result.stderr
    matches = json.loads(result.stdout)
    assert len(matches) == 3 and set(matches[0]) == {"key", "score"}
    explained = hier("interests", "explain", "1", matches[0]["key"])
    assert explained.returncode == 0, explained.stderr
    assert "token_score" in explained.stdout and "user_weight" in explained.stdout


def test_an_unknown_id_exits_2_with_the_table_and_id(
    materialised: Materialised, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HIER_HOME", str(materialised.home))
    result = hier("interests", "similar", "no-such-item", "--dataset", "synthetic_ads")
    assert result.returncode == 2
    assert "unknown id 'no-such-item' in table 'products'" in result.stderr
