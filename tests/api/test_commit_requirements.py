"""Typed commit requirements over HTTP, for tables and views: a requirement that does not hold is a 409
`CommitFailedException` (clients match the type), one that is malformed a 400 `BadRequestException`
naming the requirement and field (never a 500), and nothing is committed either way. View commits run
through the commit loop tables use, so a commit that lands is answered once per Idempotency-Key."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.test_rest_api import (
    PREFIX,
    assert_error,
    commit,
    create_table,
    load_table,
    view_body,
)

MALFORMED_TABLE_REQUIREMENTS = [
    (
        {"type": "assert-current-schema-id", "current-schema-id": "0"},
        "Invalid requirement: assert-current-schema-id: "
        "Input should be a valid integer at 'current-schema-id'",
    ),
    (
        {"type": "assert-default-spec-id", "default-spec-id": True},
        "Invalid requirement: assert-default-spec-id: Input should be a valid integer at 'default-spec-id'",
    ),
    (
        {"type": "assert-ref-snapshot-id", "snapshot-id": 1},
        "Invalid requirement: assert-ref-snapshot-id: Field required at 'ref'",
    ),
    ({"type": "assert-table-uuid", "uuid": ["x"]}, None),
    ({"type": "assert-table-uuid", "uuid": "not-a-uuid"}, None),
    ({"type": "assert-last-assigned-field-id"}, None),
]


@pytest.mark.parametrize(("requirement", "message"), MALFORMED_TABLE_REQUIREMENTS)
def test_a_malformed_table_requirement_is_a_bad_request(
    http: httpx.Client, namespace: str, requirement: dict[str, Any], message: str | None
) -> None:
    levels = (namespace,)
    create_table(http, levels, "t")
    before = load_table(http, levels, "t")
    response = commit(http, levels, "t", [requirement], [{"action": "set-properties", "updates": {"x": "1"}}])
    text = assert_error(response, 400, "BadRequestException")
    assert text.startswith(f"Invalid requirement: {requirement['type']}: "), text
    if message is not None:
        assert text == message
    assert load_table(http, levels, "t")["metadata-location"] == before["metadata-location"]


def view_url(namespace: str, name: str = "v") -> str:
    return f"{PREFIX}/namespaces/{namespace}/views/{name}"


def create_view(http: httpx.Client, namespace: str) -> dict[str, Any]:
    response = http.post(f"{PREFIX}/namespaces/{namespace}/views", json=view_body("v", (namespace,)))
    assert response.status_code == 200, response.text
    created: dict[str, Any] = response.json()
    return created


def replace_view(
    http: httpx.Client, namespace: str, requirements: Any, updates: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    return http.post(
        view_url(namespace), json={"requirements": requirements, "updates": updates}, headers=headers
    )


def test_view_requirements(http: httpx.Client, namespace: str) -> None:
    created = create_view(http, namespace)
    view_uuid = created["metadata"]["view-uuid"]
    other = "00000000-0000-0000-0000-000000000000"
    set_property = [{"action": "set-properties", "updates": {"x": "1"}}]

    failed = replace_view(http, namespace, [{"type": "assert-view-uuid", "uuid": other}], set_property)
    assert_error(
        failed,
        409,
        "CommitFailedException",
        f"Requirement failed: view UUID does not match: expected {view_uuid} != {other}",
    )
    for requirement, message in [
        ({"type": "assert-view-uuid", "uuid": "nope"}, "Invalid requirement: assert-view-uuid: "),
        ({"type": "assert-view-uuid"}, "Invalid requirement: assert-view-uuid: Field required at 'uuid'"),
        ({"type": "assert-create"}, "Unknown view requirement type: assert-create"),
    ]:
        text = assert_error(
            replace_view(http, namespace, [requirement], set_property), 400, "BadRequestException"
        )
        assert text.startswith(message), text
    unchanged = http.get(view_url(namespace)).json()
    assert unchanged["metadata-location"] == created["metadata-location"]

    holding = [{"type": "assert-view-uuid", "uuid": view_uuid.upper()}]
    replaced = replace_view(http, namespace, holding, set_property)
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["metadata"]["properties"] == {"x": "1"}


def test_a_view_commit_is_applied_once_per_idempotency_key(http: httpx.Client, namespace: str) -> None:
    create_view(http, namespace)
    headers = {"Idempotency-Key": f"view-commit-{namespace}"}
    updates = [{"action": "set-properties", "updates": {"x": "1"}}]
    first = replace_view(http, namespace, [], updates, headers)
    assert first.status_code == 200, first.text
    again = replace_view(http, namespace, [], updates, headers)
    assert again.status_code == 200, again.text
    assert again.json()["metadata-location"] == first.json()["metadata-location"]
    assert http.get(view_url(namespace)).json()["metadata-location"] == first.json()["metadata-location"]
