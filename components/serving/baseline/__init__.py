"""LatestServedModel: the model currently served, as the Evaluator's baseline."""
