"""The trained model as an MLflow pyfunc, registered in the model registry with a signature.

What it serves is inductive inference: rows of (entity_type, node_index) in, unit-norm embeddings
out, each embedded from its features, content and neighbourhood as of `as_of` (default: the end of
the data). The graph and content vectors are large (gigabytes on Complete Journey), so the pyfunc
keeps only the weights and reads those two from where the pipeline materialised them (paths in its
`model_config`); moving the pipeline's storage means re-registering.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np
import pandas as pd
import torch
from mlflow.entities.model_registry import ModelVersion
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.pyfunc import PythonModel
from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema, TensorSpec

from hier_pipeline.graph.sampler import TemporalNeighborSampler
from hier_pipeline.graph.store import load_graph
from hier_pipeline.model.artifact import load_model, load_sampling
from hier_pipeline.model.infer import embed_nodes
from hier_pipeline.model.minibatch import GraphContext
from hier_pipeline.tracking import TrackedRun

PYFUNC_FOLDER = "pyfunc"


def signature(dim: int) -> ModelSignature:
    return ModelSignature(
        inputs=Schema([ColSpec("string", "entity_type"), ColSpec("long", "node_index")]),
        outputs=Schema([TensorSpec(np.dtype(np.float32), (-1, dim))]),
        params=ParamSchema([ParamSpec("as_of", "long", 0)]),  # 0: the end of the data
    )


class EntityEmbedder(PythonModel):
    """Embeddings of any user, advertiser or item, including ones that arrived after training."""

    def load_context(self, context: Any) -> None:
        config = context.model_config
        self.graph = load_graph(Path(config["graph"]))
        self.content = torch.load(config["content"], weights_only=True)
        weights = Path(context.artifacts["weights"])
        self.model = load_model(weights, self.graph, self.content)
        data = self.graph.data
        self.sampler = TemporalNeighborSampler(data, load_sampling(weights))
        self.context = GraphContext.of(
            data, list(data.edge_types), len(self.graph.metadata.stages), self.content
        )
        self.end = 1 + max(int(data[t].time.max()) for t in data.node_types if data[t].num_nodes)

    def predict(
        self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> np.ndarray:
        as_of = int((params or {}).get("as_of") or self.end)
        output = np.zeros((len(model_input), self.model.config.dim), dtype=np.float32)
        for entity_type, rows in model_input.groupby("entity_type", sort=True):
            if entity_type not in self.graph.data.node_types:
                raise ValueError(f"unknown entity_type {entity_type!r}")
            nodes = torch.as_tensor(rows["node_index"].to_numpy(np.int64))
            size = int(self.graph.data[entity_type].num_nodes)
            if len(nodes) and (nodes.min() < 0 or nodes.max() >= size):
                raise ValueError(f"node_index out of range for {entity_type!r} (0..{size - 1})")
            vectors = embed_nodes(
                self.model, self.sampler, self.graph.data, self.context, entity_type, nodes, as_of
            )
            output[model_input.index.get_indexer(rows.index)] = vectors.numpy()
        return output


def register_model(
    run: TrackedRun,
    name: str,
    weights: Path,
    graph: Path,
    content: Path,
    dim: int,
) -> ModelVersion:
    """Log the pyfunc under the run and register a new version of `name` that points at it."""
    with tempfile.TemporaryDirectory(prefix="hier-pyfunc-") as scratch:
        folder = Path(scratch) / PYFUNC_FOLDER
        mlflow.pyfunc.save_model(
            path=str(folder),
            python_model=EntityEmbedder(),
            artifacts={"weights": str(weights)},
            model_config={
                "graph": str(graph.resolve()),
                "content": str(content.resolve()),
            },
            signature=signature(dim),
            pip_requirements=["hier-pipeline"],
        )
        run.client.log_artifacts(run.run_id, str(folder), PYFUNC_FOLDER)
    try:
        run.client.create_registered_model(name)
    except MlflowException as error:
        if error.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
    source = f"{run.client.get_run(run.run_id).info.artifact_uri}/{PYFUNC_FOLDER}"
    return run.client.create_model_version(name, source, run_id=run.run_id)
