"""`floe apply`'s refusals from the server (the checks that need the applied tables, such as a narrowed
type) read like its own validation errors: the YAML path and line of each, exit status 1, no
`PUT /pipeline failed (400)` (issue 33 item 7)."""

from __future__ import annotations

import uuid
from pathlib import Path

from devtools.catalog_server import CatalogProcess
from tests.api.test_cli import floe

CONFIG = """\
source_clusters:
  - name: {cluster}
    bootstrap_brokers:
      - {{ hostname: localhost, port: 9092 }}
tables:
  - source_cluster_name: {cluster}
    source_topic: events
    source_format: json
    schema:
      fields:
        - {{ name: id, id: 1, type: long }}
        - {{ name: amount, id: 2, type: {amount} }}
"""


def test_a_narrowed_type_is_refused_at_its_line(catalog_server: CatalogProcess, tmp_path: Path) -> None:
    env = {
        "FLOE_URL": catalog_server.url,
        "FLOE_CLIENT_ID": catalog_server.admin_client_id,
        "FLOE_CLIENT_SECRET": catalog_server.admin_client_secret,
        "FLOE_HOME": str(tmp_path / "home"),
    }
    cluster = f"narrow_{uuid.uuid4().hex[:8]}"
    path = tmp_path / "floe.yaml"
    path.write_text(CONFIG.format(cluster=cluster, amount="double"))
    applied = floe("apply", "-f", str(path), env=env)
    assert applied.exit_code == 0, applied.output
    path.write_text(CONFIG.format(cluster=cluster, amount="float"))  # double -> float: narrowing
    refused = floe("apply", "-f", str(path), env=env)
    assert refused.exit_code == 1, refused.output
    assert "PUT /pipeline failed" not in refused.stderr
    assert "Traceback" not in refused.output
    lines = refused.stderr.splitlines()
    assert lines[0] == f"{path}: 1 error(s), nothing applied"
    assert lines[1].startswith("  tables[0].schema.fields[1].type (line 12): "), lines
    assert "float" in lines[1]
    assert refused.stdout == ""
