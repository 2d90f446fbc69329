"""The boundary between the fork's files and the template's machinery (trainer/fork/).

A fork owns the files copier.yml skips on update; the machinery takes from them
only the names trainer/fork declares, and only there. Each check is a function
of a tree (or a README's text), so that a leaking tree shows it fails:

- machinery (any .py outside tests/, the fork files and trainer/fork/) importing a
  fork file;
- the interface taking a name it does not declare;
- a fork file defining something nothing in it uses, the interface does not
  declare and no spec names (the machinery's, left in a fork's file);
- the README's "Where to change what" sending a fork into a machinery file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT
from trainer.fork import DECLARED, FORK_FILES, RETIRED, top_level_names

FORK_MODULES = set(FORK_FILES)
INTERFACE = "trainer/fork"
# Where the interface's module for each fork file is.
INTERFACE_FILES = {
    "trainer/fork/model_file.py": "trainer.model",
    "trainer/fork/custom_file.py": "trainer.custom",
    "trainer/fork/search_space_file.py": "trainer.search_space",
    "trainer/fork/config_file.py": "pipeline.config",
}
# The fork's files that are not Python, read as data.
FORK_DATA_FILES = (
    "kubeflow/pipeline.yaml",
    "schemas/<dataset>/dataset.yaml",
    "schemas/<dataset>/schema.pbtxt",
)
SKIPPED_DIRS = {".venv", ".git", "tests", "site", "node_modules", "__pycache__"}


def machinery_files(root: Path) -> list[Path]:
    """Every .py under `root` that is the template's machinery (runners and benchmarks too)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if SKIPPED_DIRS & set(relative.parts) or any(p.startswith(".") for p in relative.parts):
            continue
        name = relative.as_posix()
        if name in FORK_FILES.values() or name.startswith(f"{INTERFACE}/"):
            continue
        found.append(path)
    return found


def imported_fork_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of each import of a fork file in `tree`, function-level ones too."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            hits += [(node.lineno, a.name) for a in node.names if a.name in FORK_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module in FORK_MODULES:
                hits.append((node.lineno, node.module))
            hits += [
                (node.lineno, f"{node.module}.{a.name}")
                for a in node.names
                if f"{node.module}.{a.name}" in FORK_MODULES
            ]
        elif isinstance(node, ast.Constant) and node.value in FORK_MODULES:
            # importlib.import_module("trainer.model") and its kind: a module named as text.
            hits.append((node.lineno, node.value))
    return hits


def leaks(root: Path) -> list[str]:
    """`file:line imports module` for each machinery import of a fork file under `root`."""
    found = []
    for path in machinery_files(root):
        tree = ast.parse(path.read_text(), str(path))
        for line, module in imported_fork_modules(tree):
            found.append(f"{path.relative_to(root).as_posix()}:{line} imports {module}")
    return found


def names_taken(source: str, fork_module: str) -> set[str]:
    """The names an interface module takes from its fork file: `take(...)`/`take_callable(...)`
    calls' constant names, `hasattr`/`getattr` on the module, and `module.attribute` reads."""
    tree = ast.parse(source)
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if f"{node.module}.{alias.name}" == fork_module:
                    aliases.add(alias.asname or alias.name)
    taken = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = node.args
            if (
                node.func.id in {"take", "take_callable", "hasattr", "getattr"}
                and len(args) >= 2
                and isinstance(args[0], ast.Name)
                and args[0].id in aliases
            ):
                taken.add(args[1].value if isinstance(args[1], ast.Constant) else "<dynamic>")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            taken.add(node.attr)
    return taken


def undeclared_definitions(source: str, declared: set[str], spec_names: set[str]) -> set[str]:
    """Public top-level names a fork file defines that neither the file itself uses, nor the
    interface declares, nor a spec names (`label.derive`): the machinery's, left there."""
    tree = ast.parse(source)
    defined = top_level_names(tree, imported=False)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return {
        name
        for name in defined
        if not name.startswith("_") and name not in declared | spec_names | used
    }


def readme_edit_targets(readme: str) -> list[tuple[str, str]]:
    """(row, path) for each file path in the "edit" column of "Where to change what"."""
    section = readme.split("## Where to change what", 1)[1].split("\n## ", 1)[0]
    targets = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[1] in {"edit", "---"}:
            continue
        for path in re.findall(r"`([^`]+)`", cells[1]):
            if "/" in path or "." in path:
                targets.append((cells[0], path))
    return targets


