"""Times the full local DAG against TFX 1.16's own taxi native-Keras example.

    ./dev exec python -m benchmarks.local_pipeline            # both, side by side
    ./dev exec python -m benchmarks.local_pipeline --only template

Each pipeline runs from scratch (fresh output directory, no cache) in its own
process, on the same embedded CSV. Wall time includes Python start-up and
imports, as a user experiences it; per-component times come from ML Metadata.
Both pushed models are then scored on the same eval split (CsvExampleGen's
default hash split is content-based, so both pipelines get the same rows).

The TFX example needs TF_USE_LEGACY_KERAS=1 (it fails under Keras 3) and runs
with its own Beam settings (multi_processing), as shipped.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_ROOT = REPO_ROOT / "data" / "chicago_taxi"
RUNS = ("template", "tfx_taxi_native_keras")


def _score_eval_split(pipeline_root: Path, model_dir: str, output_key: str) -> dict[str, float]:
    """Accuracy and AUC of a pushed model on the raw eval split, via its serving signature."""
    import numpy as np
    import tensorflow as tf
    from sklearn.metrics import roc_auc_score

    from trainer.features import BIG_TIP_FRACTION

    files = sorted(
        glob.glob(str(pipeline_root / "CsvExampleGen" / "examples" / "*" / "Split-eval" / "*"))
    )
    serialized = list(tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator())
    parsed = tf.io.parse_example(
        serialized,
        {"tips": tf.io.VarLenFeature(tf.float32), "fare": tf.io.VarLenFeature(tf.float32)},
    )
    tips = tf.sparse.to_dense(parsed["tips"]).numpy()[:, 0]
    fare = tf.sparse.to_dense(parsed["fare"]).numpy()[:, 0]
    labels = (tips > BIG_TIP_FRACTION * fare).astype(int)
    serve = tf.saved_model.load(model_dir).signatures["serving_default"]
    scores = np.concatenate(
        [
            serve(examples=tf.constant(serialized[i : i + 1024]))[output_key].numpy().reshape(-1)
            for i in range(0, len(serialized), 1024)
        ]
    )
    return {
        "eval_examples": len(labels),
        "binary_accuracy": float(np.mean((scores > 0.5) == labels)),
        "auc": float(roc_auc_score(labels, scores)),
    }


def _child(name: str, out: Path) -> dict:
    from tfx.orchestration import metadata as tfx_metadata

    from pipeline.run_summary import summarize_latest_run

    metadata_path = out / "metadata.sqlite"
    if name == "template":
        import local_runner

        rc = local_runner.main(["--output-dir", str(out), "--no-cache"])
        if rc:
            raise SystemExit(rc)
        pipeline_name, output_key = "taxi-big-tipper", "probabilities"
        pipeline_root = out / "pipeline_root"
    else:
        import tfx.examples.chicago_taxi_pipeline.taxi_pipeline_native_keras as example
        from tfx.orchestration.beam.beam_dag_runner import BeamDagRunner

        pipeline_name, output_key = "chicago_taxi_native_keras", "outputs"
        pipeline_root = out / "pipeline_root"
        BeamDagRunner().run(
            example._create_pipeline(
                pipeline_name=pipeline_name,
                pipeline_root=str(pipeline_root),
                data_root=str(DATA_ROOT),
                module_file=str(Path(example.__file__).with_name("taxi_utils_native_keras.py")),
                serving_model_dir=str(out / "serving_model"),
                metadata_path=str(metadata_path),
                beam_pipeline_args=example._beam_pipeline_args,
            )
        )
    # Wall time ends here: scoring below is the benchmark's own work.
    finished_at = time.time()
    summary = summarize_latest_run(
        tfx_metadata.sqlite_metadata_connection_config(str(metadata_path)),
        pipeline_name,
    )
    if not summary.pushed_destination:
        raise SystemExit(f"{name}: no model was pushed")
    return {
        "finished_at": finished_at,
        "components": {c.node_id: c.seconds for c in summary.components},
        "blessed": summary.blessed,
        **_score_eval_split(pipeline_root, summary.pushed_destination, output_key),
    }


def _run(name: str) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"bench_{name}_") as tmp:
        out = Path(tmp)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        if name == "tfx_taxi_native_keras":
            env["TF_USE_LEGACY_KERAS"] = "1"
        started_at = time.time()
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.local_pipeline", "--child", name, "--out", str(out)],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode:
            sys.stderr.write(proc.stderr[-5000:])
            raise SystemExit(f"{name} failed with exit code {proc.returncode}")
        result = json.loads((out / "result.json").read_text())
        # From spawning the process (Python start-up and imports included, as a
        # user waits for them) to the end of the pipeline run.
        return {"wall_seconds": result.pop("finished_at") - started_at, **result}


# Component ids differ between the two DAGs; group them for the table.
_GROUPS = {
    "ExampleGen": ("CsvExampleGen",),
    "StatisticsGen": ("StatisticsGen",),
    "Schema + validation": (
        "SchemaGen",
        "SchemaImporter",
        "ExampleValidator",
        "DataValidationGate",
    ),
    "Transform": ("Transform",),
    "Trainer": ("Trainer",),
    "Evaluator": ("Evaluator",),
    "Baseline + Pusher": ("latest_blessed_model_resolver", "LatestServedModel", "Pusher"),
}


def _table(results: dict[str, dict]) -> str:
    names = list(results)
    rows = [("", *names)]
    rows.append(
        (
            "wall time, process start to run end (s)",
            *(f"{results[n]['wall_seconds']:.1f}" for n in names),
        )
    )
    rows.append(
        (
            "  sum of components (s)",
            *(f"{sum(results[n]['components'].values()):.1f}" for n in names),
        )
    )
    for group, ids in _GROUPS.items():
        rows.append(
            (
                f"  {group} (s)",
                *(
                    f"{sum(v for k, v in results[n]['components'].items() if k in ids):.1f}"
                    for n in names
                ),
            )
        )
    for metric in ("binary_accuracy", "auc", "eval_examples"):
        rows.append(
            (
                f"eval {metric}",
                *(f"{results[n][metric]:.4f}".rstrip("0").rstrip(".") for n in names),
            )
        )
    if len(names) == 2:
        a, b = names
        rows.append(
            (
                f"speed-up ({a} vs {b})",
                f"{results[b]['wall_seconds'] / results[a]['wall_seconds']:.2f}x",
                "",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "| " + " | ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) + " |"
        for r in rows
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=RUNS, action="append", help="run only this pipeline")
    parser.add_argument("--child", choices=RUNS, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        result = _child(args.child, args.out)
        (args.out / "result.json").write_text(json.dumps(result))
        return 0
    results = {}
    for name in args.only or RUNS:
        print(f"running {name} ...", flush=True)
        results[name] = _run(name)
    print(_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
