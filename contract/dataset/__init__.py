"""The dataset contract: a dataset directory's `dataset.yaml`, a module per job.

- `spec.py`: `DatasetSpec`, the whole file, the names it travels under, and its
  check against the data's columns
- `sections.py`: its sections (`label:`, `features:`, `evaluation:`, `input:`,
  `drift:`), each a dataclass whose fields are declared once
- `parse.py`: plain values (the YAML file, a component's `custom_config`) into a
  `DatasetSpec`, errors naming the field; `load_spec` reads the file
- `names.py`: the name each raw column goes by inside the model, and the label's
- `span_grammar.py`: the span pattern of `input.pattern`, its placeholders and how a
  file's path reads against it (TFX's rule)
- `task_metrics.py`: each task's metrics, which `label.task` picks
- `error.py`: `DatasetSpecError`, and the field kit bound to it
- `reference.py`: the docs' field reference, made from the declarations

Each name is imported from its module: this package re-exports none, so that
every name has one import path.
"""
