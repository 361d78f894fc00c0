"""Batch files merged into what is served: new entities appended, the dataset's entities a batch
embedded again replaced (the last batch wins), and the stage's own tensors left as they were."""

from __future__ import annotations

import torch

from hier_pipeline.interests.arrivals import BatchTokens, merge_batches
from hier_pipeline.interests.tokens import TokenBags


def _bags(first_token: int, n: int) -> TokenBags:
    """n entities, 2 levels, 1 token each: token ids first_token, first_token + 1, ..."""
    tokens = torch.arange(first_token, first_token + n).reshape(n, 1, 1).expand(n, 2, 1)
    return TokenBags(tokens[:, :, 0].clone(), tokens.clone(), torch.ones(n, 2, 1))


def _batch(name: str, keys: list[str], value: float, first_token: int) -> BatchTokens:
    return BatchTokens(
        name,
        "tree",
        {"users": keys},
        {"users": torch.full((len(keys), 3), value)},
        {"users": _bags(first_token, len(keys))},
    )


def test_known_entities_take_the_last_batch_rows_and_new_ones_are_appended() -> None:
    keys = {"users": ["u1", "u2"]}
    vectors = {"users": torch.zeros(2, 3)}
    bags = {"users": _bags(0, 2)}
    first = _batch("batch0001", ["u2", "u3"], 1.0, 10)
    second = _batch("batch0002", ["u4", "u2"], 2.0, 20)

    merged_keys, merged_vectors, merged_bags = merge_batches(keys, vectors, bags, [first, second])

    assert merged_keys["users"] == ["u1", "u2", "u3", "u4"]
    assert merged_vectors["users"][:, 0].tolist() == [0.0, 2.0, 1.0, 2.0]
    assert merged_bags["users"].tokens[:, 0, 0].tolist() == [0, 21, 11, 20]
    assert merged_bags["users"].path[:, 0].tolist() == [0, 21, 11, 20]
    assert torch.equal(vectors["users"], torch.zeros(2, 3))  # the stage's tensors are untouched
    assert torch.equal(bags["users"].tokens, _bags(0, 2).tokens)
