"""The floe.yaml examples of README.md and the documentation site (docs/**/*.md) validate as written: every
```yaml block that is a whole document (a `source_clusters:` or `tables:` mapping) is loaded by floe's
validator, its tables' clusters supplied when the block shows only tables; there is a complete example
per feature; and the alternatives the reference names in a comment
(`partitioning_scheme: … | ["day(at)", "bucket(16, id)"]`) validate too."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from catalog.pipelines import PipelineConfig, TableConfig, load_yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def yaml_documents() -> list[tuple[str, str]]:
    """(page:line, text) of every page's ```yaml blocks that start with a top-level key."""
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"^```yaml\n(.*?)^```$", text, re.DOTALL | re.MULTILINE):
            body = match.group(1)
            if re.match(r"(source_clusters|tables):", body):
                line = text[: match.start()].count("\n") + 1
                blocks.append((f"{page.relative_to(ROOT)}:{line}", body))
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


def test_the_pages_have_the_examples() -> None:
    bodies = [body for _, body in yaml_documents()]
    assert any("table_mode: upsert" in body for body in bodies)
    assert any("partitioning_scheme: hour" in body and "schema_registry:" in body for body in bodies)


def _complete_examples() -> list[PipelineConfig]:
    """The examples that are whole documents as written (their clusters declared)."""
    found = []
    for _, body in yaml_documents():
        if body.startswith("source_clusters:") and "\ntables:" in body:
            found.append(load_yaml(body))
    return found


Shows = Callable[[PipelineConfig, TableConfig], bool]
FEATURES: dict[str, Shows] = {
    "inline JSON": lambda c, t: t.source_format == "json" and t.schema_mode == "inline",
    "Avro with a registry": lambda c, t: t.source_format == "avro" and t.schema_mode == "registry",
    "Protobuf": lambda c, t: t.source_format == "protobuf",
    "upsert": lambda c, t: t.table_mode == "upsert" and t.envelope == "none",
    "Debezium": lambda c, t: t.envelope == "debezium",
    "a secured cluster": lambda c, t: c.cluster(t.source_cluster_name).credentials.use_tls,
    "an S3 warehouse": lambda c, t: (c.destination_bucket_url or "").startswith("s3://"),
}


@pytest.mark.parametrize("feature", FEATURES)
def test_a_complete_example_per_feature(feature: str) -> None:
    """Issue 33: a whole floe.yaml per feature, clusters and tables, that validates as written."""
    shows = FEATURES[feature]
    assert any(shows(config, table) for config in _complete_examples() for table in config.tables), (
        f"no complete floe.yaml example of {feature} in README.md or docs/"
    )


@pytest.mark.parametrize("body", [pytest.param(body, id=where) for where, body in yaml_documents()])
def test_yaml_block_validates(body: str) -> None:
    load_yaml(with_clusters(body))


def test_the_references_partitioning_alternatives_validate() -> None:
    (body,) = [
        body for _, body in yaml_documents() if "schema_registry:" in body and "# unpartitioned" in body
    ]
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
