"""The Evaluator: TFX's, with the served model as its baseline, and TFMA's metrics on whole
batches."""
