"""Saved tensors are only ever read with `torch.load(weights_only=True)`: a checkpoint that carries
pickled code is refused by every loader, and the code never runs."""

from __future__ import annotations

import ast
import pickle
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from hier_pipeline.content.tables import ContentArtifact
from hier_pipeline.graph import load_graph
from hier_pipeline.interests.artifact import load_hierarchy, load_tokens
from hier_pipeline.model.embeddings import EmbeddingArtifact

REPO = Path(__file__).resolve().parents[2]
LOADERS: dict[str, Callable[[Path], object]] = {
    "graph": load_graph,
    "content": lambda path: ContentArtifact(path).load(),
    "embeddings": lambda path: EmbeddingArtifact(path, 0, {}).load(),
    "hierarchy": load_hierarchy,
    "tokens": load_tokens,
}


class _Payload:
    """Unpickling this calls `open(marker, "w")`: any code could run in its place."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return open, (str(self.marker), "w")


@pytest.fixture
def malicious(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "pwned"
    path = tmp_path / "checkpoint.pt"
    torch.save({"tensors": {"x": torch.zeros(2)}, "hook": _Payload(marker)}, path)
    return path, marker


def test_the_payload_would_run_if_unpickled(malicious: tuple[Path, Path]) -> None:
    path, marker = malicious
    torch.load(path, weights_only=False)
    assert marker.exists()


@pytest.mark.parametrize("loader", LOADERS.values(), ids=list(LOADERS))
def test_every_loader_refuses_pickled_code(
    malicious: tuple[Path, Path], loader: Callable[[Path], object]
) -> None:
    path, marker = malicious
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        loader(path)
    assert not marker.exists()


def test_every_torch_load_in_the_code_passes_weights_only_true() -> None:
    unsafe = []
    for folder in ("hier_pipeline", "assets", "resources", "benchmarks"):
        for source in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "torch.load"):
                    continue
                flags = {k.arg: k.value for k in node.keywords}
                value = flags.get("weights_only")
                if not (isinstance(value, ast.Constant) and value.value is True):
                    unsafe.append(f"{source.relative_to(REPO)}:{node.lineno}")
    assert not unsafe, f"torch.load without weights_only=True: {unsafe}"
