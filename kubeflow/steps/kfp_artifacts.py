"""TFX artifact classes for the KFP artifact types the KFP UI renders.

The KFP UI shows a `system.HTML` or `system.Markdown` artifact inline in a
step's Visualization tab, and charts the numbers of every `system.Metrics`
artifact across runs in its run comparison. It recognises them by type name
only, so a TFX artifact with its own name (`components.RunReportHtml`) stays
a download.

Two things differ from TFX's own artifact types:

* The KFP convention is a file at the artifact's URI, not a directory: the
  UI reads the object at that URI (kfp's `HTML` is written at `.path`).
* TFX's Kubeflow V2 compiler writes a custom type as an `instanceSchema`
  titled with TYPE_NAME, and its container entrypoint imports the class back
  by that title. `kubeflow.compile` puts these types in the spec as kfp
  writes them (`schemaTitle: system.HTML`, version 0.0.1), and
  `kubeflow.step_entrypoint` tells TFX which class each title means
  (`TITLE_TO_CLASS_PATH`), since `system` is not a module.
"""

from __future__ import annotations

from tfx import types
from tfx.types.artifact_utils import ARTIFACT_TFX_VERSION_CUSTOM_PROPERTY_KEY

# kfp's own artifact classes (kfp.dsl.HTML, kfp.dsl.Metrics) carry this version.
SCHEMA_VERSION = "0.0.1"


class HTML(types.Artifact):
    """One self-contained HTML page, the file at the artifact's URI."""

    TYPE_NAME = "system.HTML"


class Metrics(types.Artifact):
    """Scalar metrics, as the artifact's float custom properties (KFP's `log_metric`)."""

    TYPE_NAME = "system.Metrics"

    def set_string_custom_property(self, key: str, value: str) -> None:
        # The KFP UI lists every custom property of a system.Metrics artifact
        # as a metric (but `display_name`, which KFP's launcher sets). TFX's
        # entrypoint tags each output with its version; here that would be a
        # `tfx_version` row in every run comparison.
        if key == ARTIFACT_TFX_VERSION_CUSTOM_PROPERTY_KEY:
            return
        super().set_string_custom_property(key, value)


# Schema title -> import path, for TFX's container entrypoint.
TITLE_TO_CLASS_PATH = (
    (HTML.TYPE_NAME, f"{__name__}.HTML"),
    (Metrics.TYPE_NAME, f"{__name__}.Metrics"),
)
SYSTEM_TYPE_NAMES = frozenset(title for title, _ in TITLE_TO_CLASS_PATH)
