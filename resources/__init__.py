"""Dagster resources: configurable adapters from the orchestration layer to the core."""

from resources.dataset import DatasetResource
from resources.storage import StorageResource
from resources.tracking import MLflowResource

__all__ = ["DatasetResource", "MLflowResource", "StorageResource"]
