"""Transform over ExampleGen's Parquet: analysis reads Parquet, the Trainer still gets
tf.Examples."""
