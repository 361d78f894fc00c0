"""Time-sorted CSR over one edge type, and the vectorised draws the temporal sampler makes on it.

Why a CSR of our own: PyG's loaders need pyg-lib or torch-sparse (neither installs cleanly here), and
the question a temporal sampler asks, "which incoming edges of node ``v`` are older than ``t``?", has a
prefix for an answer once each node's incoming edges are sorted by time: a vectorised binary search
inside every frontier node's segment finds all the prefixes at once. (One global ``np.searchsorted``
over ``node * (U + 1) + time_rank`` keys gives the same answer but measured 2x slower on 1.5M edges:
its probes miss the cache across the whole array, where a segment's probes stay inside the segment.)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

Strategy = Literal["uniform", "recent"]


@dataclass(frozen=True)
class TimeSortedCSR:
    """Incoming edges of one edge type, grouped by destination and sorted by usable-from time.

    An edge's usable-from time is ``max(edge_time, time[src], time[dst])``: an edge is reachable
    at seed time ``t`` only if it, and both of its endpoints, were known strictly before ``t``.

    Shapes: ``rowptr`` [N_dst + 1]; ``src``, ``e_id``, ``usable_from`` [E] (in CSR order).
    """

    rowptr: np.ndarray
    src: np.ndarray
    e_id: np.ndarray
    usable_from: np.ndarray

    @classmethod
    def build(
        cls,
        edge_index: np.ndarray,
        edge_time: np.ndarray,
        src_time: np.ndarray,
        dst_time: np.ndarray,
    ) -> TimeSortedCSR:
        """Sort edges by (dst, usable-from time).

        Shapes: ``edge_index`` [2, E]; ``edge_time`` [E]; ``src_time`` [N_src]; ``dst_time`` [N_dst].
        """
        src, dst = edge_index[0], edge_index[1]
        usable = np.maximum(edge_time, np.maximum(src_time[src], dst_time[dst]))
        order = np.lexsort((usable, dst))
        rowptr = np.zeros(len(dst_time) + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=len(dst_time)), out=rowptr[1:])
        return cls(rowptr=rowptr, src=src[order], e_id=order, usable_from=usable[order])

    def renumbered(self, edge_ids: np.ndarray) -> TimeSortedCSR:
        """The same CSR over a subset of an edge type's edges, built from ``edge_ids``' rows:
        its ``e_id`` numbered as in the whole edge type. Shapes: ``edge_ids`` [E]."""
        return replace(self, e_id=edge_ids[self.e_id])

    def valid_range(self, nodes: np.ndarray, before: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Start and count of each node's incoming edges usable strictly before its limit.

        A lower-bound binary search run for all nodes at once, each inside its own segment:
        ``log2(max degree)`` vectorised steps, no loop over nodes.

        Shapes: ``nodes``, ``before`` [M] -> (start [M], count [M]).
        """
        start, low, high = self.rowptr[nodes], self.rowptr[nodes], self.rowptr[nodes + 1]
        while (active := low < high).any():
            middle = (low + high) >> 1
            earlier = self.usable_from[np.where(active, middle, 0)] < before
            low = np.where(active & earlier, middle + 1, low)
            high = np.where(active & ~earlier, middle, high)
        return start, low - start


def ragged_arange(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row and within-row position of every slot of a ragged array with these row lengths.

    Shapes: ``lengths`` [M] -> (row [sum(lengths)], position [sum(lengths)]).
    """
    row = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    first = np.cumsum(lengths) - lengths
    return row, np.arange(int(lengths.sum()), dtype=np.int64) - first[row]


def draw_offsets(
    count: np.ndarray, fanout: int, strategy: Strategy, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Pick up to ``fanout`` distinct offsets in each row's valid prefix ``[0, count)``.

    ``recent`` keeps the last ``fanout`` (the latest edges); ``uniform`` draws a uniform subset
    without replacement with Floyd's algorithm, one vectorised step per draw (``fanout`` steps, no
    loop over rows), so the cost does not grow with a hub node's degree. ``fanout < 0`` keeps all.

    Shapes: ``count`` [M] -> (row [S], offset [S]), ``S = sum(min(count, fanout))``, rows ascending.
    """
    take = count if fanout < 0 else np.minimum(count, fanout)
    row, position = ragged_arange(take)
    if strategy == "recent":
        return row, count[row] - take[row] + position
    offset = position
    crowded = take < count
    if crowded.any():
        size = count[crowded]
        chosen = np.empty((len(size), fanout), dtype=np.int64)
        for step in range(fanout):
            top = size - fanout + step
            pick = rng.integers(0, top + 1)
            taken = (chosen[:, :step] == pick[:, None]).any(axis=1)
            chosen[:, step] = np.where(taken, top, pick)
        offset[crowded[row]] = chosen.reshape(-1)
    return row, offset
