"""The dataset spec's error, and the field kit (contract/fields.py) bound to it.

Every part of the contract raises it, its message starting with the field's path
(`label.classes: ...`), so that the runner's one line names what to fix.
"""

from __future__ import annotations

from contract.fields import Checks, FieldError


class DatasetSpecError(FieldError):
    """The dataset spec is malformed or does not fit the data; the message names the field."""


check = Checks(DatasetSpecError)
