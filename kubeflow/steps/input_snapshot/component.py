"""What the input data is when a Kubeflow run starts: the step that keeps ExampleGen's cache honest.

Open-source Kubeflow Pipelines keys a step's cache on its parameter values,
image and command (backend/src/v2/cacheutils/cache.go): nothing about the files
under `data_root`. A scheduled run with the same `data_root` every day would
take ExampleGen from cache, and everything after it too, and train on the
first day's data forever. TFX's answer, the fingerprint its ExampleGen driver
computes, runs only on Vertex (see components/example_gen/executor.py).

This step runs that resolution (components/example_gen/span_resolution.py), uncached,
before ExampleGen: the spans the run reads, in their versions, and TFX's
fingerprint of their files (names, sizes, modification times). Its output is a
string that ExampleGen takes as a parameter, so it is in ExampleGen's cache
key: the same data hits the cache, changed data never does, and Transform, the
Trainer and the rest follow, as KFP keys them on their input artifacts.

Locally TFX's driver does this itself, so the local DAG has no such step.
The work is kubeflow/steps/input_snapshot/executor.py's, which the step's pod runs
without TFX (kubeflow/light_step.py); this module declares it.
"""

# No `from __future__ import annotations`: the @component decorator reads
# the real annotation objects.

from typing import TypedDict

from tfx.dsl.component.experimental.annotations import Parameter
from tfx.dsl.component.experimental.decorators import component

from kubeflow.steps.input_snapshot.executor import SNAPSHOT_KEY, take_snapshot


class Snapshot(TypedDict):
    # input_fingerprint.SNAPSHOT_KEY: ResolvedInput.to_json(), the spans, versions,
    # patterns and fingerprints.
    snapshot: str


@component
def InputSnapshot(
    input_base: Parameter[str],
    input_config: Parameter[str],
    input_window: Parameter[str],
) -> Snapshot:
    """The spans and fingerprint of the data the run reads, as ExampleGen will resolve them."""
    return Snapshot(snapshot=take_snapshot(input_base, input_config, input_window)[SNAPSHOT_KEY])
