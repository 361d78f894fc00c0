"""The interests stage end to end, as the assets, the command line and benchmarks run it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from torch import Tensor

from hier_pipeline.dataset.spec import DatasetSpec
from hier_pipeline.graph.build import RelationalGraph
from hier_pipeline.interests.artifact import (
    HIERARCHY_FILE,
    HierarchyArtifact,
    Tokens,
    TokensArtifact,
    save_hierarchy,
    save_tokens,
)
from hier_pipeline.interests.engaged import entity_bags
from hier_pipeline.interests.entities import item_categories, item_texts, primary_keys
from hier_pipeline.interests.events import funnel_events, item_owners, no_events
from hier_pipeline.interests.hierarchy import HierarchyConfig, build_hierarchy
from hier_pipeline.interests.labels import common_values, distinctive_words, nearest_members
from hier_pipeline.interests.matching import ServingTree
from hier_pipeline.interests.prior import engagement_mass
from hier_pipeline.interests.quality import level_agreement
from hier_pipeline.interests.supergraph import build_supergraph, supergraph_stats
from hier_pipeline.interests.tokens import TokenConfig
from hier_pipeline.interests.vocabulary import usage_stats, vocabulary_table
from hier_pipeline.model.embeddings import EmbeddingArtifact


def build_interest_hierarchy(
    embeddings: EmbeddingArtifact,
    graph: RelationalGraph,
    folder: Path,
    config: HierarchyConfig,
    content: Mapping[str, Mapping[str, Tensor]] | None = None,
    previous: ServingTree | None = None,
) -> HierarchyArtifact:
    """The tree over the items (their embeddings fused with their content, where `content` has
    the item table; coarser levels from every funnel event; refitted from the serving tree's
    `previous` tree where given, reading its modalities), the super-graph of the funnel events,
    and the stability of the tree: its agreement per level with a second tree grown afresh from
    the next seed, on the modalities and merges the first chose."""
    meta = graph.metadata
    vectors = embeddings.load()
    items = vectors[meta.item_type]
    item_content = None if content is None else content.get(meta.item_type)
    events = funnel_events(graph)
    if previous is not None and previous.modalities is not None:
        config = replace(config, modalities=previous.modalities)
    members = None if previous is None else previous.members
    hierarchy = build_hierarchy(items, config, item_content, events, members)
    supergraph = build_supergraph(
        graph, hierarchy.path(vectors[meta.user_type]), hierarchy.members, hierarchy
    )
    chosen = config.merge_shares if hierarchy.merge_share is None else (hierarchy.merge_share,)
    again = replace(
        config, seed=config.seed + 1, merge_shares=chosen, modalities=hierarchy.modalities
    )
    other = build_hierarchy(items, again, item_content, events)
    stability = [
        level_agreement(hierarchy.members[:, level], other.members[:, level])
        for level in range(hierarchy.levels)
    ]
    stats = supergraph_stats(supergraph, hierarchy, graph)
    return save_hierarchy(hierarchy, supergraph, folder / HIERARCHY_FILE, stats, stability)


def build_interest_tokens(
    embeddings: EmbeddingArtifact,
    hierarchy: HierarchyArtifact,
    spec: DatasetSpec,
    database: Path,
    folder: Path,
    config: TokenConfig,
    examples: int = 3,
    graph: RelationalGraph | None = None,
) -> TokensArtifact:
    """Bags for every embedded entity (`entity_bags`: users from every funnel event of `graph`,
    advertisers from the events on their products or else their catalogue; without `graph`, by
    embedding), and the vocabulary: labels from the item table in the warehouse
    (categorical values most items share, then distinctive words), examples keyed by the items'
    primary keys."""
    tree = hierarchy.load()
    vectors = embeddings.load()
    roles = {"user": spec.roles.user, "item": spec.roles.item}
    events = no_events() if graph is None else funnel_events(graph)
    as_of = int(events.time.max()) + 1 if len(events) else 0
    owners = {}
    if graph is not None and spec.roles.advertiser is not None:
        owner = item_owners(graph, spec.roles.advertiser)
        owners = {} if owner is None else {spec.roles.advertiser: owner}
    bags = entity_bags(vectors, tree, events, roles, config, as_of, owners)
    keys = primary_keys(database, spec, list(vectors))
    item_keys = keys[spec.roles.item]
    nearest = nearest_members(vectors[spec.roles.item], tree, examples)
    vocabulary = vocabulary_table(
        tree,
        bags,
        [
            named + words
            for named, words in zip(
                common_values(item_categories(database, spec), tree),
                distinctive_words(item_texts(database, spec), tree),
                strict=True,
            )
        ],
        [[item_keys[i] for i in members] for members in nearest],
    )
    if spec.roles.advertiser is not None:
        roles["advertiser"] = spec.roles.advertiser
    mass = engagement_mass(events, len(item_keys), as_of, config.half_life_days)
    tokens = Tokens(bags, keys, roles, embeddings.path, hierarchy.path, mass)
    return save_tokens(tokens, vocabulary, folder, usage_stats(tree, bags))
