"""Interest primitives at L levels as a tree, the interest super-graph, Bag-of-Meaning tokens and
retrieval over them.

Light on purpose (torch and pandas only) so that `hier interests ...` answers quickly; the stage
that builds everything from a graph and its embeddings is `hier_pipeline.interests.build`, the
agreement metrics are in `hier_pipeline.interests.quality`.
"""

from hier_pipeline.interests.artifact import (
    HierarchyArtifact,
    Tokens,
    TokensArtifact,
    find_interest_folder,
    interest_folder,
)
from hier_pipeline.interests.hierarchy import (
    HierarchyConfig,
    InterestHierarchy,
    build_hierarchy,
    level_sizes,
)
from hier_pipeline.interests.index import (
    Explanation,
    Interest,
    InterestIndex,
    Match,
    SharedInterest,
    UnknownEntityError,
)
from hier_pipeline.interests.kmeans import KMeansConfig, spherical_kmeans
from hier_pipeline.interests.supergraph import SuperGraph
from hier_pipeline.interests.tokens import InvertedIndex, TokenBags, TokenConfig, assign_tokens

__all__ = [
    "Explanation",
    "HierarchyArtifact",
    "HierarchyConfig",
    "Interest",
    "InterestHierarchy",
    "InterestIndex",
    "InvertedIndex",
    "KMeansConfig",
    "Match",
    "SharedInterest",
    "SuperGraph",
    "TokenBags",
    "TokenConfig",
    "Tokens",
    "TokensArtifact",
    "UnknownEntityError",
    "assign_tokens",
    "build_hierarchy",
    "find_interest_folder",
    "interest_folder",
    "level_sizes",
    "spherical_kmeans",
]
