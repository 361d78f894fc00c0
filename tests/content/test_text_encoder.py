"""The packaged all-MiniLM-L6-v2 encoder: shape, determinism, semantics, offline load, limits."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from hier_pipeline.content import TextEncoder, TextEncoderConfig, text_cache_id
from hier_pipeline.content.text_encoder import packaged_model_dir


def _no_network(*args: Any, **kwargs: Any) -> None:
    raise OSError("network access attempted during an offline model load")


@pytest.fixture(scope="module")
def encoder() -> Iterator[TextEncoder]:
    """Loaded once, with sockets disabled: proves the model needs no hub or network."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", _no_network)
        mp.setattr(socket, "create_connection", _no_network)
        yield TextEncoder(TextEncoderConfig(batch_size=8))


def test_loads_offline_from_the_installed_package(encoder: TextEncoder) -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert "site-packages" in str(packaged_model_dir())
    assert text_cache_id(encoder.config).startswith("all-MiniLM-L6-v2/sha256:")


def test_vectors_are_384d_unit_norm_and_deterministic(encoder: TextEncoder) -> None:
    texts = ["red running shoes", "a kitchen knife", ""]
    first, second = encoder.encode(texts), encoder.encode(texts)
    assert first.shape == (3, 384)
    assert first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(first, second)
    assert encoder.encode([]).shape == (0, 384)


def test_similar_products_are_closer_than_unrelated_ones(encoder: TextEncoder) -> None:
    shoes, sneakers, knives = encoder.encode(
        [
            "red running shoes for marathon training",
            "lightweight jogging sneakers",
            "stainless steel kitchen knife set",
        ]
    )
    assert shoes @ sneakers > shoes @ knives + 0.2
    assert shoes @ sneakers > sneakers @ knives + 0.2


def test_batch_order_is_restored_after_length_sorting(encoder: TextEncoder) -> None:
    texts = [f"item {i} " + "very long description " * (i % 5) for i in range(20)]
    batched = encoder.encode(texts)
    one_by_one = np.vstack([encoder.encode([t]) for t in texts])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)


def test_huge_text_is_truncated_not_fatal(encoder: TextEncoder) -> None:
    huge = "shoe " * 20_000  # 100k characters
    short = "shoe " * 200  # already past the 128-token limit
    vectors = encoder.encode([huge, short])
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-6)


def test_matches_sentence_transformers_reference(encoder: TextEncoder) -> None:
    from sentence_transformers import SentenceTransformer

    texts = ["red running shoes", "stainless steel kitchen knife set", "organic green tea, 20 bags"]
    reference = SentenceTransformer(str(packaged_model_dir()), device="cpu").encode(texts)
    np.testing.assert_allclose(encoder.encode(texts), reference, atol=1e-5)