def not_fork_files(targets: list[tuple[str, str]]) -> list[str]:
    owned = {*FORK_FILES.values(), *FORK_DATA_FILES}
    return [f"{row}: {path}" for row, path in targets if path not in owned]


def spec_derived_labels() -> set[str]:
    spec = yaml.safe_load((REPO_ROOT / "schemas" / "chicago_taxi" / "dataset.yaml").read_text())
    return {spec["label"]["derive"]} if spec["label"].get("derive") else set()


# --- the checks on this tree --------------------------------------------------


def test_the_machinery_imports_no_fork_file_outside_the_interface():
    assert leaks(REPO_ROOT) == []


@pytest.mark.parametrize("interface_file", sorted(INTERFACE_FILES))
def test_the_interface_takes_exactly_the_names_it_declares(interface_file):
    module = INTERFACE_FILES[interface_file]
    taken = names_taken((REPO_ROOT / interface_file).read_text(), module)
    dynamic = {"<dynamic>"} if module == "trainer.custom" else set()  # label.derive's name
    # A retired name is only asked after, so that a fork made before the interface is told.
    assert taken - set(RETIRED.get(module, ())) == set(DECLARED[module]) | dynamic


@pytest.mark.parametrize("module", sorted(FORK_FILES))
def test_each_fork_file_holds_only_what_a_fork_writes(module):
    source = (REPO_ROOT / FORK_FILES[module]).read_text()
    assert undeclared_definitions(source, set(DECLARED[module]), spec_derived_labels()) == set()
    # The template's own fork files show every hook, and none of the retired names.
    top = top_level_names(ast.parse(source), imported=False)
    assert set(DECLARED[module]) <= top
    assert not top & set(RETIRED.get(module, ()))


def test_the_readme_sends_a_fork_only_to_its_own_files():
    targets = readme_edit_targets((REPO_ROOT / "README.md").read_text())
    assert len(targets) > 10
    assert not_fork_files(targets) == []


def test_the_fork_files_are_the_ones_copier_keeps():
    copier = yaml.safe_load((REPO_ROOT / "copier.yml").read_text())
    kept = {p.replace("{{ dataset_dir }}", "<dataset>") for p in copier["_skip_if_exists"]}
    assert kept == {*FORK_FILES.values(), *FORK_DATA_FILES}


# --- each check fails on a leaking tree ---------------------------------------


def test_a_machinery_import_of_a_fork_file_is_found(tmp_path):
    (tmp_path / "components" / "scoring").mkdir(parents=True)
    (tmp_path / "components" / "scoring" / "executor.py").write_text(
        "def f():\n    from trainer.model import output_name\n    return output_name\n"
    )
    (tmp_path / "local_runner.py").write_text("from pipeline import config\n")
    (tmp_path / "bench.py").write_text(
        "import importlib\nimportlib.import_module('trainer.custom')\n"
    )
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "model.py").write_text("from trainer.custom import x\n")  # a fork file
    assert leaks(tmp_path) == [
        "bench.py:2 imports trainer.custom",
        "components/scoring/executor.py:2 imports trainer.model",
        "local_runner.py:1 imports pipeline.config",
    ]


def test_an_undeclared_name_taken_by_the_interface_is_found():
    source = (
        "from trainer.fork import take\n"
        "def f():\n    from trainer import model\n"
        "    return take(model, 'build_model'), model.output_name\n"
    )
    assert names_taken(source, "trainer.model") == {"build_model", "output_name"}


def test_machinery_left_in_a_fork_file_is_found():
    source = (REPO_ROOT / "trainer" / "model.py").read_text() + (
        "\n\ndef output_name(label):\n    return 'probabilities'\n"
    )
    assert undeclared_definitions(source, set(DECLARED["trainer.model"]), set()) == {"output_name"}


def test_a_readme_row_naming_a_machinery_file_is_found():
    readme = (
        (REPO_ROOT / "README.md")
        .read_text()
        .replace(
            "## Where to change what\n\n| to change | edit | where in it |\n| --- | --- | --- |\n",
            "## Where to change what\n\n| to change | edit | where in it |\n| --- | --- | --- |\n"
            "| the DAG itself | `pipeline/pipeline.py` | `create_pipeline` |\n",
        )
    )
    assert not_fork_files(readme_edit_targets(readme)) == ["the DAG itself: pipeline/pipeline.py"]


# --- the hooks, each in a fork file -------------------------------------------


