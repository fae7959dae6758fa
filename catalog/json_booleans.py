"""Booleans only where Iceberg's JSON has them.

pyiceberg's models validate in pydantic's lax mode: they read `true` as the id 1 and `1` or `"true"` as
`required: true`, where the reference implementation refuses both. Commits, creates and view updates are
checked here before those models see them.
"""

from __future__ import annotations

from typing import Any

from catalog.errors import BadRequest

# The only booleans of a schema, spec, sort order, update or view version (schema fields and the
# elements and values of lists and maps).
BOOLEAN_FIELDS = frozenset({"required", "element-required", "value-required"})
# Values of any JSON type (a column default is a literal of its column's type) or string maps whose
# keys are the client's own (a property or summary may be called "required").
FREE_FIELDS = frozenset({"initial-default", "write-default", "properties", "summary"})


def check_booleans(value: Any, what: str) -> None:
    """`BadRequest` when `value` holds a boolean anywhere but a `BOOLEAN_FIELDS` field, or such a field
    holds anything but a boolean. `set-properties` updates are free-form string maps."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            properties = item.get("action") == "set-properties"
            for key, child in item.items():
                if key in BOOLEAN_FIELDS:
                    if not isinstance(child, bool):
                        raise BadRequest(f"Invalid {what}: '{key}' must be true or false")
                elif key in FREE_FIELDS or (properties and key == "updates"):
                    continue
                elif isinstance(child, bool):
                    raise BadRequest(f"Invalid {what}: '{key}' must not be true or false")
                else:
                    stack.append(child)
        elif isinstance(item, list):
            for child in item:
                if isinstance(child, bool):
                    raise BadRequest(f"Invalid {what}: a list must not hold true or false")
                stack.append(child)
