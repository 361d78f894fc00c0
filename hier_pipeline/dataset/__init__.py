"""The input contract: parse a dataset folder's `dataset.yaml`, validate it against its files, and load
accepted rows into DuckDB with every rejected row quarantined and counted."""

from hier_pipeline.dataset.errors import DatasetError
from hier_pipeline.dataset.loader import LoadConfig, load_dataset
from hier_pipeline.dataset.parse import parse_dataset
from hier_pipeline.dataset.report import LoadReport, TableReport
from hier_pipeline.dataset.spec import DatasetSpec, EventView, Roles, TableSpec
from hier_pipeline.files.lock import DatabaseInUseError

__all__ = [
    "DatabaseInUseError",
    "DatasetError",
    "DatasetSpec",
    "EventView",
    "LoadConfig",
    "LoadReport",
    "Roles",
    "TableReport",
    "TableSpec",
    "load_dataset",
    "parse_dataset",
]
