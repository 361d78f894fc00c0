from __future__ import annotations

import pytest
import torch
from torch_geometric.data import HeteroData

from hier_pipeline.model.inputs import (
    IMAGE_DIM,
    TEXT_DIM,
    InputConfig,
    NodeInputEncoder,
    NodeTypeShape,
    node_type_shapes,
)

DIM = 16
SHAPES = {
    "users": NodeTypeShape(num_numeric=3, num_categorical=0, num_nodes=5),
    "products.v2": NodeTypeShape(
        num_numeric=2, num_categorical=2, num_nodes=4, has_text=True, has_image=True
    ),
}


def encoder(**config: object) -> NodeInputEncoder:
    torch.manual_seed(0)
    return NodeInputEncoder(SHAPES, InputConfig(dim=DIM, hash_buckets=32, **config))  # type: ignore[arg-type]


def products(
    n: int = 4, *, has_text: bool = True, has_image: bool = True
) -> dict[str, torch.Tensor]:
    return {
        "x_num": torch.randn(n, 2),
        "x_cat": torch.randint(0, 32, (n, 2)),
        "text": torch.randn(n, TEXT_DIM) if has_text else torch.zeros(n, TEXT_DIM),
        "has_text": torch.full((n,), has_text),
        "image": torch.randn(n, IMAGE_DIM) if has_image else torch.zeros(n, IMAGE_DIM),
        "has_image": torch.full((n,), has_image),
        "n_id": torch.arange(n),
    }


def test_shapes_and_gradients_reach_every_input_part() -> None:
    model = encoder(use_id_embedding=True, id_dropout=0.0)
    users = {"x_num": torch.randn(5, 3), "x_cat": torch.zeros(5, 0, dtype=torch.long)}
    assert model("users", {**users, "n_id": torch.arange(5)}).shape == (5, DIM)
    batch = products()
    batch["x_cat"][:, 0] = 0  # missing in column 0 for everyone
    out = model("products.v2", batch)
    assert out.shape == (4, DIM)
    (out * torch.randn_like(out)).sum().backward()
    params = model._type("products.v2")
    for name, grad in [
        ("numeric", params.numeric.weight.grad),  # type: ignore[union-attr]
        ("text", model.text.weight.grad),
        ("image", model.image.weight.grad),
        ("ids", params.ids.weight.grad),  # type: ignore[union-attr]
        ("categories", model.categories.weight.grad),
    ]:
        assert grad is not None and grad.abs().sum() > 0, name
    assert params.column_offset.grad[0].abs().sum() == 0  # type: ignore[index]
    assert params.column_offset.grad[1].abs().sum() > 0  # type: ignore[index]
    assert model.categories.weight.grad[0].abs().sum() == 0  # type: ignore[index]


def test_missing_content_uses_the_learned_vectors_not_the_zero_placeholder() -> None:
    model = encoder()
    params = model._type("products.v2")
    cold = products(has_text=False, has_image=False)
    expected = params.type_vector + params.no_text + params.no_image  # type: ignore[operator]
    assert torch.allclose(model._content(params, cold), expected.expand(4, -1))
    with_content = {
        **cold,
        "text": torch.randn(4, TEXT_DIM),
        "has_text": torch.ones(4, dtype=torch.bool),
    }
    assert not torch.allclose(model("products.v2", with_content), model("products.v2", cold))


def test_categorical_columns_do_not_collide_and_zero_means_missing() -> None:
    model = encoder()
    batch = products(1)
    same_bucket_col0 = {**batch, "x_cat": torch.tensor([[7, 0]])}
    same_bucket_col1 = {**batch, "x_cat": torch.tensor([[0, 7]])}
    missing = {**batch, "x_cat": torch.tensor([[0, 0]])}
    a, b = model("products.v2", same_bucket_col0), model("products.v2", same_bucket_col1)
    assert not torch.allclose(a, b)
    params = model._type("products.v2")
    assert params.numeric is not None
    numeric_only = model.norm(model._content(params, batch) + params.numeric(batch["x_num"]))
    assert torch.allclose(model("products.v2", missing), numeric_only)


def test_id_dropout_rate_in_training_and_never_in_eval() -> None:
    shapes = {"items": NodeTypeShape(num_numeric=0, num_categorical=0, num_nodes=4000)}
    model = NodeInputEncoder(shapes, InputConfig(dim=4, use_id_embedding=True, id_dropout=0.3))
    ids = model._type("items").ids
    assert ids is not None
    torch.nn.init.ones_(ids.weight)
    batch = {
        "x_num": torch.zeros(4000, 0),
        "x_cat": torch.zeros(4000, 0, dtype=torch.long),
        "n_id": torch.arange(4000),
    }
    torch.manual_seed(1)
    dropped = (model._ids(ids, batch) == 0).all(dim=1).float().mean().item()
    assert dropped == pytest.approx(0.3, abs=0.03)
    model.eval()
    assert (model._ids(ids, batch) == 1).all()


def test_unknown_ids_at_inference_get_no_id_contribution() -> None:
    model = encoder(use_id_embedding=True).eval()
    ids = model._type("products.v2").ids
    assert ids is not None
    torch.nn.init.ones_(ids.weight)
    batch = {
        **products(3),
        "n_id": torch.tensor([1, 4, 99]),
        "id_known": torch.tensor([False, True, True]),
    }
    assert (model._ids(ids, batch) == 0).all()  # flagged, == num_nodes, beyond
    assert model("products.v2", batch).shape == (3, DIM)


def test_new_id_rows_start_at_zero_so_cold_nodes_match_dropped_ones() -> None:
    model = encoder(use_id_embedding=True).eval()
    batch = products()
    without = {**batch, "id_known": torch.zeros(4, dtype=torch.bool)}
    assert torch.allclose(model("products.v2", batch), model("products.v2", without))


def test_content_only_ignores_features_and_ids() -> None:
    model = encoder(use_id_embedding=True).eval()
    batch = products()
    other = {
        **batch,
        "x_num": torch.randn(4, 2) * 9,
        "x_cat": torch.randint(1, 32, (4, 2)),
        "n_id": torch.tensor([3, 2, 1, 0]),
    }
    assert torch.equal(
        model.content_only("products.v2", batch), model.content_only("products.v2", other)
    )
    content = {k: batch[k] for k in ("text", "has_text", "image", "has_image", "n_id")}
    assert torch.equal(
        model.content_only("products.v2", content), model.content_only("products.v2", batch)
    )
    assert not torch.allclose(model.content_only("products.v2", batch), model("products.v2", batch))


def test_shapes_from_a_graph_and_its_content() -> None:
    data = HeteroData()
    data["users"].x_num, data["users"].x_cat = (
        torch.zeros(2, 1),
        torch.zeros(2, 3, dtype=torch.long),
    )
    data["users"].num_nodes = 2
    data["items"].x_num, data["items"].x_cat = (
        torch.zeros(3, 0),
        torch.zeros(3, 0, dtype=torch.long),
    )
    data["items"].num_nodes = 3
    content = {
        "items": {"text": torch.zeros(3, TEXT_DIM), "has_text": torch.zeros(3, dtype=torch.bool)}
    }
    assert node_type_shapes(data, content) == {
        "users": NodeTypeShape(1, 3, 2),
        "items": NodeTypeShape(0, 0, 3, has_text=True, has_image=False),
    }
