"""`floe apply` on the command line, a real process against a real server: dry run, apply, re-apply,
a file refused with every error at its YAML path, a refused evolution reported. The API behind it is in
tests/api/test_pipeline_apply.py, whose helpers this module shares."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import httpx
import yaml

from devtools.catalog_server import CatalogProcess
from tests.api.test_pipeline_apply import BASE_FIELDS, apply, one_table, revision, seed_config, table_fields


def floe_cli(server: CatalogProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "FLOE_URL": server.url,
        "FLOE_CLIENT_ID": server.admin_client_id,
        "FLOE_CLIENT_SECRET": server.admin_client_secret,
        "COLUMNS": "250",
    }
    return subprocess.run(
        [sys.executable, "-m", "floe.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_floe_apply_cli(catalog_server: CatalogProcess, http: httpx.Client, tmp_path: Path) -> None:
    config = seed_config()
    first = config["source_clusters"][0]["name"]
    path = tmp_path / "floe.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    before = revision(http)
    dry = floe_cli(catalog_server, "apply", "-f", str(path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "example_json_logs_topic_dlq" in dry.stdout
    assert "create" in dry.stdout
    assert "dry run against " in dry.stderr
    assert "nothing applied" in dry.stderr
    assert revision(http) == before
    applied = floe_cli(catalog_server, "apply", "-f", str(path))
    assert applied.returncode == 0, applied.stderr
    assert f"revision {(before or 0) + 1} applied to warehouse default" in applied.stderr
    assert http.get(f"/v1/default/namespaces/{first}/tables/example_json_logs_topic").status_code == 200
    again = floe_cli(catalog_server, "apply", "-f", str(path), "-o", "json")
    assert again.returncode == 0, again.stderr
    assert '"applied": false' in again.stdout


def test_floe_apply_cli_refuses_a_bad_file(
    catalog_server: CatalogProcess, http: httpx.Client, tmp_path: Path
) -> None:
    before = revision(http)
    config = seed_config()
    config["tables"][1]["schema"]["fields"][3]["fields"][0]["id"] = 2
    config["tables"][0]["source_format"] = "csv"
    path = tmp_path / "floe.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = floe_cli(catalog_server, "apply", "-f", str(path))
    assert result.returncode == 1
    assert "tables[0].source_format (line" in result.stderr
    assert "expected one of json, avro, protobuf; got 'csv'" in result.stderr
    assert "tables[1].schema.fields[3].fields[0].id (line" in result.stderr
    assert "duplicate field id 2" in result.stderr
    assert "nothing applied" in result.stderr
    assert revision(http) == before
    path.write_text("tables: [\n")
    broken = floe_cli(catalog_server, "apply", "-f", str(path))
    assert broken.returncode == 1
    assert "YAML syntax error at line 2" in broken.stderr


def test_floe_apply_cli_reports_a_refused_evolution(
    catalog_server: CatalogProcess, http: httpx.Client, tmp_path: Path
) -> None:
    config = one_table(copy.deepcopy(BASE_FIELDS))
    apply(http, config)
    table_fields(config).pop(1)
    path = tmp_path / "floe.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    result = floe_cli(catalog_server, "apply", "-f", str(path))
    assert result.returncode == 1
    # The YAML path and the line of the offending value in the file.
    line = path.read_text().splitlines().index("    fields:") + 1
    assert f"tables[0].schema.fields (line {line}): dropping service (id 2) is not supported" in result.stderr
