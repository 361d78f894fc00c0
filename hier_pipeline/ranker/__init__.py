"""The second stage: candidates from history, embedding and trend, scored by one learned model."""
