"""README's floe.yaml examples validate as written: every ```yaml block that is a whole document (a
`source_clusters:` or `tables:` mapping) is loaded by floe's validator, its tables' clusters supplied when
the block shows only tables; and the alternatives the reference names in a comment
(`partitioning_scheme: … | ["day(at)", "bucket(16, id)"]`) validate too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from catalog.pipelines import load_yaml

README = Path(__file__).resolve().parents[2] / "README.md"


def yaml_documents() -> list[tuple[int, str]]:
    """(line, text) of README's ```yaml blocks that start with a top-level key."""
    text = README.read_text(encoding="utf-8")
    blocks = []
    for match in re.finditer(r"^```yaml\n(.*?)^```$", text, re.DOTALL | re.MULTILINE):
        body = match.group(1)
        if re.match(r"(source_clusters|tables):", body):
            blocks.append((text[: match.start()].count("\n") + 1, body))
    return blocks


def with_clusters(body: str) -> str:
    """`body` with a source cluster for each `source_cluster_name` it uses but does not declare."""
    data = yaml.safe_load(body)
    declared = {c["name"] for c in data.get("source_clusters") or []}
    used = {t["source_cluster_name"] for t in data.get("tables") or []}
    missing = sorted(used - declared)
    if not missing or "source_clusters" in data:
        return body
    clusters = "".join(
        f"  - {{name: {name}, bootstrap_brokers: [{{hostname: localhost, port: 9092}}]}}\n"
        for name in missing
    )
    return f"source_clusters:\n{clusters}{body}"


def test_readme_has_the_examples() -> None:
    bodies = [body for _, body in yaml_documents()]
    assert any("table_mode: upsert" in body for body in bodies)
    assert any("partitioning_scheme: hour" in body and "schema_registry:" in body for body in bodies)


@pytest.mark.parametrize("body", [pytest.param(body, id=f"line{line}") for line, body in yaml_documents()])
def test_readme_yaml_block_validates(body: str) -> None:
    load_yaml(with_clusters(body))


def test_the_references_partitioning_alternatives_validate() -> None:
    (body,) = [body for _, body in yaml_documents() if "schema_registry:" in body]
    comment = re.search(r"^    partitioning_scheme: hour +# (.*)$", body, re.MULTILINE)
    assert comment is not None
    alternatives = [a.strip() for a in comment.group(1).split(" | ")]
    assert len(alternatives) == 4, alternatives
    assert alternatives[:2] == ["unpartitioned", "hour"]
    for alternative in ["unpartitioned", "hour", "day", alternatives[-1]]:
        replaced = body.replace(comment.group(0), f"    partitioning_scheme: {alternative}")
        scheme = load_yaml(replaced).tables[0].partitioning_scheme
        wanted = yaml.safe_load(alternative)
        assert scheme == (tuple(wanted) if isinstance(wanted, list) else wanted)
