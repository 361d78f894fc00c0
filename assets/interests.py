"""Asset group `interests`: the interest hierarchy with its super-graph, and Bag-of-Meaning
tokens."""

import base64
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import dagster as dg

from assets.config import HierarchyLaunchConfig, TokenLaunchConfig
from assets.metadata import markdown_table
from hier_pipeline.content.tables import ContentArtifact
from hier_pipeline.dataset import LoadReport
from hier_pipeline.files.atomic import write_atomically
from hier_pipeline.graph import GraphArtifact
from hier_pipeline.interests.artifact import (
    MAP_FILE,
    HierarchyArtifact,
    TokensArtifact,
    interest_folder,
)
from hier_pipeline.model.embeddings import EmbeddingArtifact
from resources import DatasetResource, StorageResource

if TYPE_CHECKING:
    pass

GROUP = "interests"
TOP_TOKENS = 12  # rows of the top-token table in the UI


@dg.asset(group_name=GROUP, kinds={"pytorch"}, owners=["team:hier-pipeline"])
def interest_hierarchy(
    context: dg.AssetExecutionContext,
    config: HierarchyLaunchConfig,
    dataset: DatasetResource,
    storage: StorageResource,
    raw_tables: LoadReport,
    relational_graph: GraphArtifact,
    entity_embeddings: EmbeddingArtifact,
    content_embeddings: ContentArtifact,
) -> dg.Output[HierarchyArtifact]:
    """Interest primitives at L levels as a tree of semantic IDs: the finest level quantises each
    item's content fused with its embedding, each coarser level merges the interests below it
    by their content, or by the users who engage with them where held-out events clearly say so
    (each finer primitive has one parent; centroids live in the entities' space), and the
    interest super-graph: primitives as nodes, PMI-weighted co-engagement edges from the funnel
    events (deeper stages weigh more) plus parent -> child edges. Where a tree from another
    model is served, the new one is refitted from it, so that its tokens keep their meaning
    (the release counts the ids kept). Its density is compared with the raw user-item graph's,
    and its stability with a tree grown from another seed."""
    from hier_pipeline.interests.build import build_interest_hierarchy
    from hier_pipeline.interests.entities import primary_keys
    from hier_pipeline.interests.matching import load_serving_tree
    from hier_pipeline.release.serving import serving_folder

    spec = dataset.spec()
    started = time.perf_counter()
    item = spec.roles.item
    previous = load_serving_tree(
        serving_folder(storage.folder(), spec.name),
        item,
        primary_keys(raw_tables.database, spec, [item])[item],
        entity_embeddings.load(),
    )
    artifact = build_interest_hierarchy(
        entity_embeddings,
        relational_graph.load(),
        interest_folder(storage.folder(), spec.name),
        config.to_core(),
        content_embeddings.load(),
        previous,
    )
    seconds = time.perf_counter() - started
    context.log.info(
        "grew %s primitives per level in %.1fs", artifact.primitives_per_level, seconds
    )
    rows = [
        (
            f"L{s['level']}",
            s["nodes"],
            f"{s['edges']:,}",
            f"{s['density']:.4f}",
            f"{s['raw_density']:.6f}",
            f"{s['density_ratio']:.1f}x",
            f"{s['self_loop_share']:.2f}",
            f"{agreement['ari']:.3f}",
            f"{agreement['nmi']:.3f}",
        )
        for s, agreement in zip(artifact.supergraph_stats, artifact.stability, strict=True)
    ]
    return dg.Output(
        artifact,
        metadata={
            "path": dg.MetadataValue.path(str(artifact.path)),
            "primitives_per_level": " / ".join(str(n) for n in artifact.primitives_per_level),
            "refitted_from_serving_tree": previous is not None,
            "coarse_levels_merged_on": _merged_on(artifact.merge_share),
            "finest_codes_read": _read(artifact.modalities),
            "seconds": round(seconds, 2),
            "levels": markdown_table(
                [
                    "level",
                    "primitives",
                    "super-graph edges",
                    "density",
                    "raw user-item density",
                    "denser by",
                    "self-loop share",
                    "stability ARI",
                    "stability NMI",
                ],
                rows,
            ),
        },
    )


def _merged_on(share: float | None) -> str:
    """What the coarser levels were merged on, as chosen on held-out events."""
    if share is None:
        return "kept from the serving tree"
    return f"co-engagement {share:.2f}, content {1 - share:.2f} (chosen on held-out events)"


def _read(modalities: tuple[str, ...] | None) -> str:
    """What the finest codes quantise: the model's embedding and the content modalities."""
    if modalities is None:
        return "the embedding (a tree from before trees kept their modalities)"
    return " + ".join(("embedding", *modalities))


