"""Deploy: the pushed version to a KServe InferenceService (with `serving:`)."""
