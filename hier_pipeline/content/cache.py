"""Content-hash embedding cache: each distinct text or image is embedded once, ever.

Layout: one folder per encoder version, holding immutable Parquet segments
(``part-*.parquet``; columns ``key`` = sha256 digest, ``vector`` = fixed-size float32 list).
A run that computes anything writes one new segment with `atomic_path` (temp name, fsync,
rename), so a crash leaves either the old cache or the old cache plus one complete segment, never
a half-written file that readers pick up. Segments that still fail to read (disk damage,
a file copied in by hand) are renamed ``*.corrupt`` and their items recomputed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hier_pipeline.files.atomic import atomic_path, partial_files

log = logging.getLogger(__name__)

_STALE_TMP_SECONDS = 3600.0


@dataclass
class EncodeResult:
    """What an encoder returns for a batch: vectors, which rows are real, and why the rest failed.

    Rows with ``ok[i] == False`` are zero placeholders; ``reasons[i]`` says what went wrong.
    """

    vectors: np.ndarray
    ok: np.ndarray
    reasons: list[str | None]


@dataclass
class CacheStats:
    """Counts are over distinct items (by content hash); ``misses`` is what was actually encoded."""

    items: int = 0
    unique: int = 0
    hits: int = 0
    misses: int = 0
    failed: int = 0
    compute_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def per_second(self) -> float:
        """Encoding throughput over the items actually encoded (0 when nothing was)."""
        return self.misses / self.compute_seconds if self.compute_seconds else 0.0

    def add(self, other: CacheStats) -> None:
        """Accumulate another call's counts and times (for chunked runs)."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class EmbeddingCache:
    """On-disk map sha256(encoder id + item bytes) -> vector, for one encoder version.

    Readers take no lock. Several writer processes are safe for ``get_or_compute`` (each writes
    its own segment; duplicates are harmless); ``compact`` assumes no concurrent writer.
    """

    def __init__(self, root: Path, encoder_id: str, dim: int, max_segments: int = 64) -> None:
        self.encoder_id = encoder_id
        self.dim = dim
        self.max_segments = max_segments
        slug = "".join(c if c.isalnum() else "-" for c in encoder_id.split("/")[0])[:40]
        digest = hashlib.sha256(encoder_id.encode()).hexdigest()[:12]
        # A new weights/config id gets a fresh folder, so stale vectors are never even scanned.
        self.folder = Path(root) / f"{slug}-{digest}"
        self.folder.mkdir(parents=True, exist_ok=True)
        self._prefix = encoder_id.encode() + b"\0"

    def key(self, item: bytes) -> bytes:
        """Content hash of one item under this encoder version."""
        return hashlib.sha256(self._prefix + item).digest()

    def segments(self) -> list[Path]:
        """Complete segments, oldest first (temp files are never listed)."""
        return sorted(self.folder.glob("part-*.parquet"))

    def lookup(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Vectors for those of ``keys`` already cached."""
        wanted = list(set(keys))
        found: dict[bytes, np.ndarray] = {}
        for path in self.segments() if wanted else []:
            for k, v in zip(*self._read(path, wanted), strict=True):
                found.setdefault(k, v)
        return found

    def put(self, keys: Sequence[bytes], vectors: np.ndarray) -> Path | None:
        """Atomically add one segment; returns its path (None when there is nothing to add)."""
        if not keys:
            return None
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel())
        table = pa.table(
            {
                "key": pa.array(list(keys), pa.binary()),
                "vector": pa.FixedSizeListArray.from_arrays(flat, self.dim),
            }
        )
        name = f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
        return self._write_atomic(table, self.folder / name)

    def get_or_compute(
        self, items: Sequence[bytes], compute: Callable[[list[bytes]], EncodeResult]
    ) -> tuple[EncodeResult, CacheStats]:
        """Vectors for ``items`` in order; ``compute`` sees only distinct uncached items.

        Failed items (``ok`` False) are not cached, so a fixed file is picked up next run.
        """
        start = time.perf_counter()
        keys = [self.key(item) for item in items]
        first: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        found = self.lookup(list(first))
        todo = [k for k in first if k not in found]
        stats = CacheStats(items=len(items), unique=len(first), hits=len(found), misses=len(todo))
        reasons: dict[bytes, str | None] = {}
        if todo:
            t0 = time.perf_counter()
            result = compute([items[first[k]] for k in todo])
            stats.compute_seconds = time.perf_counter() - t0
            good = [j for j in range(len(todo)) if result.ok[j]]
            self.put([todo[j] for j in good], result.vectors[good])
            found.update({todo[j]: result.vectors[j] for j in good})
            reasons = {todo[j]: result.reasons[j] for j in range(len(todo)) if not result.ok[j]}
            stats.failed = len(reasons)
            if len(self.segments()) > self.max_segments:
                self.compact()
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        ok = np.zeros(len(items), dtype=bool)
        for i, k in enumerate(keys):
            if k in found:
                out[i], ok[i] = found[k], True
        stats.seconds = time.perf_counter() - start
        return EncodeResult(out, ok, [reasons.get(k) for k in keys]), stats

    def compact(self) -> None:
        """Merge all segments into one (drops duplicates) and clear temp files of dead writers.

        Holds the whole cache in memory once (twice, briefly): fine up to ~1e6 text vectors.
        """
        now = time.time()
        for partial in partial_files(self.folder):
            with contextlib.suppress(FileNotFoundError):  # a live writer just renamed it
                if now - partial.stat().st_mtime > _STALE_TMP_SECONDS:
                    partial.unlink()
        old = self.segments()
        if len(old) < 2:
            return
        merged: dict[bytes, np.ndarray] = {}  # equal keys mean equal content: keep any copy
        for path in old:
            merged.update(zip(*self._read(path), strict=True))
        if merged:
            self.put(list(merged), np.stack(list(merged.values())))
        for path in old:
            path.unlink(missing_ok=True)

    def _read(
        self, path: Path, wanted: list[bytes] | None = None
    ) -> tuple[list[bytes], np.ndarray]:
        """A segment's keys and vectors (only ``wanted`` ones if given). A damaged segment is
        renamed ``*.corrupt`` and reads as empty, so its items are simply recomputed."""
        empty: tuple[list[bytes], np.ndarray] = ([], np.zeros((0, self.dim), np.float32))
        try:
            table = pq.read_table(path, filters=None if wanted is None else [("key", "in", wanted)])
            return table.column("key").to_pylist(), self._vectors(table)
        except FileNotFoundError:
            return empty  # merged away by a concurrent compact(); worst case we recompute
        except (pa.ArrowException, ValueError) as err:
            log.warning("embedding cache: unreadable segment %s quarantined (%s)", path, err)
            with contextlib.suppress(FileNotFoundError):
                path.replace(path.with_suffix(".corrupt"))
            return empty

    def _vectors(self, table: pa.Table) -> np.ndarray:
        """The ``vector`` column as an (n, dim) float32 array, checked against ``dim``."""
        column = table.column("vector").combine_chunks()
        if not pa.types.is_fixed_size_list(column.type) or column.type.list_size != self.dim:
            raise ValueError(f"vector column is {column.type}, expected {self.dim} float32")
        values = column.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        return values.reshape(len(column), self.dim)

    def _write_atomic(self, table: pa.Table, target: Path) -> Path:
        """Readers see the whole segment or nothing (see `atomic_path`)."""
        with atomic_path(target) as partial, open(partial, "wb") as f:
            pq.write_table(table, f)
        return target
