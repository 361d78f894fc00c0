"""Content kNN: items whose text and image resemble what the user engaged with. The one baseline
that scores cold items as well as warm ones, since it needs nothing but their content."""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from hier_pipeline.evaluation.baselines.interactions import Interactions, sparse


def item_vectors(content: Mapping[str, Tensor], num_items: int) -> Tensor:
    """Unit text vector and unit image vector side by side (zeros where absent), renormalised: text
    and image count equally. An item without content is all zeros and scores 0 for everyone.

    Shapes: content {"text": [I, 384], "has_text": [I], "image": [I, 1280], "has_image": [I]}
    (either modality may be missing) -> [I, d].
    """
    parts = [
        F.normalize(content[name].float(), dim=1) * content[f"has_{name}"].unsqueeze(1)
        for name in ("text", "image")
        if name in content
    ]
    if not parts:
        return torch.zeros(num_items, 1)
    return F.normalize(torch.cat(parts, dim=1), dim=1)


class ContentKNN:
    """score(u, i) = cos(p_u, v_i), the profile p_u = sum_j w_uj v_j over the user's items, w the
    stage weights decayed with `half_life_days` (None: no decay); v = `item_vectors`."""

    def __init__(self, content: Mapping[str, Tensor], half_life_days: float | None = 30.0) -> None:
        self.content = content
        self.half_life_days = half_life_days
        self.items = torch.zeros(0, 0)
        self.profiles = torch.zeros(0, 0)

    def fit(self, history: Interactions) -> None:
        self.items = item_vectors(self.content, history.num_items)
        pairs = history.pair_weights(self.half_life_days)
        weights = sparse(pairs.user, pairs.item, pairs.value, (pairs.num_users, pairs.num_items))
        self.profiles = F.normalize(torch.sparse.mm(weights, self.items), dim=1)

    def score(self, users: Tensor) -> Tensor:
        return self.profiles[users] @ self.items.T