def test_a_new_hyperparameter_reaches_the_variants_the_trainer_and_the_frozen_file(monkeypatch):
    """A field a fork adds to trainer/search_space.py's `Hyperparameters`: every variant has
    its default, a variant may set it, the Trainer reads it back from its custom_config,
    and the tuner's frozen file may hold it (of its type); without the field it is refused."""
    import dataclasses

    from pipeline.pipeline_config import PipelineConfig
    from trainer import search_space
    from trainer.config import ModelConfig, TrainerConfig
    from trainer.fork.search_space_file import hyperparameters_class
    from trainer.hyperparameters import FrozenHyperparameters, HyperparametersError

    @dataclasses.dataclass(frozen=True)
    class Hyperparameters(ModelConfig):
        activation: str = "relu"

    monkeypatch.setattr(search_space, "Hyperparameters", Hyperparameters)
    assert PipelineConfig().trainer.model.activation == "relu"
    config = PipelineConfig().with_model(activation="tanh", hidden_units=(8,))
    sent = config.trainer.to_custom_config()
    assert TrainerConfig.from_custom_config(sent, hyperparameters_class()) == config.trainer
    frozen = FrozenHyperparameters(model={"activation": "gelu", "hidden_units": [4]})
    assert config.with_hyperparameters(frozen).trainer.model.activation == "gelu"
    with pytest.raises(HyperparametersError, match=r"model\.activation: must be str, got 3"):
        FrozenHyperparameters(model={"activation": 3})
    monkeypatch.setattr(search_space, "Hyperparameters", ModelConfig)
    with pytest.raises(HyperparametersError, match=r"model\.activation: not a field"):
        FrozenHyperparameters(model={"activation": "gelu"})
    with pytest.raises(ValueError, match="activation"):  # the Trainer's read, without it
        TrainerConfig.from_custom_config(sent, hyperparameters_class())


def test_hyperparameters_that_are_not_model_settings_are_refused_in_one_line(monkeypatch):
    from trainer import search_space
    from trainer.fork import ForkInterfaceError
    from trainer.fork.search_space_file import hyperparameters_class

    monkeypatch.setattr(search_space, "Hyperparameters", dict)
    with pytest.raises(ForkInterfaceError, match=r"^trainer/search_space.py: Hyperparameters must"):
        hyperparameters_class()


def test_a_fork_file_without_a_required_name_stops_in_one_line_naming_it(monkeypatch):
    from trainer import model
    from trainer.fork import ForkInterfaceError
    from trainer.fork.model_file import loss_and_metrics

    monkeypatch.delattr(model, "loss_and_metrics")
    with pytest.raises(ForkInterfaceError) as raised:
        loss_and_metrics(None)
    assert str(raised.value).startswith(
        "trainer/model.py defines no loss_and_metrics: the template needs loss_and_metrics(label)"
    )
    assert "\n" not in str(raised.value)


def test_a_model_file_from_before_the_interface_is_told_where_its_optimizer_goes(monkeypatch):
    """A fork's old model.py compiled the model itself: an optimizer edited there would be
    dropped, so the run stops and says what to move; without compile_model, Adam."""
    from trainer import model
    from trainer.config import ModelConfig
    from trainer.fork import ForkInterfaceError
    from trainer.fork.model_file import optimizer

    monkeypatch.delattr(model, "optimizer")
    assert type(optimizer(ModelConfig())).__name__ == "Adam"  # an optional hook's default
    monkeypatch.setattr(model, "compile_model", lambda *a, **k: None, raising=False)
    with pytest.raises(ForkInterfaceError, match=r"defines compile_model, which the template"):
        optimizer(ModelConfig())


def test_a_config_file_from_before_the_interface_runs_with_its_own_class(monkeypatch, capsys):
    """An old pipeline/config.py defines PipelineConfig itself: its values are taken into the
    template's class, and one line says what to change."""
    import dataclasses

    from pipeline import config
    from pipeline.pipeline_config import PipelineConfig
    from trainer.config import TrainerConfig
    from trainer.fork.config_file import variant

    @dataclasses.dataclass(frozen=True)
    class OldPipelineConfig:  # as pipeline/config.py defined it before
        train_steps: int = 300
        eval_steps: int = 20
        trainer: TrainerConfig = dataclasses.field(default_factory=TrainerConfig)
        enable_cache: bool = True

    monkeypatch.setattr(config, "VARIANTS", {"default": OldPipelineConfig})
    taken = variant("default")
    assert type(taken) is PipelineConfig and taken.train_steps == 300
    assert capsys.readouterr().err.startswith(
        "warning: pipeline/config.py defines its own PipelineConfig"
    )
    monkeypatch.setattr(config, "VARIANTS", {"default": dict})
    with pytest.raises(ValueError, match="returned dict, not a PipelineConfig"):
        variant("default")
    with pytest.raises(
        ValueError, match=r"unknown config variant 'gpu'; choose from \['default'\]"
    ):
        variant("gpu")


