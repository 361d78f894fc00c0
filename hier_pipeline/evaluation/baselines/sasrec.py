"""SASRec (Kang & McAuley, ICDM 2018, "Self-Attentive Sequential Recommendation"): a causal
transformer reads the user's items in time order and predicts the next one. The standard
sequential baseline: what a practitioner tries when order matters more than co-occurrence.

Sequence: the item of each of the user's target-stage (deepest) events in time order (ties by
item id), a run of events on the same item collapsed to one; with ``target_only=False`` every
positive stage's events (a funnel's impression, click and purchase of one item then make one
step, not three). Target-only by default, chosen on the tuning window of the synthetic world
(scale 1, 300 steps): MAP@10 0.102 against 0.034 with every stage, whose sequences are mostly
impressions. The last `max_length` items are kept (the paper's n = 50), left-padded with 0 (items
are shifted by one).

Architecture (the paper's): item embedding (shared with the output layer) + learned position
embedding, dropout; `num_blocks` pre-norm blocks of causal single-head self-attention and a
ReLU feed-forward of width `dim`; a final layer norm. Hidden state h_t scores item i as <h_t, e_i>.

Loss: sampled softmax (the stronger choice for SASRec: Klenitskiy & Vasilev, RecSys 2023): at
every non-pad position, cross-entropy of the next item against `negatives` items drawn
uniformly once per step among the items seen in training, shared by the batch (a drawn item
equal to the position's positive is masked out).

Training: `FitBudget.steps` steps of Adam on `batch_size` users drawn uniformly with replacement
among those with at least two items; the seed fixes initialisation, dropout and the draws (a
`torch.Generator`), so the same seed and steps give the same scores on any load. On the synthetic
world's tuning window (2,000 users, target-only) 1,000 steps at learning rate 1e-3 reached MAP@10
0.087 and 300 steps 0.102 (3e-3: 0.077 at 1,000): few sequences overfit, so the grid tries the
paper's two dropouts (0.2 dense, 0.5 sparse data) rather than learning rates.

Scoring: the hidden state of the last position of the user's sequence (its most recent
`max_length` items) against every item embedding; items never seen in training score UNSCORED
(their embeddings never moved), users without history 0 (popularity then decides).
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor, nn

from hier_pipeline.evaluation.baselines.interactions import Interactions
from hier_pipeline.evaluation.baselines.recommender import (
    DEFAULT_BUDGET,
    UNSCORED,
    FitBudget,
    Fits,
    Memo,
)


class SASRecNetwork(nn.Module):
    """Item sequences [B, L] (0 = pad, item i as i + 1) -> hidden states [B, L, dim]."""

    causal: Tensor  # [max_length, max_length] bool, True above the diagonal: the future

    def __init__(
        self, num_items: int, max_length: int, dim: int, num_blocks: int, dropout: float
    ) -> None:
        super().__init__()
        self.items = nn.Embedding(num_items + 1, dim, padding_idx=0)
        self.positions = nn.Embedding(max_length, dim)
        self.dropout = nn.Dropout(dropout)
        block = nn.TransformerEncoderLayer(
            dim, 1, dim, dropout, activation="relu", batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(block, num_blocks, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        causal = torch.triu(torch.ones(max_length, max_length, dtype=torch.bool), diagonal=1)
        self.register_buffer("causal", causal, persistent=False)

    def forward(self, sequences: Tensor) -> Tensor:
        length = sequences.shape[1]
        x = self.items(sequences) * self.items.embedding_dim**0.5
        x = self.dropout(x + self.positions.weight[-length:])
        x = x * (sequences > 0).unsqueeze(-1)  # pads carry nothing, not even a position
        causal = self.causal[:length, :length]
        return self.norm(self.blocks(x, mask=causal, is_causal=True))


class SASRec:
    """The module doc's model and training; `score` = last hidden state x item embeddings."""

    def __init__(
        self,
        max_length: int = 50,
        dim: int = 64,
        num_blocks: int = 2,
        dropout: float = 0.2,
        negatives: int = 256,
        batch_size: int = 128,
        learning_rate: float = 1e-3,
        target_only: bool = True,
        budget: FitBudget = DEFAULT_BUDGET,
        seed: int = 0,
        memo: Memo | None = None,
    ) -> None:
        self.max_length, self.dim, self.num_blocks = max_length, dim, num_blocks
        self.dropout = dropout
        self.negatives, self.batch_size, self.learning_rate = negatives, batch_size, learning_rate
        self.target_only, self.budget, self.seed = target_only, budget, seed
        self.memo = memo or Memo()  # holds fits a longer one continues (`Fits`)
        self.sequences = torch.zeros(0, max_length + 1, dtype=torch.long)  # [users, n + 1]
        self.network: SASRecNetwork | None = None
        self.known = torch.zeros(0, dtype=torch.bool)

    def user_sequences(self, history: Interactions) -> Tensor:
        """Each user's last `max_length` + 1 items (the module doc's rule), left-padded with 0,
        items as id + 1. Shapes: -> [num_users, max_length + 1] long."""
        keep = (
            history.stage == history.num_stages - 1
            if self.target_only
            else torch.ones_like(history.user, dtype=torch.bool)
        )
        user, item, time = history.user[keep], history.item[keep], history.time[keep]
        order = torch.arange(len(user))
        for key in (item, time, user):  # stable sorts: by user, then time, then item
            order = order[torch.sort(key[order], stable=True).indices]
        user, item = user[order], item[order]
        step = torch.ones_like(user, dtype=torch.bool)
        step[1:] = (user[1:] != user[:-1]) | (item[1:] != item[:-1])
        user, item = user[step], item[step]
        count = torch.bincount(user, minlength=history.num_users)
        back = (torch.cumsum(count, 0) - 1)[user] - torch.arange(len(user))  # 0 = most recent
        width = self.max_length + 1
        sequences = torch.zeros(history.num_users, width, dtype=torch.long)
        recent = back < width
        sequences[user[recent], width - 1 - back[recent]] = item[recent] + 1
        return sequences

    def fit(self, history: Interactions) -> None:
        """Train for the budget (module doc); a longer fit continues a shorter one (`Fits`)."""
        self.sequences = sequences = self.user_sequences(history)
        self.known = torch.zeros(history.num_items, dtype=torch.bool)
        self.known[sequences[sequences > 0] - 1] = True
        known = self.known.nonzero().flatten() + 1
        trainable = ((sequences > 0).sum(1) >= 2).nonzero().flatten()

        def start() -> tuple[SASRecNetwork, torch.optim.Optimizer, torch.Generator]:
            torch.manual_seed(self.seed)
            generator = torch.Generator().manual_seed(self.seed)
            network = SASRecNetwork(
                history.num_items, self.max_length, self.dim, self.num_blocks, self.dropout
            )
            optimizer = torch.optim.Adam(
                network.parameters(), lr=self.learning_rate, betas=(0.9, 0.98), fused=True
            )
            return network, optimizer, generator

        def step(state: tuple[SASRecNetwork, torch.optim.Optimizer, torch.Generator]) -> None:
            network, optimizer, generator = state
            network.train()  # a fit continued was left in eval mode
            users = trainable[
                torch.randint(len(trainable), (self.batch_size,), generator=generator)
            ]
            inputs, targets = sequences[users, :-1], sequences[users, 1:]
            negative = known[torch.randint(len(known), (self.negatives,), generator=generator)]
            real = (inputs > 0) & (targets > 0)
            hidden = network(inputs)[real]  # [P, dim]
            positive = targets[real]
            logits = torch.cat(
                [
                    (hidden * network.items(positive)).sum(-1, keepdim=True),
                    (hidden @ network.items(negative).T).masked_fill(
                        negative == positive.unsqueeze(1), float("-inf")
                    ),
                ],
                dim=1,
            )
            loss = nn.functional.cross_entropy(logits, torch.zeros_like(positive))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()  # no gradients held between steps (`Fits` keeps the fit)

        fits = self.memo.get("sasrec_fits", history.lineage[:1], Fits)
        setting = (self.max_length, self.dim, self.num_blocks, self.dropout, self.negatives)
        budget = self.budget if len(trainable) else replace(self.budget, steps=0)
        key = (history.lineage, *setting, self.batch_size, self.learning_rate, self.target_only)
        self.network = fits.train((*key, self.seed), budget, start, step)[0]
        self.network.eval()

    @torch.no_grad()
    def score(self, users: Tensor) -> Tensor:
        assert self.network is not None, "fit first"
        sequences = self.sequences[users, 1:]
        hidden = self.network(sequences)[:, -1]
        scores = hidden @ self.network.items.weight[1:].T
        scores = scores.masked_fill(~self.known, UNSCORED)
        return scores.masked_fill((sequences[:, -1] == 0).unsqueeze(1), 0.0)
