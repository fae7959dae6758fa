"""The request pipeline's `limits` step: a request body no longer than its operation allows.

A declared `Content-Length` over the limit is refused before any of the body is read (and before the
caller is authenticated; after the audit step, which records the refusal as it records a refused
token); a body without one (chunked) is counted as `receive` delivers it and refused
as soon as it passes the limit, so no step or handler ever holds more than the limit. The refusal is
`BodyTooLarge`, answered by `catalog.api.errors` (413: Iceberg error JSON, OAuth2 error JSON on the
token endpoint). GET and HEAD requests skip the step: no handler reads their body, and the server
discards a body nobody reads as it arrives (connection-level limits, `catalog.http_limits`, bound the
time it may take).
"""

from __future__ import annotations

from litestar.types import ASGIApp, Receive, ReceiveMessage, Scope, Send

from catalog.api.errors import failure, send_answer
from catalog.errors import BodyTooLarge

# Methods whose body no handler reads: the step is not composed for them.
BODYLESS_METHODS = frozenset({"GET", "HEAD"})
# Any longer Content-Length is over every limit (and Python refuses to parse thousands of digits).
MAX_CONTENT_LENGTH_DIGITS = 18


def body_limit_step(app: ASGIApp, limit: int) -> ASGIApp:
    """`app` behind a body limit of `limit` bytes."""

    async def limited(scope: Scope, receive: Receive, send: Send) -> None:
        declared = b""
        chunked = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                declared = value
            elif name == b"transfer-encoding":
                chunked = True
        if declared.isdigit():
            if len(declared) > MAX_CONTENT_LENGTH_DIGITS or int(declared) > limit:
                # Answered here, through the steps before it: the audit step records the refusal.
                await send_answer(send, failure(scope, BodyTooLarge(limit)))
                return
            if not chunked:  # the server delivers no more than the declared length
                await app(scope, receive, send)
                return
        await app(scope, counted_receive(receive, limit), send)

    return limited


def counted_receive(receive: Receive, limit: int) -> Receive:
    """`receive` that raises `BodyTooLarge` once the body it delivered passes `limit` bytes."""
    received = 0

    async def counted() -> ReceiveMessage:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                raise BodyTooLarge(limit)
        return message

    return counted
