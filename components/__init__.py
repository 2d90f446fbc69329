"""Custom TFX components used by the pipeline."""