def test_adjust_features_may_replace_or_drop_a_spec_feature_but_add_none(monkeypatch):
    from contract.dataset.error import DatasetSpecError
    from trainer import custom
    from trainer.fork.custom_file import adjust_features

    features = {"fare_xf": 1.0, "company_xf": 2}
    assert adjust_features(dict(features), {}) == features  # the template's: unchanged
    monkeypatch.setattr(custom, "adjust_features", lambda f, i: {"fare_xf": 3.0})
    assert adjust_features(dict(features), {}) == {"fare_xf": 3.0}
    monkeypatch.setattr(custom, "adjust_features", lambda f, i: {**f, "speed": 1.0})
    with pytest.raises(DatasetSpecError, match=r"adjust_features: 'speed' is not one of the spec"):
        adjust_features(dict(features), {})


def test_a_derived_label_is_any_public_function_of_custom_py_and_nothing_else():
    from contract.dataset.error import DatasetSpecError
    from trainer.custom import big_tipper
    from trainer.fork.custom_file import derived_label

    assert derived_label("big_tipper") is big_tipper
    for name in ("BIG_TIP_FRACTION", "_private", "nosuch"):
        with pytest.raises(DatasetSpecError, match=f"has no function '{name}'"):
            derived_label(name)


@pytest.fixture
def fork_step(monkeypatch):
    """pipeline/config.py's `extra_steps` adding tests/fork_step.py's ModelSize."""
    from pipeline import config

    def extra_steps(dag):
        from tests.fork_step import ModelSize

        return [ModelSize(model=dag["Trainer"].outputs["model"]).with_id("ModelSize")]

    monkeypatch.setattr(config, "extra_steps", extra_steps)


def test_a_fork_step_joins_the_dag_after_the_templates(tmp_path, fork_step):
    from tests.harness import build

    steps = {c.id: c for c in build(tmp_path).components}
    assert {n.id for n in steps["ModelSize"].upstream_nodes} == {"Trainer"}


def test_a_fork_step_is_in_the_kubeflow_package(fork_step):
    from kubeflow import compile as kfp_compile
    from kubeflow import package_settings, tfx_spec
    from kubeflow.package_settings import pipeline_step_ids
    from kubeflow.settings import load_settings
    from tests.conftest import TEMPLATE_SETTINGS_FILE

    settings = load_settings(
        TEMPLATE_SETTINGS_FILE, pipeline_step_ids(), None, package_settings.pipeline_retry_roles()
    )
    spec, _ = kfp_compile.compile_pipeline(settings)
    tasks = tfx_spec.all_tasks(spec)
    assert tasks["ModelSize"]["dependentTasks"] == ["Trainer"]
    executor = tfx_spec.executor_labels(spec)["ModelSize"]
    image = spec["deploymentSpec"]["executors"][executor]["container"]
    assert "tests.fork_step.ModelSize_Executor" in image["args"]


def test_a_fork_step_with_a_templates_id_is_refused(tmp_path, monkeypatch):
    from pipeline import config
    from tests.harness import build

    def extra_steps(dag):
        from tests.fork_step import ModelSize

        return [ModelSize(model=dag["Trainer"].outputs["model"]).with_id("Pusher")]

    monkeypatch.setattr(config, "extra_steps", extra_steps)
    with pytest.raises(ValueError, match="extra_steps: step id 'Pusher' is taken"):
        build(tmp_path)


# --- the check before a run starts ----------------------------------------------

OLD_MODEL_FILE = """
import keras

def build_model(config, label, input_sizes, *, dtype_policy="float32"):
    ...

def loss_and_metrics(label):
    ...

def compile_model(model, config, label, *, precision, jit_compile):
    model.compile(optimizer=keras.optimizers.SGD(0.1))
"""


def fork_copy(tmp_path: Path) -> Path:
    for relative in FORK_FILES.values():
        target = tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((REPO_ROOT / relative).read_text())
    return tmp_path


