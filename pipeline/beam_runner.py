"""The runner of multi-processing Beam steps: Beam's FnApiRunner, handed the pipeline's options.

Named with `--runner=pipeline.beam_runner.fn_api_runner_with_options`
(pipeline/beam.py, MULTI_PROCESSING_RUNNER_ARG): Beam imports a dotted runner
name and calls it with no arguments (apache_beam 2.74.0, runners/runner.py
`create_runner`, L81-84).
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.runners.portability.fn_api_runner import fn_runner
from apache_beam.runners.portability.portable_runner import JobServiceHandle
from apache_beam.runners.runner import PipelineResult


def fn_api_runner_with_options() -> fn_runner.FnApiRunner:
    """What Beam's DirectRunner does for a batch pipeline, less its first try on Prism.

    The DirectRunner hands a pipeline to Prism first, fetching Prism's binary
    from GitHub at run time, and runs it on the FnApiRunner only when that
    fails (apache_beam 2.74.0, runners/direct/direct_runner.py L203-233). Its
    FnApiRunner gets the pipeline's options as provision info (L234-245), which
    its worker processes receive as PIPELINE_OPTIONS
    (runners/portability/local_job_service.py L204-214) and read
    `--beam_plugins` from: how TensorFlow reaches s3:// in them. A FnApiRunner
    named alone gets no options to pass on, and is built before the options
    are known (create_runner), so this one builds the FnApiRunner that runs
    the pipeline when it is run, as the DirectRunner's L236-243 do.

    The runner the pipeline holds is a FnApiRunner itself, not a subclass:
    tf.Transform picks its TensorFlow session config by the runner's exact
    type (tensorflow_transform 1.16.0, beam/impl.py L117-124 and L1147), and
    gives a FnApiRunner or DirectRunner two threads per session.
    """
    runner = fn_runner.FnApiRunner()

    def run_pipeline(pipeline, options: PipelineOptions) -> PipelineResult:
        provisioned = fn_runner.FnApiRunner(provision_info=worker_provision_info(options))
        return provisioned.run_pipeline(pipeline, options)

    runner.run_pipeline = run_pipeline
    return runner


def worker_provision_info(options: PipelineOptions) -> fn_runner.ExtendedProvisionInfo:
    """The pipeline's options as provision info, encoded as the DirectRunner encodes them."""
    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    return fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
    )
