"""Evaluation: full-ranking metrics (RelBench definitions), baselines and reports."""
