"""ServingDataGate: a scoring run's rows against the schema's SERVING environment."""
