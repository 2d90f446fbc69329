"""Serving: which model is served, the baseline read from it, the push to it, and the rollout's
record."""
