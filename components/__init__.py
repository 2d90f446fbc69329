"""Custom TFX components used by the pipeline."""


def __getattr__(name: str):
    # Kubeflow steps import a custom artifact type by its schema title,
    # `components.RunReportHtml` (see components/run_report.py); resolved
    # lazily so that importing one component does not import them all.
    if name == "RunReportHtml":
        from components.run_report import RunReportHtml

        return RunReportHtml
    raise AttributeError(f"module 'components' has no attribute {name!r}")
