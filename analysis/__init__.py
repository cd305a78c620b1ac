"""Aggregation across runs, statistics, regressions, probing, figures and reports."""
