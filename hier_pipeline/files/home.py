"""Where the pipeline keeps its outputs when nobody says otherwise."""

from __future__ import annotations

import os
from pathlib import Path

HOME_VARIABLE = "HIER_HOME"


def default_home() -> Path:
    """`$HIER_HOME`, else `.hier/` in the working directory (git-ignored)."""
    return Path(os.environ.get(HOME_VARIABLE, ".hier")).resolve()
