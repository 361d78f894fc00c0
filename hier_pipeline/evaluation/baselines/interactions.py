"""The training-time events every baseline learns from, extracted once from the graph.

An interaction is a positive funnel event (user, item, time, stage) strictly before a cutoff;
explicit "not interested" events are kept apart (`negative_user`, `negative_item`,
`negative_time`): they are never positives, and count only where a profile gives them a weight.
Each event weighs ``w_s = ratio ** (S - 1 - s)`` (``default_stage_weights``: the target stage 1.0,
each shallower stage x0.3, so an impression counts 0.027 of a purchase in a 4-stage funnel);
`with_profile` reweighs them for one baseline's fit (`profiles.py`), while tie-breaks and seen
items keep coming from the unweighted history, so every profile is judged the same way.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from hier_pipeline.evaluation.baselines.profiles import Profile
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.model.losses import default_stage_weights
from hier_pipeline.ranking.metrics import UserItems

DAY = 86_400


def _no_events() -> Tensor:
    return torch.zeros(0, dtype=torch.long)


def sparse(rows: Tensor, cols: Tensor, values: Tensor, shape: tuple[int, int]) -> Tensor:
    """A coalesced sparse COO matrix: entries sorted by row then column, duplicates summed."""
    indices = torch.stack([rows, cols])
    return torch.sparse_coo_tensor(indices, values, shape, check_invariants=False).coalesce()


@contextmanager
def quiet_csr() -> Iterator[None]:
    """Without torch's notices that sparse CSR support is "in beta" and that invariant checks
    are off: printed once a process, so once per baseline worker (`workers.py`)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta")
        warnings.filterwarnings("ignore", "Sparse invariant checks are implicitly disabled")
        yield


def sparse_product(left: Tensor, right: Tensor) -> Tensor:
    """left @ right for sparse operands (only pairs that share an index cost anything), through
    torch's beta CSR kernels (`quiet_csr`)."""
    with quiet_csr():
        return left @ right


def unique_pairs(first: Tensor, second: Tensor) -> tuple[Tensor, Tensor]:
    """`torch.unique(torch.stack([first, second]), dim=1, return_inverse=True)` through one int64
    key per pair: the same pairs in the same (lexicographic) order, where `unique(dim=1)` sorts
    columns 20x slower (36 of TIFU-KNN's 60 s on Complete Journey).

    Shapes: first, second [E] long -> pairs [2, P], inverse [E]."""
    if not len(first):
        return torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, dtype=torch.long)
    low, high = int(second.min()), int(second.max())
    keys, inverse = torch.unique(first * (high - low + 1) + (second - low), return_inverse=True)
    return torch.stack([keys // (high - low + 1), keys % (high - low + 1) + low]), inverse


def csr_entries(rowptr: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    """(position in `rows`, entry index) of every entry of the given CSR rows, row by row.

    Shapes: rowptr [R_all + 1], rows [R] -> [nnz'] each.
    """
    count = rowptr[rows + 1] - rowptr[rows]
    row = torch.repeat_interleave(torch.arange(len(rows)), count)
    first = torch.repeat_interleave(torch.cumsum(count, 0) - count, count)
    return row, torch.repeat_interleave(rowptr[rows], count) + torch.arange(len(row)) - first


@dataclass(frozen=True)
class PairMatrix:
    """A sparse user x item matrix in CSR form: user u's entries are at rowptr[u]:rowptr[u + 1],
    items ascending. Shapes: rowptr [num_users + 1], item [nnz] long, value [nnz] float32.
    """

    rowptr: Tensor
    item: Tensor
    value: Tensor
    num_items: int

    @classmethod
    def from_events(
        cls, user: Tensor, item: Tensor, value: Tensor, num_users: int, num_items: int
    ) -> PairMatrix:
        """Sum the values of repeated (user, item) pairs. Shapes: user, item, value [E]."""
        pairs = sparse(user, item, value, (num_users, num_items))
        rowptr = torch.zeros(num_users + 1, dtype=torch.long)
        torch.cumsum(torch.bincount(pairs.indices()[0], minlength=num_users), 0, out=rowptr[1:])
        return cls(rowptr, pairs.indices()[1], pairs.values(), num_items)

    @property
    def num_users(self) -> int:
        return len(self.rowptr) - 1

    @property
    def user(self) -> Tensor:
        """The user of every entry. Shapes: [nnz]."""
        return torch.repeat_interleave(torch.arange(self.num_users), self.rowptr.diff())

    def with_values(self, value: Tensor) -> PairMatrix:
        return PairMatrix(self.rowptr, self.item, value, self.num_items)

    def dense(self, users: Tensor) -> Tensor:
        """The rows of `users`, dense. Shapes: users [U] -> [U, num_items]."""
        row, entry = csr_entries(self.rowptr, users)
        out = torch.zeros(len(users), self.num_items)
        out[row, self.item[entry]] = self.value[entry]
        return out

    def rows(self, users: Tensor) -> Tensor:
        """The rows of `users` as a sparse matrix: multiplied into an item x item matrix they cost
        their entries, not users x items. Shapes: users [U] -> sparse [U, num_items]."""
        row, entry = csr_entries(self.rowptr, users)
        return sparse(row, self.item[entry], self.value[entry], (len(users), self.num_items))


@dataclass(frozen=True, eq=False)  # identity equality: a history names one fit's data (`Memo`)
class Interactions:
    """Positive events before `before`, in graph node ids, and the "not interested" ones apart.

    Shapes: user, item, time, stage [E] long; weight [E] float32 (the stage's weight);
    negative_user, negative_item, negative_time [N] long. `negative_weight`: what each negative
    event subtracts from its pair in `pair_weights` (0: ignored).
    """

    user: Tensor
    item: Tensor
    time: Tensor
    stage: Tensor
    weight: Tensor
    num_users: int
    num_items: int
    num_stages: int
    before: int
    negative_user: Tensor = field(default_factory=_no_events)
    negative_item: Tensor = field(default_factory=_no_events)
    negative_time: Tensor = field(default_factory=_no_events)
    negative_weight: float = 0.0
    # The history this one reweighs and the profile it applies (`with_profile`), None for one
    # read from the graph: see `lineage`.
    origin: tuple[Interactions, Profile] | None = None

    @property
    def lineage(self) -> tuple[object, ...]:
        """A key for these events that survives recomputing them: (the history reweighed, the
        profile), or this history itself. A `Memo` holds one profiled history at a time, so the
        same profile applied again later is another object with the same lineage."""
        return self.origin if self.origin is not None else (self,)

    @classmethod
    def from_graph(
        cls, graph: RelationalGraph, before: int, stage_weights: Tensor | None = None
    ) -> Interactions:
        """Every funnel event of the `engaged` edges before `before`, negatives kept apart.

        `stage_weights` [S] defaults to `default_stage_weights(S)` (see the module doc).
        """
        meta, data = graph.metadata, graph.data
        engaged = data[meta.engaged]
        past = engaged.edge_time < before
        keep = past & (engaged.edge_stage >= 0) & ~engaged.edge_negative
        negative = past & engaged.edge_negative
        weights = (
            default_stage_weights(len(meta.stages)) if stage_weights is None else stage_weights
        )
        stage = engaged.edge_stage[keep]
        return cls(
            user=engaged.edge_index[0, keep],
            item=engaged.edge_index[1, keep],
            time=engaged.edge_time[keep],
            stage=stage,
            weight=weights.float()[stage],
            num_users=int(data[meta.user_type].num_nodes),
            num_items=int(data[meta.item_type].num_nodes),
            num_stages=len(meta.stages),
            before=before,
            negative_user=engaged.edge_index[0, negative],
            negative_item=engaged.edge_index[1, negative],
            negative_time=engaged.edge_time[negative],
        )

    def with_profile(self, profile: Profile) -> Interactions:
        """The same events weighed by `profile`; events of a stage it weighs 0 are dropped (so a
        target-only profile is the target stage's events alone, for co-occurrence as well)."""
        weight = profile.stage_weights(self.num_stages)[self.stage]
        keep = weight > 0
        return replace(
            self,
            user=self.user[keep],
            item=self.item[keep],
            time=self.time[keep],
            stage=self.stage[keep],
            weight=weight[keep],
            negative_weight=profile.negative,
            origin=(self, profile),
        )

    def pair_weights(self, half_life_days: float | None = None) -> PairMatrix:
        """Sum over each (user, item) pair's events of weight x 2^(-age / half-life), age counted
        back from `before`, minus `negative_weight` (decayed alike) per "not interested" event;
        without a half-life, no decay. A pair can be negative.
        """
        user, item, time = self.user, self.item, self.time
        weight = self.weight
        if self.negative_weight and len(self.negative_user):
            user = torch.cat([user, self.negative_user])
            item = torch.cat([item, self.negative_item])
            time = torch.cat([time, self.negative_time])
            negative = torch.full((len(self.negative_user),), -self.negative_weight)
            weight = torch.cat([weight, negative])
        if half_life_days is not None:
            age_days = (self.before - time).double() / DAY
            weight = weight * torch.exp2(-age_days / half_life_days).float()
        return PairMatrix.from_events(user, item, weight, self.num_users, self.num_items)

    def confidence(self) -> PairMatrix:
        """log1p of the undecayed pair weights (sign kept for negative pairs): repeats count, with
        diminishing returns (grocery baskets repeat staples dozens of times). The matrix the
        collaborative baselines factorise (its positive part) and score from.
        """
        pairs = self.pair_weights()
        return pairs.with_values(pairs.value.sign() * pairs.value.abs().log1p())

    def popularity(self) -> Tensor:
        """Summed event weight per item. Shapes: -> [num_items] float32."""
        return torch.zeros(self.num_items).index_add_(0, self.item, self.weight)

    def active_users(self) -> Tensor:
        """Whether each user has at least one interaction. Shapes: -> [num_users] bool."""
        active = torch.zeros(self.num_users, dtype=torch.bool)
        active[self.user] = True
        return active

    def target_items(self, users: Tensor) -> UserItems:
        """Each of `users`' items with a target-stage event: what "already seen" means.

        Shapes: users [U] node ids -> U rows.
        """
        position = torch.full((self.num_users,), -1, dtype=torch.long)
        position[users] = torch.arange(len(users))
        keep = (self.stage == self.num_stages - 1) & (position[self.user] >= 0)
        return UserItems.from_pairs(
            position[self.user[keep]], self.item[keep], len(users), self.num_items
        )
