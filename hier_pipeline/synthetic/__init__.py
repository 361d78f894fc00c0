"""The embedded default dataset: a seeded synthetic ads/commerce world with a planted hierarchy."""

from hier_pipeline.synthetic.world import SyntheticConfig
from hier_pipeline.synthetic.writer import generate_world

__all__ = ["SyntheticConfig", "generate_world"]
