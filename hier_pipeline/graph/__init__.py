"""Relational database -> heterogeneous temporal graph, its time split, storage and sampling."""

from hier_pipeline.graph.artifact import GraphArtifact, foreign_key_counts
from hier_pipeline.graph.build import (
    NEVER,
    GraphConfig,
    GraphMetadata,
    RelationalGraph,
    build_graph,
)
from hier_pipeline.graph.sampler import SampledSubgraph, SamplerConfig, TemporalNeighborSampler
from hier_pipeline.graph.split import (
    TemporalSplit,
    crossing_edges,
    default_split,
    first_engagement_time,
    training_graph,
)
from hier_pipeline.graph.store import load_graph, save_graph

__all__ = [
    "NEVER",
    "GraphArtifact",
    "GraphConfig",
    "GraphMetadata",
    "RelationalGraph",
    "SampledSubgraph",
    "SamplerConfig",
    "TemporalNeighborSampler",
    "TemporalSplit",
    "build_graph",
    "crossing_edges",
    "default_split",
    "first_engagement_time",
    "foreign_key_counts",
    "load_graph",
    "save_graph",
    "training_graph",
]
