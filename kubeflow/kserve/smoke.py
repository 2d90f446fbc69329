"""The smoke request: a few of the run's eval rows, sent as a REST client sends them.

The rows are the run's own eval examples (ExampleGen's), turned into
`serving_json` instances (trainer/json_signature.py; a row whose missing value
that signature cannot express is skipped). The revision's answer is compared
with the pushed model's `serving_default` on the same serialized examples,
which is how the Evaluator scored them.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

import numpy as np

from trainer.json_signature import (
    CONTRACT_ASSET,
    JSON_SIGNATURE,
    contract_from_dicts,
    instance_from_example,
)

EVAL_SPLIT = "Split-eval"
REQUEST_TIMEOUT_S = 60


class SmokeError(RuntimeError):
    """The new revision did not answer, or answered differently from the model."""


def eval_rows(examples_uri: str, model_dir: str, count: int) -> tuple[list[dict], list[bytes]]:
    """Up to `count` eval rows: as JSON instances, and as the serialized tf.Examples."""
    import tensorflow as tf
    from tfx.dsl.io import fileio

    with fileio.open(os.path.join(model_dir, CONTRACT_ASSET)) as f:
        contract = contract_from_dicts(json.load(f))
    files = sorted(fileio.glob(os.path.join(examples_uri, EVAL_SPLIT, "*")))
    instances: list[dict] = []
    serialized: list[bytes] = []
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
        data = record.numpy()
        instance = instance_from_example(tf.train.Example.FromString(data), contract)
        if instance is not None:
            instances.append(instance)
            serialized.append(data)
        if len(instances) == count:
            break
    if not instances:
        raise SmokeError(f"no eval row under {examples_uri}/{EVAL_SPLIT} fits the JSON signature")
    return instances, serialized


def expected_scores(model_dir: str, serialized: list[bytes]) -> np.ndarray:
    """The pushed model's own scores for the rows (serving_default, as the Evaluator)."""
    import tensorflow as tf

    from trainer.export import SERVING_SIGNATURE

    signature = tf.saved_model.load(model_dir).signatures[SERVING_SIGNATURE]
    (scores,) = signature(examples=tf.constant(serialized)).values()
    return scores.numpy()


def request_body(instances: list[dict]) -> dict[str, Any]:
    return {"signature_name": JSON_SIGNATURE, "instances": instances}


def predict(url: str, model: str, body: dict[str, Any]) -> np.ndarray:
    """POSTs a TF Serving REST predict request; the predictions."""
    endpoint = f"{url.rstrip('/')}/v1/models/{model}:predict"
    request = urllib.request.Request(
        endpoint, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as err:
        raise SmokeError(f"{endpoint} answered HTTP {err.code}: {err.read()[:500]!r}") from None
    except (urllib.error.URLError, OSError) as err:
        raise SmokeError(f"{endpoint} did not answer: {err}") from None
    if "predictions" not in answer:
        raise SmokeError(f"{endpoint} answered without predictions: {str(answer)[:500]}")
    return np.asarray(answer["predictions"], dtype=np.float64)


def disagreement(expected: np.ndarray, answered: np.ndarray, tolerance: float) -> str | None:
    """Why the answer does not match the model's scores, or None when it does."""
    if answered.shape != expected.shape:
        return f"answered shape {answered.shape}, the model gives {expected.shape}"
    difference = np.abs(answered - expected)
    if not np.all(difference <= tolerance):
        row = int(np.argmax(difference.max(axis=tuple(range(1, difference.ndim)))))
        return (
            f"row {row}: answered {answered[row].tolist()}, the pushed model scores "
            f"{expected[row].tolist()} (difference {float(difference.max()):.3g} > tolerance "
            f"{tolerance:g})"
        )
    return None
