"""Which database the pipeline learns from."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field

from hier_pipeline.dataset import DatasetSpec, parse_dataset
from hier_pipeline.dataset.arrivals import with_batches
from hier_pipeline.files.home import default_home
from hier_pipeline.pipeline.source import SYNTHETIC, dataset_folder


class DatasetResource(dg.ConfigurableResource):
    """The embedded synthetic world by default, or any folder that holds a dataset.yaml."""

    source: str = Field(
        default=SYNTHETIC,
        description="'synthetic' for the embedded world with a planted interest hierarchy, or the"
        " path of a folder holding dataset.yaml",
    )
    synthetic_scale: float = Field(
        default=1.0, description="size of the synthetic world (1.0: ~2k users)"
    )
    synthetic_seed: int = Field(default=0, description="seed of the synthetic world")
    cache_dir: str = Field(
        default="", description="where the synthetic world is written; empty: $HIER_HOME/datasets"
    )

    def folder(self) -> Path:
        cache = Path(self.cache_dir).resolve() if self.cache_dir else default_home() / "datasets"
        return dataset_folder(
            self.source, cache, scale=self.synthetic_scale, seed=self.synthetic_seed
        )

    def spec(self) -> DatasetSpec:
        """The description, with every batch that arrived in `incoming/` read after its table."""
        return with_batches(parse_dataset(self.folder()))
