"""Schema-agnostic node inputs: every node of every table becomes one `dim`-vector.

For a node ``v`` of type ``t``::

    h_v = LayerNorm( W_t x_num                                    numeric and time columns
                   + sum_c [x_cat_c != 0] (E[x_cat_c] + o_{t,c})  hashed categories, 0 = missing
                   + (has_text  ? W_text  text  : m_text_t)       frozen text vector, or "no text"
                   + (has_image ? W_image image : m_image_t)      frozen image vector, or "no image"
                   + e_t                                          node type
                   + keep_v * ID_t[n_id] )                        optional, dropped out in training

``E`` is one hashed embedding shared by all columns and types (its size is fixed however many
values a column has); the per-column offset ``o_{t,c}`` keeps two columns that hash a value to the
same bucket apart. The content projections ``W_text``/``W_image`` are shared by all node types so
that, say, an advertiser's and a product's descriptions land in one space. The ID term is the only
part a brand-new entity cannot have, hence it is optional, starts at zero (a row that never trains
stays exactly zero) and is dropped whole, DropoutNet-style and without rescaling, so that the
other terms alone must already place an entity well.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch_geometric.data import HeteroData

TEXT_DIM = 384  # all-MiniLM-L6-v2
IMAGE_DIM = 1280  # EfficientNet-Lite0 pooled features


@dataclass(frozen=True)
class NodeTypeShape:
    """What the encoder needs to know about one node type's inputs."""

    num_numeric: int
    num_categorical: int
    num_nodes: int
    has_text: bool = False
    has_image: bool = False


@dataclass(frozen=True)
class InputConfig:
    """Args:
    dim: output width.
    hash_buckets: size of the shared categorical table (the graph's `hash_buckets`).
    use_id_embedding: add a learned per-node ID embedding.
    id_dropout: training-time probability of zeroing a node's whole ID embedding.
    """

    dim: int = 128
    hash_buckets: int = 1 << 16
    use_id_embedding: bool = False
    id_dropout: float = 0.5


def node_type_shapes(
    data: HeteroData, content: Mapping[str, Mapping[str, Tensor]] | None = None
) -> dict[str, NodeTypeShape]:
    """Shapes of every node type of a `build_graph` graph and a `ContentArtifact.load()` dict."""
    content = content or {}
    return {
        node_type: NodeTypeShape(
            num_numeric=int(data[node_type].x_num.size(1)),
            num_categorical=int(data[node_type].x_cat.size(1)),
            num_nodes=int(data[node_type].num_nodes),
            has_text="text" in content.get(node_type, {}),
            has_image="image" in content.get(node_type, {}),
        )
        for node_type in data.node_types
    }


class _TypeInputs(nn.Module):
    """The parameters that belong to one node type."""

    def __init__(self, shape: NodeTypeShape, config: InputConfig) -> None:
        super().__init__()
        dim = config.dim
        self.numeric = nn.Linear(shape.num_numeric, dim) if shape.num_numeric else None
        self.column_offset = nn.Parameter(torch.randn(shape.num_categorical, dim) * 0.02)
        self.no_text = nn.Parameter(torch.randn(dim) * 0.02) if shape.has_text else None
        self.no_image = nn.Parameter(torch.randn(dim) * 0.02) if shape.has_image else None
        self.type_vector = nn.Parameter(torch.randn(dim) * 0.02)
        self.ids: nn.Embedding | None = None
        if config.use_id_embedding:
            self.ids = nn.Embedding(shape.num_nodes, dim)
            nn.init.zeros_(self.ids.weight)


class NodeInputEncoder(nn.Module):
    """Initial node vectors for a heterogeneous graph of any schema (formula in the module doc).

    Args:
        shapes: node type -> its input shapes (see `node_type_shapes`).
        config: widths, hash buckets and the ID-embedding options.

    Shapes:
        batch["x_num"] [N, D_t] float, batch["x_cat"] [N, C_t] long (0 = missing),
        batch["text"] [N, 384] + batch["has_text"] [N] bool where the type has text,
        batch["image"] [N, 1280] + batch["has_image"] [N] bool where it has images,
        batch["n_id"] [N] long (global node index; `content_only` reads only its length),
        batch["id_known"] [N] bool, optional: False marks entities without a trained ID row.
        Output: [N, dim].
    """

    def __init__(self, shapes: Mapping[str, NodeTypeShape], config: InputConfig) -> None:
        super().__init__()
        if not 0.0 <= config.id_dropout <= 1.0:
            raise ValueError(f"id_dropout must be in [0, 1], got {config.id_dropout}")
        self.config = config
        self.shapes = dict(shapes)
        # Table names may hold characters a ModuleDict key may not ('.'), so types are indexed.
        self._index = {node_type: i for i, node_type in enumerate(self.shapes)}
        self.types = nn.ModuleList(_TypeInputs(shape, config) for shape in self.shapes.values())
        self.categories = nn.Embedding(config.hash_buckets, config.dim, padding_idx=0)
        self.text = nn.Linear(TEXT_DIM, config.dim)
        self.image = nn.Linear(IMAGE_DIM, config.dim)
        self.norm = nn.LayerNorm(config.dim)

    def _type(self, node_type: str) -> _TypeInputs:
        module = self.types[self._index[node_type]]
        assert isinstance(module, _TypeInputs)
        return module

    def forward(self, node_type: str, batch: Mapping[str, Tensor]) -> Tensor:
        """Behaviour-view inputs: features, content, type and (optionally) ID."""
        params = self._type(node_type)
        h = self._content(params, batch)
        if params.numeric is not None:
            h = h + params.numeric(batch["x_num"])
        x_cat = batch["x_cat"]
        if x_cat.size(1):
            present = (x_cat != 0).unsqueeze(-1)
            h = h + ((self.categories(x_cat) + params.column_offset) * present).sum(dim=1)
        if params.ids is not None:
            h = h + self._ids(params.ids, batch)
        return self.norm(h)

    def content_only(self, node_type: str, batch: Mapping[str, Tensor]) -> Tensor:
        """Content-view inputs: text, image (or the no-content vectors) and type, nothing else.

        A type without text and images gets only its type vector: the same for every node.
        """
        return self.norm(self._content(self._type(node_type), batch))

    def _content(self, params: _TypeInputs, batch: Mapping[str, Tensor]) -> Tensor:
        h = params.type_vector.expand(len(batch["n_id"]), -1)
        if params.no_text is not None:
            h = h + self._present_or(self.text, batch["text"], batch["has_text"], params.no_text)
        if params.no_image is not None:
            h = h + self._present_or(
                self.image, batch["image"], batch["has_image"], params.no_image
            )
        return h

    @staticmethod
    def _present_or(project: nn.Linear, vectors: Tensor, present: Tensor, absent: Tensor) -> Tensor:
        # The zero placeholder rows never reach the projection's bias: masked rows take `absent`.
        return torch.where(present.unsqueeze(-1), project(vectors), absent)

    def _ids(self, table: nn.Embedding, batch: Mapping[str, Tensor]) -> Tensor:
        n_id = batch["n_id"]
        keep = (n_id >= 0) & (n_id < table.num_embeddings)
        if "id_known" in batch:
            keep = keep & batch["id_known"]
        if self.training:
            keep = keep & (torch.rand(n_id.shape, device=n_id.device) >= self.config.id_dropout)
        rows = table(torch.where(keep, n_id, torch.zeros_like(n_id)))
        return rows * keep.unsqueeze(-1)
