"""The SchemaImporter step: TFX's ImportSchemaGen component, with its executor's work ported
(executor.py)."""
