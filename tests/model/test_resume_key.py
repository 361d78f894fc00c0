"""The checkpoint folder of `interest_model` is found again by a rerun of the same training."""

from __future__ import annotations

import os
from pathlib import Path

from hier_pipeline.model.checkpoint import resume_key


def test_same_config_and_inputs_resume_a_rewritten_input_or_new_config_does_not(
    tmp_path: Path,
) -> None:
    graph, content = tmp_path / "graph.pt", tmp_path / "content.pt"
    graph.write_bytes(b"graph")
    content.write_bytes(b"content")
    params = {"epochs": 4, "model.dim": 64}
    key = resume_key(params, [graph, content])

    assert resume_key(dict(params), [graph, content]) == key
    assert resume_key({**params, "epochs": 5}, [graph, content]) != key
    stat = graph.stat()
    os.utime(graph, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert resume_key(params, [graph, content]) != key
