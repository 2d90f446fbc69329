"""The drift gate's artifact type: a directory holding `drift.json`
(components/gates/drift/result.py).

Apart from the result's reader: a TFX artifact class imports `tfx.types`, and
with it TensorFlow (docs/kubeflow.md, "What a step loads").
"""

# No `from __future__ import annotations`: TFX reads the artifact class's
# annotations as objects.

from tfx import types


class DataDrift(types.Artifact):
    """A directory holding `drift.json`: a DriftResult."""

    # TFX's Kubeflow V2 compiler writes TYPE_NAME as the schema title, which
    # must be `<namespace>.<Title>`, and its container entrypoint imports the
    # class back from that title. So it is an import path: `components`
    # exports this class. (A title that is no import path compiles, and the
    # step then fails; kubeflow/standin_harness/run_compiled.py caught one.)
    TYPE_NAME = "components.DataDrift"