@dg.asset(group_name=GROUP, kinds={"pytorch", "parquet"}, owners=["team:hier-pipeline"])
def interest_tokens(
    context: dg.AssetExecutionContext,
    config: TokenLaunchConfig,
    dataset: DatasetResource,
    storage: StorageResource,
    raw_tables: LoadReport,
    relational_graph: GraphArtifact,
    entity_embeddings: EmbeddingArtifact,
    interest_hierarchy: HierarchyArtifact,
) -> dg.Output[TokensArtifact]:
    """A Bag-of-Meaning for every user, advertiser and item, descending the tree
    (`L0:07 L1:07.3 L2:07.3.12`): an item is its code, one token per level; a user holds the
    top-k primitives per level of the items they engaged with, weighted by funnel stage and
    recency (by embedding without events); an advertiser the same over the events on its
    products, else its catalogue's codes. And the vocabulary: per
    token its parent, size, a label of the words that set its items apart (c-TF-IDF over the item
    text) and the items nearest its centroid. `hier interests ...` queries these files."""
    from hier_pipeline.interests.build import build_interest_tokens
    from hier_pipeline.interests.plot import primitive_map

    spec = dataset.spec()
    folder = interest_folder(storage.folder(), spec.name)
    artifact = build_interest_tokens(
        entity_embeddings,
        interest_hierarchy,
        spec,
        raw_tables.database,
        folder,
        config.to_core(),
        graph=relational_graph.load(),
    )
    vocabulary = artifact.vocabulary()
    png = primitive_map(interest_hierarchy.load(), vocabulary["label"].tolist())
    write_atomically(folder / MAP_FILE, png)
    context.log.info("tokens for %s", artifact.counts)
    user_bags = f"{spec.roles.user}_bags"
    top = vocabulary.sort_values([user_bags, "token"], ascending=[False, True]).head(TOP_TOKENS)
    picture = base64.b64encode(png).decode()
    return dg.Output(
        artifact,
        metadata={
            "path": dg.MetadataValue.path(str(artifact.path)),
            "vocabulary": dg.MetadataValue.path(str(artifact.vocabulary_path)),
            "entities": dg.MetadataValue.json(artifact.counts),
            "tokens_per_level": markdown_table(
                ["level", "tokens", "coverage", "entropy", "entities with a token"],
                (
                    (
                        f"L{u['level']}",
                        u["tokens"],
                        f"{u['coverage']:.2f}",
                        f"{u['entropy']:.3f}",
                        f"{u['entities_with_token']:.2%}",
                    )
                    for u in artifact.usage
                ),
            ),
            "top_tokens": markdown_table(
                ["token", "label", "items", f"{spec.roles.user} holding it", "example items"],
                (
                    (token, label, items, holders, ", ".join(examples))
                    for token, label, items, holders, examples in top[
                        ["token", "label", "items", user_bags, "examples"]
                    ].itertuples(index=False, name=None)
                ),
            ),
            "primitive_map": dg.MetadataValue.md(f"![primitives](data:image/png;base64,{picture})"),
            "primitive_map_file": dg.MetadataValue.path(str(folder / MAP_FILE)),
        },
    )


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            "tree_is_valid",
            asset="interest_hierarchy",
            blocking=True,
            description="Each finer primitive has one parent one level up; every item's path is"
            " nested; centroids are unit length; token ids are unique.",
        ),
        dg.AssetCheckSpec(
            "no_empty_coarse_primitive",
            asset="interest_hierarchy",
            blocking=True,
            description="Every primitive of the coarsest level holds items.",
        ),
    ],
    ins={"interest_hierarchy": dg.AssetIn("interest_hierarchy")},
)
def interest_hierarchy_checks(
    interest_hierarchy: HierarchyArtifact,
) -> Iterator[dg.AssetCheckResult]:
    hierarchy = interest_hierarchy.load()
    violations = hierarchy.violations()
    yield dg.AssetCheckResult(
        check_name="tree_is_valid",
        passed=not any(violations.values()),
        metadata={"violations": dg.MetadataValue.json(violations)},
    )
    coarse = hierarchy.sizes()[hierarchy.level(0)]
    yield dg.AssetCheckResult(
        check_name="no_empty_coarse_primitive",
        passed=bool((coarse > 0).all()),
        metadata={"empty": int((coarse == 0).sum()), "smallest": int(coarse.min())},
    )


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            "every_entity_has_tokens_at_every_level",
            asset="interest_tokens",
            blocking=True,
            description="Each user, advertiser and item holds at least one token per level.",
        ),
        dg.AssetCheckSpec(
            "every_token_parent_exists",
            asset="interest_tokens",
            blocking=True,
            description="Each token's parent is a vocabulary token one level up.",
        ),
    ],
    ins={"interest_tokens": dg.AssetIn("interest_tokens")},
)
def interest_token_checks(interest_tokens: TokensArtifact) -> Iterator[dg.AssetCheckResult]:
    from hier_pipeline.interests.vocabulary import orphan_tokens

    missing = {t: bags.missing_levels() for t, bags in interest_tokens.load().bags.items()}
    yield dg.AssetCheckResult(
        check_name="every_entity_has_tokens_at_every_level",
        passed=not any(missing.values()),
        metadata={"entities_missing_a_level": dg.MetadataValue.json(missing)},
    )
    orphans = orphan_tokens(interest_tokens.vocabulary())
    yield dg.AssetCheckResult(
        check_name="every_token_parent_exists",
        passed=not orphans,
        metadata={"orphans": dg.MetadataValue.json(orphans[:20]), "count": len(orphans)},
    )
