"""Batch scoring: the served model over ExampleGen's examples, into one committed partition."""
