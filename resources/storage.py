"""Where outputs live on disk."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field

from hier_pipeline.files.home import default_home


class StorageResource(dg.ConfigurableResource):
    """Root folder for every file the pipeline writes (DuckDB databases, tensors, checkpoints)."""

    root: str = Field(default="", description="Output folder; empty means $HIER_HOME or ./.hier")

    def path(self, *parts: str) -> Path:
        """A file path under the root, with its parent folder created."""
        target = self._base().joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def folder(self, *parts: str) -> Path:
        """A folder under the root, created."""
        target = self._base().joinpath(*parts)
        target.mkdir(parents=True, exist_ok=True)
        return target

    def _base(self) -> Path:
        return Path(self.root).resolve() if self.root else default_home()
