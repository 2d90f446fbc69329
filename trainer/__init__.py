"""The model: features, tf.Transform preprocessing, Keras model, and TFX's `run_fn`."""
