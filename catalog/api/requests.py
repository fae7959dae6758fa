"""The request class of the app: request bodies that cannot be decoded are the client's error."""

from __future__ import annotations

from typing import Any

from litestar import Request

from catalog.errors import BadRequest


class FloeRequest(Request[Any, Any, Any]):
    """Litestar's request, with body decoding failures answered 400 instead of 500.

    msgspec raises `RecursionError` for deeply nested JSON (Litestar maps only `msgspec.DecodeError`),
    and `UnicodeDecodeError` for invalid UTF-8 inside strings.
    """

    async def json(self) -> Any:
        try:
            return await super().json()
        except RecursionError as exc:
            raise BadRequest("Malformed request: JSON is nested too deeply") from exc
        except UnicodeDecodeError as exc:
            raise BadRequest("Malformed request: body is not valid UTF-8") from exc
