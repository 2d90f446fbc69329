"""The Pusher: TFX's, taught not to push the model already served."""
