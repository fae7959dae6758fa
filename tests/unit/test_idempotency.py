"""`Idempotency-Key`, the pure rule: which responses carry secrets (never stored, never replayed).
The behaviour through the API is in tests/api/test_idempotency.py."""

from __future__ import annotations

import json

from catalog.api.middleware import _carries_secret


def test_responses_with_secrets_are_recognized() -> None:
    loaded = {"metadata-location": "s3://b/t/m.json", "metadata": {"properties": {"a": "b"}}, "config": {}}
    assert not _carries_secret(json.dumps(loaded).encode())
    assert not _carries_secret(b"")
    assert not _carries_secret(json.dumps({"error": {"message": "token expired"}}).encode())
    vended = {**loaded, "config": {"s3.access-key-id": "AK", "s3.secret-access-key": "SK"}}
    assert _carries_secret(json.dumps(vended).encode())
    credentials = {**loaded, "storage-credentials": [{"prefix": "s3://b/t", "config": {}}]}
    assert _carries_secret(json.dumps(credentials).encode())
    assert _carries_secret(json.dumps({"client_id": "floe_x", "client_secret": "s"}).encode())
    assert _carries_secret(json.dumps({"access_token": "t", "token_type": "bearer"}).encode())
