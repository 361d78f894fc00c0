"""The retrieval API over the materialised outputs: every query type answers, fast, and unknown
ids fail with an error that names the table and the id."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from hier_pipeline.interests import InterestIndex, UnknownEntityError, find_interest_folder
from tests.interests.conftest import Materialised


@pytest.fixture(scope="module")
def index(materialised: Materialised) -> InterestIndex:
    return InterestIndex.open(find_interest_folder(materialised.home))


def test_top_items_by_embedding_and_by_tokens(index: InterestIndex) -> None:
    by_embedding = index.top_items("1", k=5)
    assert len(by_embedding) == 5
    assert [m.score for m in by_embedding] == sorted((m.score for m in by_embedding), reverse=True)
    assert all(m.key in index.keys["products"] for m in by_embedding)
    by_tokens = index.top_items(1, k=5, by="tokens")  # an int key finds the same user
    assert by_tokens and all(m.score > 0 for m in by_tokens)
    best = index.explain("1", by_tokens[0].key)
    assert best.shared and best.token_score == pytest.approx(by_tokens[0].score, rel=1e-5)


def test_top_advertisers_and_the_interests_they_serve(index: InterestIndex) -> None:
    advertisers = index.top_advertisers("1", k=3)
    assert len(advertisers) == 3 and all(m.key in index.keys["advertisers"] for m in advertisers)
    interests = index.advertiser_interests(advertisers[0].key)
    levels = [i.level for i in interests]
    assert levels == sorted(levels) and set(levels) == {0, 1, 2}
    for level in set(levels):
        assert sum(i.weight for i in interests if i.level == level) == pytest.approx(1.0)
    assert all(i.token.startswith(f"L{i.level}:") for i in interests)


def test_users_closest_to_an_interest(index: InterestIndex) -> None:
    token = index.hierarchy.token_ids[-1]
    users = index.users_for_interest(token, k=4)
    assert len(users) == 4 and users[0].score >= users[-1].score


def test_similar_items_leave_the_item_out(index: InterestIndex) -> None:
    similar = index.similar_items("7", k=10)
    assert len(similar) == 10 and "7" not in {m.key for m in similar}
    assert "7" not in {m.key for m in index.similar_items("7", k=10, by="tokens")}


def test_explain_lists_shared_tokens_with_both_weights(index: InterestIndex) -> None:
    user_bag = {i.token for i in index.interests_of("user", "3")}
    item_bag = {i.token for i in index.interests_of("item", "12")}
    explanation = index.explain("3", "12")
    assert {s.token for s in explanation.shared} == user_bag & item_bag
    assert -1 <= explanation.embedding_score <= 1
    assert all(0 < s.user_weight <= 1 and 0 < s.item_weight <= 1 for s in explanation.shared)


@pytest.mark.parametrize(
    ("query", "table", "key"),
    [
        (lambda ix: ix.top_items("no-such-user"), "users", "no-such-user"),
        (lambda ix: ix.top_advertisers("99999"), "users", "99999"),
        (lambda ix: ix.similar_items("99999"), "products", "99999"),
        (lambda ix: ix.explain("1", "99999"), "products", "99999"),
        (lambda ix: ix.advertiser_interests("99999"), "advertisers", "99999"),
        (lambda ix: ix.users_for_interest("L9:99"), "vocabulary", "L9:99"),
    ],
)
def test_unknown_ids_raise_an_error_naming_table_and_id(
    index: InterestIndex, query: Callable[[InterestIndex], object], table: str, key: str
) -> None:
    with pytest.raises(UnknownEntityError) as raised:
        query(index)
    assert raised.value.table == table and raised.value.key == key
    assert f"'{key}'" in str(raised.value) and f"'{table}'" in str(raised.value)
    assert isinstance(raised.value, KeyError)


def test_an_unknown_ranking_is_refused(index: InterestIndex) -> None:
    with pytest.raises(ValueError, match="'embedding' or 'tokens'"):
        index.top_items("1", by="popularity")  # type: ignore[arg-type]


def test_queries_answer_in_milliseconds(index: InterestIndex) -> None:
    queries = [
        lambda: index.top_items("5", 10),
        lambda: index.top_items("5", 10, by="tokens"),
        lambda: index.top_advertisers("5", 3),
        lambda: index.similar_items("5", 10),
        lambda: index.users_for_interest(index.hierarchy.token_ids[0], 10),
        lambda: index.explain("5", "5"),
        lambda: index.advertiser_interests("1"),
    ]
    for query in queries:
        started = time.perf_counter()
        for _ in range(20):
            query()
        assert (time.perf_counter() - started) / 20 < 0.02  # 20 ms; ~0.5 ms measured, idle
