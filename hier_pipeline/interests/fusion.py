"""The item vector the interest tree quantises: content (text, image) fused with behaviour (the
model's item embedding).

Content vectors come from frozen pretrained encoders, so they are the same for every training
seed and every retrain, and a product has them before anyone engages with it; the model's item
embedding knows what people do with the product but lives in a space that each training draws
anew. The fused vector is the concatenation of the unit-norm parts scaled so that

    cos(fused_a, fused_b) = w * cos(content_a, content_b) + (1 - w) * cos(behaviour_a, behaviour_b)

with w = `content_weight`: the tree's metric is a weighted mean of the two, and the weight says
how much of a token's meaning is fixed by what the product is rather than by how it was trained.
Each modality is centred on its catalogue mean first: pretrained encoders put every vector in a
narrow cone (MiniLM's cosines sit around 0.3, pooled CNN features are non-negative), and the
shared direction would otherwise dominate the cosine. Within content, text and image weigh the
same where an item has both; an item without content is placed by behaviour alone. Which
modalities a tree reads at all is chosen on held-out events (`growth.grow`): an image encoder
that says little of what a product is for would otherwise blur what the text says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

MODALITIES = (("text", "has_text"), ("image", "has_image"))


def present_modalities(content: Mapping[str, Tensor] | None) -> tuple[str, ...]:
    """The modalities at least one item of `content` has, in `MODALITIES` order."""
    if content is None:
        return ()
    return tuple(
        vectors
        for vectors, mask in MODALITIES
        if vectors in content and mask in content and bool(content[mask].bool().any())
    )


@dataclass(frozen=True)
class ItemFusion:
    """How the tree's items were fused: the content weight and each modality's catalogue mean
    (the centring). Kept with the tree, so a product that arrives after it grew is fused as its
    items were, not centred on a batch of a few products."""

    content_weight: float
    means: dict[str, Tensor]  # modality ("text", "image") -> mean of the items that have it

    @classmethod
    def of(
        cls,
        content: Mapping[str, Tensor] | None,
        content_weight: float,
        modalities: tuple[str, ...] | None = None,
    ) -> ItemFusion:
        """The fusion of a catalogue with `content` (None: behaviour alone), reading the
        `modalities` among those it has (None: all of them)."""
        if not 0.0 <= content_weight <= 1.0:
            raise ValueError(f"content_weight must lie in [0, 1], not {content_weight}")
        present = present_modalities(content)
        wanted = present if modalities is None else modalities
        means = {
            vectors: content[vectors][content[mask].bool()].float().mean(dim=0)
            for vectors, mask in MODALITIES
            if content is not None and vectors in present and vectors in wanted
        }
        return cls(content_weight, means)

    @property
    def modalities(self) -> tuple[str, ...]:
        """The content modalities the fused vector reads, in `MODALITIES` order."""
        return tuple(vectors for vectors, _ in MODALITIES if vectors in self.means)

    def content_vectors(self, content: Mapping[str, Tensor], count: int) -> Tensor:
        """The items' centred content, text and image side by side, unit norm per item (zero
        rows for items without content). Shapes: -> [count, text dim + image dim] (or
        [count, 0])."""
        parts, present = [], torch.zeros(count)
        for vectors, mask in MODALITIES:
            if vectors not in self.means:
                continue
            has = content[mask].bool()
            centred = content[vectors].float() - self.means[vectors]
            parts.append(F.normalize(centred, dim=1) * has[:, None])
            present += has.float()
        if not parts:
            return torch.zeros(count, 0)
        return torch.cat(parts, dim=1) / present.clamp_min(1).sqrt()[:, None]

    def __call__(self, behaviour: Tensor, content: Mapping[str, Tensor] | None) -> Tensor:
        """Unit-norm fused item vectors (the module docstring). Without content, or with weight
        0, the behaviour vectors themselves. Shapes: behaviour [N, d] -> [N, d + content dims]."""
        if content is None or self.content_weight == 0.0 or not self.means:
            return F.normalize(behaviour, dim=1)
        what = self.content_vectors(content, len(behaviour))
        has_content = what.norm(dim=1) > 0
        weight = torch.where(has_content, self.content_weight, 0.0)[:, None]
        fused = torch.cat(
            [what * weight.sqrt(), F.normalize(behaviour, dim=1) * (1 - weight).sqrt()], dim=1
        )
        return F.normalize(fused, dim=1)
