"""A process that stays up between arrival batches and fits each one as it appears.

A fresh process per batch paid more for itself than for the batch: Python's imports (about 5 s,
`torch_geometric` alone 3-5 s), reading the served state (the graph and content vectors),
loading the model and the text encoder (about 1.2 s). The worker pays them once: it holds the
state a batch is fitted into (`Current`) and what a batch loads (`Loaded`), fits every batch
after the last it handled, in name order, and reads the state again only when a full run or a
release replaced it (`version` changed). `hier arrivals` runs it over the pipeline's outputs;
`update_batch` stays the one-shot path.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path

import torch

from hier_pipeline.content.image_encoder import ImageEncoder
from hier_pipeline.content.text_encoder import TextEncoder
from hier_pipeline.dataset.arrivals import list_batches
from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.graph.store import load_graph
from hier_pipeline.incremental.accumulated import read_state
from hier_pipeline.incremental.update import BatchUpdate, Current, Loaded, update_batch
from hier_pipeline.interests.artifact import TOKENS_FILE, load_tokens


class ArrivalsWorker:
    """Fits batch after batch into the state `read_current` returns, kept in memory until
    `version` changes. `after`: the last batch already handled (None: the last one the
    accumulated state in `work` holds, so a restarted worker does not start over)."""

    def __init__(
        self,
        spec: DatasetSpec,
        read_current: Callable[[], Current],
        version: Callable[[], Hashable],
        work: Path,
        after: str | None = None,
    ) -> None:
        self.spec, self.read_current, self.version, self.work = spec, read_current, version, work
        self.after = after
        self._held: tuple[Hashable, Current, Loaded] | None = None

    def warm_up(self) -> None:
        """Read the state, load the model and the encoders the dataset needs now, before the
        first batch."""
        _, loaded = self.state()
        tables = self.spec.tables.values()
        if any(t.text for t in tables):
            loaded.encoders.text = loaded.encoders.text or TextEncoder()
        if any(t.image for t in tables):
            loaded.encoders.image = loaded.encoders.image or ImageEncoder()

    def state(self) -> tuple[Current, Loaded]:
        """The state and what is loaded for it, read again when `version` changed."""
        version = self.version()
        if self._held is None or self._held[0] != version:
            current = self.read_current()
            if self.after is None:
                handled = read_state(self.work, current.warehouse)
                self.after = max([*handled.accepted, *handled.refused], default=None)
            loaded = Loaded.of(current)
            if self._held is not None:  # the encoders do not depend on the state
                loaded = Loaded(loaded.model, self._held[2].encoders)
            self._held = (version, current, loaded)
        return self._held[1], self._held[2]

    def run(self, batch: str) -> BatchUpdate:
        current, loaded = self.state()
        update = update_batch(self.spec, batch, current, self.work, loaded=loaded)
        self.after = max(self.after or batch, batch)
        return update

    def pending(self) -> list[str]:
        """The batches in incoming/ after the last one handled, in name order."""
        self.state()
        return [b for b in list_batches(self.spec.root) if self.after is None or b > self.after]

    def serve(self, poll_seconds: float, stop: Callable[[], bool]) -> Iterator[BatchUpdate]:
        """Fit each batch as it appears, until `stop()`."""
        while not stop():
            for batch in self.pending():
                yield self.run(batch)
            time.sleep(poll_seconds)


def home_worker(spec: DatasetSpec, home: Path, after: str | None = None) -> ArrivalsWorker:
    """A worker over the outputs the pipeline's assets write under `home`: the warehouse, the
    graph, the content vectors and the serving folder; a full run or a release rewrites one of
    them (each is renamed into place), which changes the version."""
    name = spec.name
    files = {
        "warehouse": home / "warehouse" / f"{name}.duckdb",
        "graph": home / "graphs" / f"{name}.pt",
        "content": home / "content" / f"{name}.pt",
        "serving": home / "serving" / name / TOKENS_FILE,
    }

    def read_current() -> Current:
        return Current(
            warehouse=files["warehouse"],
            graph=load_graph(files["graph"]),
            content=torch.load(files["content"], weights_only=True),
            model=files["serving"].parent / "model.pt",
            tokens=load_tokens(files["serving"]),
            folder=files["serving"].parent,
            content_cache=home / "content_cache",
        )

    def version() -> Hashable:
        return tuple((os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in files.values())

    return ArrivalsWorker(spec, read_current, version, home / "arrivals" / name, after)
