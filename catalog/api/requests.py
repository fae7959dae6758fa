"""The request class of the app: request bodies that cannot be decoded are the client's error."""

from __future__ import annotations

import re
from typing import Any

from litestar import Request

from catalog.errors import BadRequest

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Every integer outside int64 has at least 19 digits: bodies without such a run (nearly all) are not
# walked.
_LONG_DIGIT_RUN = re.compile(rb"[0-9]{19}")


def beyond_int64(value: Any) -> bool:
    """Whether a decoded JSON document holds an integer outside int64."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


class FloeRequest(Request[Any, Any, Any]):
    """Litestar's request, with body decoding failures answered 400 instead of 500.

    msgspec raises `RecursionError` for deeply nested JSON (Litestar maps only `msgspec.DecodeError`),
    and `UnicodeDecodeError` for invalid UTF-8 inside strings. Every integer of the REST and management
    APIs is an int64 (the spec's `format: int64`, Kafka offsets, ids, sizes), but JSON's and Python's
    are unbounded: a larger one is refused here, before a model, a metadata file or the database sees it.
    """

    _checked_int64 = False

    async def json(self) -> Any:
        try:
            value = await super().json()
        except RecursionError as exc:
            raise BadRequest("Malformed request: JSON is nested too deeply") from exc
        except UnicodeDecodeError as exc:
            raise BadRequest("Malformed request: body is not valid UTF-8") from exc
        if not self._checked_int64:
            if _LONG_DIGIT_RUN.search(await self.body()) and beyond_int64(value):
                raise BadRequest("Malformed request: integers must fit in 64 bits (int64)")
            self._checked_int64 = True
        return value
