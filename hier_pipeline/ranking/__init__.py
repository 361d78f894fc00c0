"""Ranking metrics (RelBench's definitions) and evaluation windows: a foundation both training
(validation) and evaluation stand on, so neither imports the other."""
