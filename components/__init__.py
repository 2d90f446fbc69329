"""Custom TFX components used by the pipeline."""


def __getattr__(name: str):
    # Kubeflow steps import a custom artifact type by its schema title:
    # `components.DataDrift` (components/gates/drift/artifact.py), resolved lazily so that
    # importing one component does not import them all.
    if name == "DataDrift":
        from components.gates.drift.artifact import DataDrift

        return DataDrift
    raise AttributeError(f"module 'components' has no attribute {name!r}")
