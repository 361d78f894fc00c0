"""Turn a dataset source ("synthetic" or a folder) into a folder that holds a dataset.yaml."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hier_pipeline.dataset.errors import DatasetError

SYNTHETIC = "synthetic"


def dataset_folder(source: str, cache: Path, *, scale: float = 1.0, seed: int = 0) -> Path:
    """The folder for `source`; the synthetic world is generated once per (scale, seed) and reused."""
    if source != SYNTHETIC:
        folder = Path(source).expanduser().resolve()
        if not (folder / "dataset.yaml").is_file():
            raise DatasetError("no dataset.yaml in the dataset folder", file=str(folder))
        return folder
    from hier_pipeline.synthetic import SyntheticConfig, generate_world

    folder = cache / f"synthetic_scale{scale:g}_seed{seed}"
    if (folder / "dataset.yaml").is_file():
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".partial-", dir=cache))
    try:
        generate_world(scratch, SyntheticConfig(scale=scale, seed=seed))
        os.replace(scratch, folder)  # atomic: a crash never leaves a half-written world behind
    except OSError:
        if not (folder / "dataset.yaml").is_file():  # another process may have won the race
            raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder
