"""Tuning: the search space, the search (seeded, resumable, deadline), the frozen file."""

from __future__ import annotations

import dataclasses
import datetime
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import keras_tuner
import pytest

from components.report.tuning_report import render_tuning_html
from pipeline.local.tune import TUNING_DIR
from schemas import load_schema_dir
from trainer.config import ModelConfig, TrainerConfig
from trainer.hyperparameters import (
    HYPERPARAMETERS_FILE_NAME,
    FrozenHyperparameters,
    HyperparametersError,
    frozen_from_json,
    frozen_json,
    load_frozen,
    report_rows,
    write_frozen,
)
from trainer.tuning import SearchResult, TrialResult, model_values

WINNER = {"hidden_units": [32, 16], "embedding_dim": 4, "learning_rate": 0.001, "dropout": 0.2}


def test_the_search_space_builds_the_trainers_model():
    from trainer.model import build_model
    from trainer.search_space import search_space

    spec = load_schema_dir().spec
    hp = keras_tuner.HyperParameters()
    config = search_space(hp)
    assert isinstance(config, ModelConfig)
    assert set(hp.values) == {"width", "depth", "embedding_dim", "learning_rate", "dropout"}
    hp.values.update(width=64, depth=3)
    assert search_space(hp).hidden_units == (64, 32, 16)
    model = build_model(config, spec.label, spec.model_input_sizes())
    assert [layer.name for layer in model.layers if layer.name.startswith("hidden_")] == [
        f"hidden_{i}" for i in range(len(config.hidden_units))
    ]


def test_frozen_values_replace_the_configs_and_round_trip(tmp_path):
    from pipeline.pipeline_config import PipelineConfig

    frozen = FrozenHyperparameters(model=WINNER, provenance={"partial": False, "trials": 3})
    path = write_frozen(tmp_path / "hyperparameters.yaml", frozen)
    assert load_frozen(path) == frozen
    config = PipelineConfig().with_hyperparameters(load_frozen(path))
    assert config.trainer.model == ModelConfig(
        hidden_units=(32, 16), embedding_dim=4, learning_rate=0.001, dropout=0.2
    )
    assert config.trainer.runtime == PipelineConfig().trainer.runtime
    # No file: the configuration's own values.
    assert load_frozen(tmp_path / "absent.yaml") is None
    assert PipelineConfig().with_hyperparameters(None) == PipelineConfig()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("model: {hidden_unit: [8]}", "model.hidden_unit: not a field of the model's settings"),
        ("model: {hidden_units: 8}", "model.hidden_units: must be a list of integers"),
        ("model: {learning_rate: fast}", "model.learning_rate: must be a number"),
        ("model: {embedding_dim: true}", "model.embedding_dim: must be int"),
        ("model: {dropout: 1.5}", "model.dropout must be in [0, 1)"),
        ("model: {}\nprovenance: {partial: 'no'}", "provenance.partial: must be true or false"),
        ("model: {}\nprovenance: {score: 1}", "provenance.score: unknown key"),
        ("model: {}\nprovenance: {data: {spanz: [0]}}", "provenance.data.spanz: unknown key"),
        ("modle: {}", "modle: unknown key"),
        ("[1, 2]", "must be a mapping"),
        ("model: [", "not valid YAML"),
    ],
)
def test_unknown_or_mistyped_keys_are_refused_by_name(tmp_path, text, named):
    path = tmp_path / "hyperparameters.yaml"
    path.write_text(text)
    with pytest.raises(HyperparametersError) as err:
        load_frozen(path)
    assert str(err.value).startswith(f"{path}: ")
    assert named in str(err.value)
    assert "\n" not in str(err.value)


def test_data_age_is_read_from_the_provenance():

    frozen = FrozenHyperparameters(
        model={}, provenance={"data": {"read_at": "2026-11-20T12:00:00+00:00"}}
    )
    now = datetime.datetime(2026, 11, 27, 12, tzinfo=datetime.timezone.utc)
    assert frozen.data_age(now) == datetime.timedelta(days=7)
    assert FrozenHyperparameters(model={}).data_age(now) is None


def test_the_run_report_shows_the_frozen_values_and_their_datas_age():

    from components.report.contents import RunReport
    from components.report.render import render_html
    from tests.harness import frozen_hyperparameter_rows, parse, with_attr

    frozen = FrozenHyperparameters(
        model=WINNER,
        provenance={
            "partial": True,
            "trials": 2,
            "data": {"spans": [3, 4], "read_at": "2026-11-20T12:00:00+00:00"},
        },
    )
    now = datetime.datetime(2026, 11, 27, 12, tzinfo=datetime.timezone.utc)
    html = render_html(RunReport("p", "r", steps=(), hyperparameters=report_rows(frozen, now)))
    assert frozen_hyperparameter_rows(html) == {
        "hidden_units": "[32, 16]",
        "embedding_dim": "4",
        "learning_rate": "0.001",
        "dropout": "0.2",
        "data age": "7 days",
        "data spans": "3, 4",
        "trials": "2 (partial: cut off by the deadline)",
    }
    complete = FrozenHyperparameters(model=WINNER, provenance={"partial": False, "trials": 2})
    html = render_html(RunReport("p", "r", steps=(), hyperparameters=report_rows(complete, now)))
    assert frozen_hyperparameter_rows(html)["trials"] == "2 (complete)"
    # No frozen file: the report says none; a report not told (Kubeflow's exit
    # handler) leaves the block out.
    elements = parse(render_html(RunReport("p", "r", steps=(), hyperparameters=report_rows(None))))
    (none,) = with_attr(elements, "id", id="hyperparameters")
    assert none["data-frozen"] == "none"
    assert not with_attr(
        parse(render_html(RunReport("p", "r", steps=()))), "id", id="hyperparameters"
    )


def test_the_frozen_file_reaches_a_report_step_as_json_checked_as_the_file_is():
    frozen = FrozenHyperparameters(
        model=WINNER, provenance={"trials": 2, "data": {"spans": [3], "fingerprint": "f"}}
    )
    assert frozen_from_json(frozen_json(frozen)) == frozen
    assert frozen_json(None) == "null" and frozen_from_json("null") is None
    with pytest.raises(HyperparametersError, match=r"^model.dropout: must be a number"):
        frozen_from_json('{"model": {"dropout": "high"}}')
    with pytest.raises(HyperparametersError, match=r"^modle: unknown key"):
        frozen_from_json('{"modle": {}}')


# The search on real Transform output: tiny trials.
STEPS_PER_TRIAL = 10


def tiny_search(inputs, spec, directory: Path, max_trials: int, deadline=None, parallel=1):
    from trainer.config import RuntimeConfig
    from trainer.run import InputFiles
    from trainer.tuning import SearchSettings, search

    config = TrainerConfig(
        runtime=RuntimeConfig(
            accelerator="cpu",
            precision="float32",
            per_replica_batch_size=64,
            shuffle_buffer_size=200,
        )
    )
    return search(
        config=config,
        spec=spec,
        files=InputFiles(
            [inputs["train_files"]], [inputs["eval_files"]], inputs["transform_output"]
        ),
        settings=SearchSettings(
            directory=str(directory),
            max_trials=max_trials,
            steps_per_trial=STEPS_PER_TRIAL,
            eval_steps=2,
            deadline=deadline,
        ),
        parallel=parallel,
    )


@pytest.fixture(scope="module")
def two_trials(tmp_path_factory, taxi_trainer_inputs, taxi_spec):
    """A finished sequential search of two trials, and its directory (copy it to resume it)."""
    directory = tmp_path_factory.mktemp("two_trials")
    return directory, tiny_search(taxi_trainer_inputs, taxi_spec, directory, max_trials=2)


def test_a_seeded_search_picks_the_same_best_trial_and_resumes(
    tmp_path, two_trials, taxi_trainer_inputs, taxi_spec
):
    from tests.conftest import copy_tree

    directory, first = two_trials
    again = tiny_search(taxi_trainer_inputs, taxi_spec, tmp_path / "b", max_trials=2)
    assert not first.partial and first.ran == ("0", "1")
    assert [t.hyperparameters for t in first.trials] == [t.hyperparameters for t in again.trials]
    assert first.best.trial_id == again.best.trial_id
    assert first.best.score == pytest.approx(again.best.score, rel=1e-4)
    # Resumed with a larger budget: the completed trials are not run again.
    resumed_dir = copy_tree(directory, tmp_path / "a")
    resumed = tiny_search(taxi_trainer_inputs, taxi_spec, resumed_dir, max_trials=3)
    assert resumed.ran == ("2",)
    assert [t.score for t in resumed.trials[:2]] == [t.score for t in first.trials]


def test_a_state_write_cut_off_keeps_the_previous_state_whole(tmp_path, monkeypatch):
    """A kill between writing the state and its taking the file's name: the file holds
    the previous state, whole; the next write replaces it."""
    import os

    from trainer.tuning import read_state, save_state

    path = str(tmp_path / "oracle.json")
    save_state(path, {"trials": 1})

    def killed(*args):
        raise KeyboardInterrupt("killed before the rename")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        save_state(path, {"trials": 2})
    assert read_state(path, str(tmp_path)) == {"trials": 1}
    monkeypatch.undo()
    save_state(path, {"trials": 2})
    assert read_state(path, str(tmp_path)) == {"trials": 2}


def test_a_search_writes_none_of_its_state_with_keras_tuners_in_place_writer(
    tmp_path, two_trials, taxi_trainer_inputs, taxi_spec, monkeypatch
):
    """KerasTuner empties a state file before it writes it (`save_json`): a search killed
    then left `oracle.json` or `tuner0.json` empty, and the resumed search could not
    start. Every file a resumed search writes (a trial's, the oracle's, the tuner's) goes
    through `save_state` instead."""
    from keras_tuner.src import utils

    from tests.conftest import copy_tree

    def in_place(path, obj):
        raise AssertionError(f"{path} written in place by KerasTuner's save_json")

    monkeypatch.setattr(utils, "save_json", in_place)
    directory = copy_tree(two_trials[0], tmp_path / "s")
    before = {p: p.stat().st_mtime_ns for p in (directory / "search").rglob("*.json")}
    assert tiny_search(taxi_trainer_inputs, taxi_spec, directory, max_trials=3).ran == ("2",)
    written = {p for p in (directory / "search").rglob("*.json")
               if before.get(p) != p.stat().st_mtime_ns}  # fmt: skip
    assert {p.relative_to(directory / "search").as_posix() for p in written} >= {
        "oracle.json",
        "tuner0.json",
        "trial_2/trial.json",
    }
    assert not list(directory.rglob("*.tmp"))


@pytest.mark.parametrize("name", ["oracle.json", "tuner0.json", "trial_1/trial.json"])
def test_a_state_file_cut_off_is_named_with_what_to_do(
    tmp_path, two_trials, taxi_trainer_inputs, taxi_spec, name
):
    from tests.conftest import copy_tree
    from trainer.tuning import SearchStateError

    directory = copy_tree(two_trials[0], tmp_path / "s")
    cut = directory / "search" / name
    whole = cut.read_text()
    cut.write_text(whole[: len(whole) // 2])  # tuner0.json holds "{}"
    with pytest.raises(SearchStateError) as raised:
        tiny_search(taxi_trainer_inputs, taxi_spec, directory, max_trials=3)
    assert str(raised.value).startswith(f"the search's state file {cut} is not whole JSON")
    assert str(raised.value).endswith(f"remove {directory / 'search'} to start the search again")


def test_two_worker_processes_run_the_same_search(
    tmp_path, two_trials, taxi_trainer_inputs, taxi_spec
):
    """KerasTuner's chief/worker protocol on 127.0.0.1: two real worker processes."""
    _, sequential = two_trials
    parallel = tiny_search(taxi_trainer_inputs, taxi_spec, tmp_path / "p", max_trials=2, parallel=2)
    assert not parallel.partial and parallel.ran == ("0", "1")
    assert [t.status for t in parallel.trials] == ["COMPLETED", "COMPLETED"]
    assert {t.trial_id: t.hyperparameters for t in parallel.trials} == {
        t.trial_id: t.hyperparameters for t in sequential.trials
    }
    assert parallel.best.trial_id == sequential.best.trial_id
    search_dir = tmp_path / "p" / "search"
    # Each worker ended a trial: a worker's tuner writes its own file when it ends one
    # (keras_tuner/src/engine/base_tuner.py, 1.4.8: `on_trial_end`, line 340; `save`, 455).
    assert sorted(p.name for p in search_dir.glob("tuner*.json")) == ["tuner0.json", "tuner1.json"]
    # The trials overlapped: each started (the oracle's record of its start) before the
    # other ended (the last write of its own file, at its end).
    started = json.loads((search_dir / "oracle.json").read_text())["display"]["trial_start"]
    ended = {t: (search_dir / f"trial_{t}" / "trial.json").stat().st_mtime for t in started}
    assert sorted(started) == ["0", "1"]
    assert max(datetime.datetime.fromisoformat(s).timestamp() for s in started.values()) < min(
        ended.values()
    )
    # Resumed in parallel: nothing left to run.
    again = tiny_search(taxi_trainer_inputs, taxi_spec, tmp_path / "p", max_trials=2, parallel=2)
    assert again.ran == () and again.best == parallel.best


def test_a_deadline_keeps_the_best_so_far_marked_partial(tmp_path, taxi_trainer_inputs, taxi_spec):
    past = tiny_search(
        taxi_trainer_inputs, taxi_spec, tmp_path / "s", max_trials=3, deadline=time.time() - 1
    )
    assert past.partial and past.best is None and past.ran == ()
    one = tiny_search(taxi_trainer_inputs, taxi_spec, tmp_path / "s", max_trials=1)
    assert not one.partial
    # Budget raised, deadline passed: the completed trial stands, marked partial.
    cut = tiny_search(
        taxi_trainer_inputs, taxi_spec, tmp_path / "s", max_trials=3, deadline=time.time() - 1
    )
    assert cut.partial and cut.ran == () and cut.best == one.best


def test_a_deadline_in_the_middle_of_a_trial_leaves_it_for_the_resumed_search(
    tmp_path, taxi_trainer_inputs, taxi_spec, monkeypatch
):
    import types

    from trainer import tuning

    # A clock past the deadline from the third reading on: the trial starts
    # (one reading), its first batch ends in time, its second does not.
    readings = iter(range(10**6))
    clock = types.SimpleNamespace(time=lambda: 0.0 if next(readings) < 2 else 10.0)
    monkeypatch.setattr(tuning, "time", clock)
    cut = tiny_search(taxi_trainer_inputs, taxi_spec, tmp_path / "s", max_trials=1, deadline=5.0)
    assert cut.partial and cut.best is None and cut.ran == ("0",)
    assert [t.status for t in cut.trials] == ["RUNNING"]
    monkeypatch.undo()
    resumed = tiny_search(taxi_trainer_inputs, taxi_spec, tmp_path / "s", max_trials=1)
    assert not resumed.partial and resumed.ran == ("0",)
    assert resumed.trials[0].hyperparameters == cut.trials[0].hyperparameters


# The runner: the DAG's steps up to Transform from the local runner's cache, a
# search, the frozen file, and the next local run reading it.


def tune_main(argv: list[str]) -> tuple[int, str, str]:
    """`tune_runner.py` with `argv`, in this process: (exit code, stdout, stderr)."""
    import contextlib
    import io

    import tune_runner

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = tune_runner.main(argv)
    return rc, out.getvalue(), err.getvalue()


def tune(taxi_slice: Path, schema_dir: Path, output_dir: Path, *extra: str) -> tuple[int, str, str]:
    return tune_main(
        [
            "--data-root", str(taxi_slice),
            "--schema-dir", str(schema_dir),
            "--output-dir", str(output_dir),
            "--max-trials", "2",
            "--steps-per-trial", str(STEPS_PER_TRIAL),
            "--eval-steps", "2",
            *extra,
        ]
    )  # fmt: skip


def run_states(output_dir: Path, pipeline_name: str) -> dict[str, str]:
    from tfx.orchestration import metadata as tfx_metadata

    from pipeline.local.run_summary import summarize_latest_run

    metadata = tfx_metadata.sqlite_metadata_connection_config(str(output_dir / "metadata.sqlite"))
    return {s.step_id: s.state for s in summarize_latest_run(metadata, pipeline_name).steps}


def local_run(
    taxi_slice: Path, schema_dir: Path, output_dir: Path, train_steps: int, eval_steps: int
) -> tuple[int, str]:
    """`local_runner.py --sequential` on the schema directory, in this process: (exit code,
    stdout). Which steps run and which come from cache, the tests' assertions, do not
    depend on the second process a default run starts (pipeline/local/scheduler.py)."""
    import contextlib
    import io

    import local_runner

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = local_runner.main(
            [
                "--data-root", str(taxi_slice),
                "--schema-dir", str(schema_dir),
                "--output-dir", str(output_dir),
                "--train-steps", str(train_steps),
                "--eval-steps", str(eval_steps),
                "--no-report",
                "--sequential",
            ]
        )  # fmt: skip
    return rc, out.getvalue()


@dataclass(frozen=True)
class FirstTuning:
    """`tune` once (two trials) on a copy of `two_local_runs`' output and a copy of the
    schema directory: its steps up to Transform ran, ExampleGen from the runs' cache. What
    it printed and left (its run's step states, the frozen file) is recorded here: the
    tests that go on from it change its schema directory."""

    output_dir: Path
    # One schema directory for the module: its path is an input of the import (so of
    # Transform's cache key), and each test that goes on from this run uses it.
    schema_dir: Path
    rc: int
    stdout: str
    stderr: str
    states: dict[str, str]
    frozen: str  # the frozen file's text as the search wrote it


@pytest.fixture(scope="module")
def first_tuning(tmp_path_factory, two_local_runs, taxi_spec) -> FirstTuning:
    from tests.conftest import copy_tree

    root = tmp_path_factory.mktemp("first_tuning")
    output_dir = copy_tree(two_local_runs.output_dir, root / "out")
    schema_dir = copy_tree(load_schema_dir().path, root / "schema")
    rc, stdout, stderr = tune(two_local_runs.data_root, schema_dir, output_dir)
    frozen_file = schema_dir / HYPERPARAMETERS_FILE_NAME
    return FirstTuning(
        output_dir=output_dir,
        schema_dir=schema_dir,
        rc=rc,
        stdout=stdout,
        stderr=stderr,
        states=run_states(output_dir, taxi_spec.name),
        frozen=frozen_file.read_text() if frozen_file.exists() else "",
    )


def after_first_tuning(first_tuning: FirstTuning, output_dir: Path, *, search: bool) -> Path:
    """A copy of `first_tuning`'s output at `output_dir` (with its search, or without: a
    search from the start), its steps up to Transform in the cache, and its schema
    directory back as the repository has it, with the frozen file only with the search."""
    from tests.conftest import copy_tree

    shutil.rmtree(first_tuning.schema_dir)
    copy_tree(load_schema_dir().path, first_tuning.schema_dir)
    copy_tree(first_tuning.output_dir, output_dir)
    if search:
        (first_tuning.schema_dir / HYPERPARAMETERS_FILE_NAME).write_text(first_tuning.frozen)
    else:
        shutil.rmtree(output_dir / TUNING_DIR)
    return output_dir


def test_tuning_reuses_the_runs_cache_freezes_the_winner_and_the_trainer_reads_it(
    tmp_path, first_tuning, two_local_runs, taxi_spec
):
    import yaml

    # The first search is `first_tuning`'s; this test goes on from a copy of its output.
    output_dir = after_first_tuning(first_tuning, tmp_path / "out", search=True)
    schema_dir = first_tuning.schema_dir
    frozen_file = schema_dir / "hyperparameters.yaml"
    taxi_slice = two_local_runs.data_root  # the path its cached ExampleGen read

    rc, stdout, stderr = first_tuning.rc, first_tuning.stdout, first_tuning.stderr
    assert rc == 0, stderr
    # Only the steps up to Transform ran; ExampleGen from the local runner's
    # cache. The schema's path is an input of the import (and so of Transform):
    # this copy of the schema dir is new to the cache.
    assert first_tuning.states == {
        "ExampleGen": "cached",
        "SchemaImporter": "complete",
        "Transform": "complete",
    }
    assert "Winner: trial " in stdout and f"Frozen into {frozen_file}" in stdout
    frozen = load_frozen(frozen_file)
    provenance = frozen.provenance
    assert provenance["trials"] == 2 and provenance["partial"] is False
    assert provenance["data"]["spans"] == [0] and provenance["data"]["fingerprint"]
    assert set(provenance["versions"]) == {"keras", "keras_tuner", "tensorflow", "tfx"}
    from pipeline.fingerprint import code_fingerprint
    from trainer.search_space import search_space

    assert provenance["search_space_digest"] == code_fingerprint(search_space)
    assert yaml.safe_load((output_dir / "tuning" / "best.yaml").read_text()) == frozen.to_dict()
    report = (output_dir / "tuning" / "report.html").read_text()
    assert 'id="trials"' in report and f"<code>{frozen_file}</code>" in report

    # Run again on the same output dir: every step from cache, no trial run again.
    rc, stdout, _ = tune(taxi_slice, schema_dir, output_dir)
    assert rc == 0 and "Running Trial" not in stdout
    assert set(run_states(output_dir, taxi_spec.name).values()) == {"cached"}

    # The next local run reads the frozen values: the Trainer and what follows
    # run again, the data steps come from cache.
    rc, _ = local_run(taxi_slice, schema_dir, output_dir, two_local_runs.train_steps[0], 5)
    assert rc == 0
    states = run_states(output_dir, taxi_spec.name)
    assert states["Trainer"] == "complete"
    for step in ("ExampleGen", "StatisticsGen", "SchemaImporter", "Transform"):
        assert states[step] == "cached", states
    trained = (output_dir / "pipeline_root").glob("**/model_run/*/trainer_config.json")
    newest = max(trained, key=lambda path: int(path.parent.name))  # the execution's id
    config = yaml.safe_load(newest.read_text())
    assert config["model"]["hidden_units"] == frozen.model["hidden_units"]
    assert config["model"]["learning_rate"] == frozen.model["learning_rate"]


@pytest.mark.slow  # four local runs
@pytest.mark.e2e
def test_the_frozen_values_alone_rekey_the_trainer_and_its_provenance_never_does(
    tmp_path, first_tuning, two_local_runs, taxi_spec
):
    """One schema directory throughout (its path is an input of the import, so a copy
    would rerun the data steps whatever the frozen file held). On a copy of the first
    search's output (itself on the two local runs' output), so that the steps up to
    Transform come from their cache."""
    schema_dir = first_tuning.schema_dir
    output_dir = after_first_tuning(first_tuning, tmp_path / "out", search=False)
    taxi_slice = two_local_runs.data_root  # the path their cached ExampleGen read
    upstream = ("ExampleGen", "StatisticsGen", "SchemaImporter", "Transform")

    def run() -> dict[str, str]:
        rc, out = local_run(taxi_slice, schema_dir, output_dir, 20, 2)
        assert rc == 0, out
        return run_states(output_dir, taxi_spec.name)

    assert run()["Trainer"] == "complete"
    assert run()["Trainer"] == "cached"
    # Frozen values other than the configuration's: the Trainer and what follows it run.
    assert model_values(ModelConfig()) != WINNER
    frozen = FrozenHyperparameters(model=WINNER, provenance={"partial": False, "trials": 3})
    write_frozen(schema_dir / "hyperparameters.yaml", frozen)
    states = run()
    assert states["Trainer"] == "complete"
    assert {step: states[step] for step in upstream} == dict.fromkeys(upstream, "cached")
    # The same values, another provenance: nothing the Trainer reads changed.
    write_frozen(
        schema_dir / "hyperparameters.yaml",
        dataclasses.replace(frozen, provenance={"partial": True, "trials": 1, "tuned_at": "x"}),
    )
    states = run()
    assert states["Trainer"] == "cached"
    assert {step: states[step] for step in upstream} == dict.fromkeys(upstream, "cached")


def test_a_search_the_deadline_cuts_off_freezes_nothing_unless_accepted(
    tmp_path, first_tuning, two_local_runs
):
    taxi_slice = two_local_runs.data_root  # the steps up to Transform from the cache
    output_dir = after_first_tuning(first_tuning, tmp_path / "out", search=False)
    schema_dir = first_tuning.schema_dir
    frozen_file = schema_dir / "hyperparameters.yaml"
    rc, _, stderr = tune(taxi_slice, schema_dir, output_dir, "--deadline", "0.001s")
    assert rc == 4
    assert "no trial completed before the deadline" in stderr.strip().splitlines()[-1]
    assert not frozen_file.exists()

    # One trial completes; a larger budget then meets the deadline at once.
    assert tune(taxi_slice, schema_dir, output_dir, "--max-trials", "1")[0] == 0
    frozen_file.unlink()
    cut = ("--max-trials", "3", "--deadline", "0.001s")
    rc, stdout, stderr = tune(taxi_slice, schema_dir, output_dir, *cut)
    assert rc == 4 and "the search is partial (1 of 3 trials" in stderr
    assert "Running Trial" not in stdout and not frozen_file.exists()
    assert load_frozen(output_dir / "tuning" / "best.yaml").partial
    rc, _, stderr = tune(taxi_slice, schema_dir, output_dir, *cut, "--accept-partial")
    assert rc == 0, stderr
    assert load_frozen(frozen_file).partial and load_frozen(frozen_file).provenance["trials"] == 1


def trial_files(search_dir: Path) -> dict[str, tuple[dict, int]]:
    """Each trial's own file, as KerasTuner wrote it: {trial id: (trial.json, its mtime_ns)}."""
    return {
        path.parent.name.removeprefix("trial_"): (
            json.loads(path.read_text()),
            path.stat().st_mtime_ns,
        )
        for path in search_dir.glob("trial_*/trial.json")
    }


@pytest.mark.parametrize("parallel", [1, 2])
def test_a_search_killed_mid_trial_resumes_without_running_a_completed_trial_again(
    tmp_path, first_tuning, two_local_runs, parallel
):
    """SIGKILL to the runner's process group (its workers too) once a trial's file says
    COMPLETED and the next trial's says RUNNING; the same command then finishes the search
    (in this process, as the module's other searches run: what it resumes from is on disk).
    Two workers get a budget of three: their first two trials run side by side and may end
    together, and the third then runs while the first two are COMPLETED."""
    import os
    import signal
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT
    from tests.harness import lowest_score_trials_model

    output_dir = after_first_tuning(first_tuning, tmp_path / "out", search=False)
    schema_dir = first_tuning.schema_dir
    search_dir = output_dir / "tuning" / "search"
    budget = 2 if parallel == 1 else 3
    flags = [
        "--data-root", str(two_local_runs.data_root),
        "--schema-dir", str(schema_dir),
        "--output-dir", str(output_dir),
        "--max-trials", str(budget),
        # Long enough for the kill to land in the middle of the second trial.
        "--steps-per-trial", "100",
        "--eval-steps", "2",
        "--parallel", str(parallel),
    ]  # fmt: skip
    log = tmp_path / "killed.log"
    with log.open("w") as out:
        run = subprocess.Popen(
            [sys.executable, "tune_runner.py", *flags],
            cwd=REPO_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 600
    try:
        while True:
            # No JSONDecodeError allowed: a state file is replaced whole, never written
            # in place (`save_state`), so it is never read half-written.
            states = [t["status"] for t, _ in trial_files(search_dir).values()]
            if "COMPLETED" in states and "RUNNING" in states:
                break
            assert run.poll() is None, f"the search ended before the kill:\n{log.read_text()}"
            assert time.monotonic() < deadline, "no trial completed while another ran"
            time.sleep(0.02)
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    killed = trial_files(search_dir)
    completed = {t: (trial["score"], mtime) for t, (trial, mtime) in killed.items()
                 if trial["status"] == "COMPLETED"}  # fmt: skip
    assert 1 <= len(completed) < budget, killed

    rc, stdout, stderr = tune_main(flags)
    assert rc == 0, stdout[-3000:] + stderr[-3000:]
    remaining = budget - len(completed)
    assert f"Search: {remaining} trials completed in this run" in stdout, stdout
    after = trial_files(search_dir)
    # Exactly the budget, and the trial completed before the kill never ran again: its
    # file was not written again (a trial run again writes RUNNING, then its score).
    assert {t: trial["status"] for t, (trial, _) in after.items()} == {
        str(trial_id): "COMPLETED" for trial_id in range(budget)
    }
    for trial_id, (score, mtime) in completed.items():
        assert (after[trial_id][0]["score"], after[trial_id][1]) == (score, mtime)
    frozen = load_frozen(schema_dir / "hyperparameters.yaml")
    assert frozen.provenance["trials"] == budget and frozen.provenance["partial"] is False
    assert frozen.model == lowest_score_trials_model(trial for trial, _ in after.values())


def test_tune_runner_flags_are_checked(tmp_path, capsys):
    import tune_runner

    with pytest.raises(SystemExit):
        tune_runner.parse_args(["--max-trials", "0"])
    assert "--max-trials must be a positive integer, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tune_runner.parse_args(["--deadline", "soon"])
    assert "'soon' is not a positive duration" in capsys.readouterr().err
    assert tune_runner.parse_args(["--deadline", "30m"]).deadline == 1800


@pytest.mark.slow  # a whole Kubeflow compile
def test_the_training_package_compiles_the_frozen_values_and_has_no_tuning_step(
    tmp_path, monkeypatch
):
    from kubeflow import compile as kfp_compile
    from kubeflow import package_dags, package_settings, tfx_spec
    from kubeflow.pipeline_steps import DEPLOY
    from kubeflow.settings import load_settings
    from kubeflow.step_ids import RUN_REPORT
    from pipeline.steps import DAG_STEPS, TRAINER
    from tests.conftest import REPO_ROOT, TEMPLATE_SETTINGS_FILE, copy_tree
    from trainer.config import CUSTOM_CONFIG_KEY

    project = tmp_path / "project"
    schema_dir = copy_tree(
        REPO_ROOT / "schemas" / "chicago_taxi", project / "schemas" / "chicago_taxi"
    )
    frozen = FrozenHyperparameters(
        WINNER,
        provenance={
            "partial": False,
            "trials": 4,
            "data": {"spans": [7], "read_at": "2026-11-20T12:00:00+00:00"},
        },
    )
    write_frozen(schema_dir / "hyperparameters.yaml", frozen)
    monkeypatch.setattr(package_dags, "PROJECT_ROOT", project)
    settings = load_settings(
        TEMPLATE_SETTINGS_FILE,
        package_settings.pipeline_step_ids(),
        set(DAG_STEPS.beam_ids),
        package_settings.pipeline_retry_roles(),
    )
    spec, _ = kfp_compile.compile_pipeline(settings)
    tasks = tfx_spec.all_tasks(spec)
    constant = tasks[TRAINER]["inputs"]["parameters"]["custom_config"]["runtimeValue"]
    trainer_config = json.loads(json.loads(constant["constant"])[CUSTOM_CONFIG_KEY])
    assert trainer_config["model"] == WINNER != dataclasses.asdict(ModelConfig())
    # The whole file reaches the run report; its provenance never the Trainer's cache key.
    report = tasks[RUN_REPORT]["inputs"]["parameters"]["hyperparameters"]["runtimeValue"]
    assert frozen_from_json(report["constant"]) == frozen
    assert "read_at" not in json.dumps(tasks[TRAINER])
    # Exactly the training DAG's steps and Kubeflow's own: nothing tunes.
    assert set(tfx_spec.executor_labels(spec)) == package_settings.pipeline_step_ids() - {DEPLOY}
    assert "keras_tuner" not in json.dumps(spec)


@pytest.mark.slow  # a TFX compile of the whole DAG
def test_the_dag_up_to_transform_is_the_same_dags_nodes_unchanged(tmp_path):
    from pipeline.local.scheduler import compile_with_uncached_steps, up_to
    from pipeline.steps import EXAMPLE_GEN, SCHEMA_IMPORTER, TRANSFORM
    from tests.harness import build

    ir = compile_with_uncached_steps(build(tmp_path))
    sub = up_to(ir, TRANSFORM)
    nodes = {n.pipeline_node.node_info.id: n.pipeline_node for n in sub.nodes}
    assert set(nodes) == {EXAMPLE_GEN, SCHEMA_IMPORTER, TRANSFORM}
    whole = {n.pipeline_node.node_info.id: n.pipeline_node for n in ir.nodes}
    for node_id, node in nodes.items():
        # Same inputs, properties and contexts (so the same cache key); edges out of
        # the sub-DAG dropped.
        assert node.inputs == whole[node_id].inputs
        assert node.parameters == whole[node_id].parameters
        assert node.contexts == whole[node_id].contexts
        assert set(node.downstream_nodes) <= set(nodes)
    assert list(nodes[TRANSFORM].upstream_nodes) == list(whole[TRANSFORM].upstream_nodes)
    with pytest.raises(ValueError, match="no such step in the pipeline: 'Tuner'"):
        up_to(ir, "Tuner")


def test_the_tuning_report_escapes_what_the_search_holds():
    # Markup, and characters a page shows as nothing or as a line break: BEL,
    # ESC, NEL (U+0085), LINE SEPARATOR (U+2028).
    controls = "bell\x07 esc\x1b nel\x85 sep\u2028"
    name = "<b>units</b> & $x$ \\ [1] #\n" + controls
    trials = (
        TrialResult(
            "0",
            "COMPLETED",
            0.5,
            0.8,
            {name: "<i>64</i>" + controls, "rate": 0.000675286},
            {"dropout": 0.1},
        ),
        TrialResult("1", "RUNNING", None, None, {name: 32}, {"dropout": 0.2}),
    )
    result = SearchResult(trials=trials, best=trials[0], partial=True, ran=("0",))
    frozen = {"model": {"dropout": 0.1}, "provenance": {"tuned_at": controls}}
    html = render_tuning_html("p<q>" + controls, result, frozen, None)
    assert "<b>" not in html and "<i>" not in html and "p<q>" not in html
    assert "&lt;b&gt;units&lt;/b&gt; &amp; $x$" in html and "&lt;i&gt;64&lt;/i&gt;" in html
    for character in ("\x07", "\x1b", "\x85", "\u2028"):
        assert character not in html, repr(character)
    # Each shown as its escape, wherever the search put it.
    assert html.count("bell\\x07 esc\\x1b nel\\x85 sep\\u2028") >= 5
    assert ">0.000675</td>" in html  # three significant digits, however small
    assert "Not frozen: the search is partial." in html
    assert '<tr class="best">' in html and html.count('<tr class="best">') == 1
