"""The data gates: each stops a run whose data a model must not see."""
