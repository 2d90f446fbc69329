"""The span placeholders of a dataset spec's `input.pattern`, as TFX's ExampleGen reads them.

`{SPAN}` (or `{SPAN:N}`, zero-padded to N digits), the date `{YYYY}`, `{MM}`,
`{DD}` (the span is the day's number since 1970-01-01), and `{VERSION}` (or
`{VERSION:N}`).
"""

from __future__ import annotations

import re

SPAN_PLACEHOLDER = re.compile(r"\{SPAN(?::(\d+))?\}")
VERSION_PLACEHOLDER = re.compile(r"\{VERSION(?::(\d+))?\}")
DATE_PLACEHOLDERS = ("{YYYY}", "{MM}", "{DD}")
