"""What the evaluation's rankers read: the signal kinds, which are blind on new items, and the
ranker views (`ablations.VIEWS`) as the signals each leaves out (or adds)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hier_pipeline.evaluation.ablations import (
    COUNTS_ONLY,
    NO_COLD_ITEMS,
    NO_CONTENT_SIGNAL,
    NO_CONTENT_VIEW_SIGNAL,
    NO_EMBEDDING_SIGNAL,
    NO_LISTING,
    NO_PATHS_SIGNAL,
    NO_REPRESENTATION,
    NO_TOKEN_SHARES,
    NO_TOKEN_SIGNAL,
    WITH_CONTENT_POPULARITY,
    WITH_NEW_ITEM_CANDIDATES,
)
from hier_pipeline.ranker.ranker import RankerConfig

# The ranker's signals (`hier_pipeline.ranker`, module doc): tokens where there is a tree,
# content where the items have some.
EMBEDDING, TOKEN_OVERLAP = "embedding", "tokens"
# Per level of the tree, the user's share of engagement in the item's token
# (`hier_pipeline.interests.shares`): one signal per level, named `token_share_L<level>`.
TOKEN_SHARES = "token_shares"
# The user's embedding against the item's content view: learned, yet the same for an item with
# events and one without (`TrainConfig.content_ranking_weight` trains the view for it).
CONTENT_VIEW = "content_view"
CONTENT_PROFILE, CONTENT_NEIGHBOURS = "content_profile", "content_neighbours"
CONTENT = (CONTENT_PROFILE, CONTENT_NEIGHBOURS)
# How the rest of the database links a user to an item (`hier_pipeline.ranker.paths`): one
# signal per foreign-key path, named `path:<tables between>`; none where the schema has none.
PATHS = "paths"
# Each item's popularity predicted from its content: the similarity-weighted mean of log1p of
# the target-stage events lately of its nearest items by content, itself left out. The same for
# every user, so its top list is a candidate source of its own: what sells now among items like
# these, a new item included, which has content and no events (issue 18, item 3: a popularity
# prior "predicted from content for cold ones"). Not among `SIGNALS` until measured.
CONTENT_POPULARITY = "content_popularity"
PATH_HALF_LIFE_DAYS = 28.0  # a linking row's weight halves every so often: the bags' half-life
SIGNALS = (EMBEDDING, TOKEN_OVERLAP, TOKEN_SHARES, CONTENT_VIEW, *CONTENT, PATHS)
# Learned from events, so blind on an item without one (`InterestRanker.candidates`): the tree's
# leaves are grown on the model's item vectors. The token shares are not: they are the user's
# (from events), and an item's token comes mostly from its content (a new item's code from
# content alone is the one it gets after its first week of events in 98% of cases,
# docs/interests.md).
BEHAVIOURAL = (EMBEDDING, TOKEN_OVERLAP)
# The kNN form's neighbours per item: the middle of the content-kNN baseline's grid (10, 200),
# not tuned here; both forms decay the user's events with the grid's middle half-life.
CONTENT_KNN = {CONTENT_PROFILE: None, CONTENT_NEIGHBOURS: 100}
CONTENT_HALF_LIFE_DAYS = 30.0
# The new items each content signal adds as candidates in the `WITH_NEW_ITEM_CANDIDATES` view:
# a fifth of its top list.
NEW_ITEM_CANDIDATES = 20
# The token shares' tie-break between items of one token (`OurModels.signals`): at most this.
TIE_BREAK = 1e-6


@dataclass(frozen=True)
class RankerSetup:
    """Which signals a ranker sees, and whether new items are ranked by construction (the
    behavioural signals blind on them, some items shown as new in the fit: `hier_pipeline.ranker`)
    or as the fit window alone teaches."""

    signals: tuple[str, ...] = SIGNALS
    simulate_cold: bool = True
    new_item_candidates: int = 0  # `RankerConfig.new_item_candidates`
    listing: bool = True  # `RankerConfig.listing`

    @property
    def behavioural(self) -> tuple[str, ...]:
        """The signals blind on new items."""
        return BEHAVIOURAL if self.simulate_cold else ()

    def configured(self, config: RankerConfig) -> RankerConfig:
        """`config` with this setup's new-item candidates and listing times, and no item shown as
        new where new items are not simulated."""
        config = replace(config, new_item_candidates=self.new_item_candidates, listing=self.listing)
        return config if self.simulate_cold else replace(config, cold_item_rate=0.0)


def _without(*left_out: str) -> RankerSetup:
    return RankerSetup(tuple(s for s in SIGNALS if s not in left_out))


FULL = RankerSetup()
RANKER_VIEWS = {  # the ranker views among `VIEWS`
    NO_EMBEDDING_SIGNAL: _without(EMBEDDING),
    NO_TOKEN_SIGNAL: _without(TOKEN_OVERLAP, TOKEN_SHARES),
    NO_TOKEN_SHARES: _without(TOKEN_SHARES),
    NO_CONTENT_SIGNAL: _without(*CONTENT),
    NO_CONTENT_VIEW_SIGNAL: _without(CONTENT_VIEW),
    NO_PATHS_SIGNAL: _without(PATHS),
    NO_REPRESENTATION: _without(EMBEDDING, TOKEN_OVERLAP, TOKEN_SHARES, CONTENT_VIEW),
    COUNTS_ONLY: RankerSetup(()),
    NO_COLD_ITEMS: RankerSetup(simulate_cold=False),
    NO_LISTING: RankerSetup(listing=False),
    WITH_CONTENT_POPULARITY: RankerSetup((*SIGNALS, CONTENT_POPULARITY)),
    WITH_NEW_ITEM_CANDIDATES: RankerSetup(new_item_candidates=NEW_ITEM_CANDIDATES),
}
