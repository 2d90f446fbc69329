"""ScoringReport: the scoring package's exit handler."""