def test_the_templates_fork_files_pass_the_check_before_a_run():
    from trainer.fork import check_fork_files

    check_fork_files()
    check_fork_files(REPO_ROOT)


@pytest.mark.parametrize(
    ("relative", "text", "message"),
    [
        ("trainer/model.py", OLD_MODEL_FILE, "trainer/model.py defines compile_model, which"),
        (
            "trainer/model.py",
            "def build_model(config, label, input_sizes, *, dtype_policy): ...\n",
            "trainer/model.py defines no loss_and_metrics: the template needs",
        ),
        ("trainer/custom.py", "def extra_features(inputs)\n", "trainer/custom.py, line 1: "),
        ("pipeline/config.py", "VARIANT = {}\n", "pipeline/config.py defines no VARIANTS"),
        ("trainer/search_space.py", None, "trainer/search_space.py is missing"),
    ],
)
def test_a_fork_file_that_cannot_run_is_refused_before_the_run_in_one_line(
    tmp_path, relative, text, message
):
    from trainer.fork import ForkInterfaceError, check_fork_files

    root = fork_copy(tmp_path)
    if text is None:
        (root / relative).unlink()
    else:
        (root / relative).write_text(text)
    with pytest.raises(SyntaxError if ", line " in message else ForkInterfaceError) as raised:
        check_fork_files(root)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    # The same file with the migration done passes: an optimizer beside compile_model.
    if text is OLD_MODEL_FILE:
        (root / relative).write_text(text + "\ndef optimizer(config):\n    ...\n")
        check_fork_files(root)


@pytest.mark.parametrize(
    ("old_import", "message"),
    [
        (
            "from trainer.dataset_spec import GATE_METRICS, LabelSpec, parse_spec",
            "trainer/model.py, line 1: imports trainer.dataset_spec, which the template moved: "
            "import GATE_METRICS and LabelSpec from contract.dataset.sections; import "
            'parse_spec from contract.dataset.parse (CHANGELOG.md, "Migrating a fork")',
        ),
        (
            "import trainer.fields",
            "trainer/model.py, line 1: imports trainer.fields, which the template moved: "
            'import contract.fields instead (CHANGELOG.md, "Migrating a fork")',
        ),
        (
            "from trainer.task_metrics import TASK_METRICS",
            "trainer/model.py, line 1: imports trainer.task_metrics, which the template moved: "
            "import TASK_METRICS from contract.dataset.task_metrics "
            '(CHANGELOG.md, "Migrating a fork")',
        ),
    ],
)
def test_a_fork_file_importing_a_moved_module_is_told_where_its_names_went(
    tmp_path, old_import, message
):
    """`copier update` keeps a fork's trainer/model.py, and the template's own imported
    trainer.dataset_spec before the contract/ room: the check before the run says where
    each name is now, from the source, where the Trainer step would fail on the import."""
    from trainer.fork import ForkInterfaceError, check_fork_files

    root = fork_copy(tmp_path)
    model = root / "trainer" / "model.py"
    model.write_text(old_import + "\n" + model.read_text())
    with pytest.raises(ForkInterfaceError) as raised:
        check_fork_files(root)
    assert str(raised.value) == message


@pytest.mark.slow  # real tf.Transform, in this process
def test_adjust_features_reaches_the_transform_graph_serving_replays(tmp_path, monkeypatch):
    """trainer/custom.py's `adjust_features`, as a fork writes it: `fare_xf` replaced by a
    log-scaled fare and `company_xf` dropped, in the analysis and in the written graph that
    serving runs (tests/conftest.py `analyze_and_transform` returns the graph's rows)."""
    import math

    import tensorflow as tf

    from tests.conftest import analyze_and_transform, load_schema, read_taxi_rows
    from trainer import custom
    from trainer.preprocessing import fill_in_missing

    def adjust_features(features, inputs):
        features["fare_xf"] = tf.math.log1p(tf.cast(fill_in_missing(inputs["fare"]), tf.float32))
        del features["company_xf"]
        return features

    monkeypatch.setattr(custom, "adjust_features", adjust_features)
    _, raw = read_taxi_rows(limit=8)
    output, rows = analyze_and_transform(raw, load_schema(), tmp_path)
    assert "company_xf" not in rows and "company_xf" not in output.transformed_feature_spec()
    fares = [float(row["fare"] or 0) for row in raw]
    got = [float(v) for v in rows["fare_xf"].numpy()]
    assert got == pytest.approx([math.log1p(f) for f in fares], rel=1e-6)
