"""Imported for its effect by Beam's SDK workers: registers s3:// for TensorFlow there.

A Beam step's own process registers tensorflow-io's filesystems before TFX
starts (kubeflow/step_entrypoint.py), but its Beam workers are other
processes: the DirectRunner's multi-processing workers, or SDK workers beside
a Flink, Spark or Dataflow job. tf.Transform and TFMA write and load artifacts
there through tf.io.gfile. Beam imports every module named in
`--beam_plugins` when a worker starts, before any bundle runs; the Kubeflow
compile names this one for every Beam step when s3:// is in use.
"""

from pipeline.object_store import register_filesystems

register_filesystems()
