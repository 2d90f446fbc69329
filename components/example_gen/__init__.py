"""ExampleGen: TFX's file-based ExampleGen over CSV or Parquet, its readers and its span
resolution."""
