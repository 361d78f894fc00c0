"""The hash that names a config, apart from `tracking` so that hashing a config never imports
MLflow: checkpoint keys need it on the incremental path, where importing MLflow (and pandas
through it) would dominate a fresh process's start-up."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping


def config_hash(params: Mapping[str, object]) -> str:
    """12 hex digits of the params: runs with the same config share it, so the MLflow UI can
    filter (`tags.config_hash = '...'`) and tell reruns from real changes."""
    text = json.dumps({str(k): str(v) for k, v in params.items()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
