"""compose.yml, compose/ and the Dockerfile: valid by the Compose Specification's own JSON schema, and
consistent with floe itself (its CLI commands and options, its environment variables, floe.yaml).

The schema is vendored from the Go module Docker Compose loads files with (tests/compose_spec/SOURCE.md).
Variables are interpolated first, with Compose's syntax, as Compose does before validating.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from catalog.pipelines import load_yaml
from catalog.settings import Settings
from floe.cli import main
from floe.cli.config_doc import all_variables
from floe.cli.settings import ClientSettings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "compose.yml"
SCHEMA_FILE = Path(__file__).resolve().parent / "compose_spec" / "compose-spec.json"
FLOE_IMAGE = "floe:local"
# What a user puts in .env (compose/env.example with the passwords set).
USER_ENV = {
    "POSTGRES_PASSWORD": "postgres0secret",
    "MINIO_ROOT_PASSWORD": "minio0secret",
    "FLOE_ADMIN_CLIENT_SECRET": "floe0admin0secret",
}
_VARIABLE = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")
_BRACED = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>.*))?$", re.DOTALL)


class MissingVariable(Exception):
    pass


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """Compose's variable interpolation: `$$`, `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`,
    `${VAR:?error}`, `${VAR?error}`, `${VAR:+replacement}`, `${VAR+replacement}`."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        if match.group("escaped"):
            return "$"
        if match.group("named"):
            return env.get(match.group("named"), "")
        braced = _BRACED.match(match.group("braced"))
        if braced is None:
            raise ValueError(f"invalid interpolation {match.group(0)!r}")
        name, op, arg = braced.group("name"), braced.group("op"), braced.group("arg") or ""
        current = env.get(name)
        present = current is not None and (current != "" or not (op or "").startswith(":"))
        if op in (":-", "-"):
            return current if present and current is not None else str(interpolate(arg, env))
        if op in (":?", "?"):
            if not present or current is None:
                raise MissingVariable(f"{name}: {arg}")
            return current
        if op in (":+", "+"):
            return str(interpolate(arg, env)) if present else ""
        return current or ""

    return _VARIABLE.sub(substitute, value)


def raw_compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return document


def compose(env: Mapping[str, str] = USER_ENV) -> dict[str, Any]:
    document: dict[str, Any] = interpolate(raw_compose(), env)
    return document


def floe_services() -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in compose()["services"].items() if svc.get("image") == FLOE_IMAGE}


def test_compose_file_matches_the_compose_specification() -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    Draft202012Validator.check_schema(schema)
    errors = sorted(Draft202012Validator(schema).iter_errors(compose()), key=lambda e: list(e.absolute_path))
    assert [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors] == []


def test_secrets_have_no_defaults_and_env_example_lists_them() -> None:
    """Compose refuses to start without the passwords (no well-known default secret is ever deployed),
    and compose/env.example names every variable compose.yml uses."""
    for missing in USER_ENV:
        with pytest.raises(MissingVariable, match=missing):
            compose({k: v for k, v in USER_ENV.items() if k != missing})
    used = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", COMPOSE_FILE.read_text()))
    example = ROOT / "compose" / "env.example"
    listed = {line.split("=", 1)[0] for line in example.read_text().splitlines() if "=" in line}
    assert used <= listed, f"missing from compose/env.example: {sorted(used - listed)}"


def test_the_floe_services_are_catalog_apply_ingest_maintain() -> None:
    commands = {name: svc["command"][0] for name, svc in floe_services().items()}
    assert commands == {"catalog": "serve", "apply": "apply", "ingest": "ingest", "maintain": "maintain"}


@pytest.mark.parametrize("service", ["catalog", "apply", "ingest", "maintain"])
def test_each_floe_command_and_its_options_exist(service: str) -> None:
    """`floe <command> <its options> --help` exits 0: the command exists and takes every option given
    (click fails on an unknown option before it answers --help)."""
    command = floe_services()[service]["command"]
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0, f"floe {' '.join(command)}: {result.output}"
    assert "Usage:" in result.output


def test_floe_environment_variables_exist() -> None:
    """The catalog's FLOE_* variables are fields of its settings (catalog/settings.py); the clients' (apply,
    ingest, maintain) are fields of the command line's, runtime's or the catalog's settings classes."""
    server = set(Settings.variables())
    clients = set(all_variables())
    assert server <= clients
    for name, svc in floe_services().items():
        used = {key for key in svc.get("environment", {}) if key.startswith("FLOE_")}
        known = server if name == "catalog" else clients
        assert used <= known, f"{name}: unknown variables {sorted(used - known)}"
    catalog_env = floe_services()["catalog"]["environment"]
    assert catalog_env["FLOE_DATABASE_URL"].startswith("postgresql://floe:postgres0secret@postgres:5432/")
    # Each service's values validate as its settings do when the process starts.
    Settings.from_env({k: str(v) for k, v in catalog_env.items() if k.startswith("FLOE_")})
    for name in ("apply", "ingest", "maintain"):
        env = {
            k: str(v)
            for k, v in floe_services()[name].get("environment", {}).items()
            if k.startswith("FLOE_")
        }
        ClientSettings.from_env(env)


def test_dependencies_volumes_and_mounts_resolve() -> None:
    document = compose()
    services = document["services"]
    declared_volumes = set(document.get("volumes") or {})
    for name, svc in services.items():
        for dependency, rule in (svc.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on unknown service {dependency}"
            target = services[dependency]
            if rule["condition"] == "service_healthy":
                assert "healthcheck" in target, f"{name} waits for {dependency} to be healthy: no check"
            if rule["condition"] == "service_completed_successfully":
                assert target.get("restart") == "no", f"{dependency} runs once: restart must be 'no'"
        for mount in svc.get("volumes", []):
            source = mount.split(":", 1)[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in declared_volumes, f"{name} mounts undeclared volume {source}"


def test_the_example_pipeline_is_valid_and_reaches_the_compose_broker() -> None:
    """The mounted floe.yaml passes floe's own validation, and its cluster is the compose Kafka."""
    services = compose()["services"]
    [mount] = [m for m in services["apply"]["volumes"] if m.startswith("./compose/floe.yaml:")]
    config_path = mount.split(":")[1]
    assert services["apply"]["command"] == ["apply", "-f", config_path]
    config = load_yaml((ROOT / "compose" / "floe.yaml").read_text())
    advertised = services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    for cluster in config.source_clusters:
        assert cluster.bootstrap_servers in advertised.replace("PLAINTEXT://", "").split(",")
    topic_args = services["kafka-topics"]["command"]
    topics = {topic_args[i + 1] for i, arg in enumerate(topic_args) if arg == "--topic"}
    assert {table.source_topic for table in config.tables} <= topics


def test_dockerfile_runs_floe_as_a_non_root_user() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    instructions = [line.split(None, 1) for line in dockerfile.splitlines() if line and line[0].isupper()]
    assert instructions[0] == ["FROM", "python:3.11-slim-bookworm"]
    assert ["ENTRYPOINT", '["floe"]'] in instructions
    users = [args for op, args in instructions if op == "USER"]
    assert users
    assert users[-1] not in ("root", "0")
    # A JDK: ingestion compiles floe's protobuf decoder with javac (ingest/jvm_decoder.py).
    assert "openjdk-17-jdk-headless" in dockerfile
    # The build-time jar download names real code.
    from runtime.spark import spark_jars

    assert "from runtime.spark import spark_jars; spark_jars()" in dockerfile
    assert callable(spark_jars)
    from ingest.jvm_decoder import decoder_jar

    assert "from ingest.jvm_decoder import decoder_jar; decoder_jar()" in dockerfile
    assert callable(decoder_jar)
    # The build context (.dockerignore is an allowlist) holds every package pyproject.toml installs.
    allowed = {
        line[1:].rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines() if line[:1] == "!"
    }
    packages = re.search(r"include = \[([^\]]*)\]", (ROOT / "pyproject.toml").read_text())
    assert packages is not None
    wanted = {name.strip().strip('"').rstrip("*") for name in packages.group(1).split(",")}
    assert wanted | {"pyproject.toml", "README.md"} <= allowed


def test_engines_on_the_host_and_spark_in_the_network_each_get_a_minio_they_reach() -> None:
    """The catalog tells engines MinIO's published address on the host; ingest and maintain (inside the
    compose network) ask for the catalog's own endpoint, the MinIO service's name there."""
    from urllib.parse import urlsplit

    from runtime.settings import RuntimeSettings

    services = compose()["services"]
    catalog = Settings.from_env({k: str(v) for k, v in services["catalog"]["environment"].items()})
    internal = urlsplit(catalog.s3_endpoint or "")
    assert internal.hostname in services
    assert services[internal.hostname]["image"].startswith("minio/")
    # Each port is "address:published:target".
    published = {port.split(":")[-2] for port in services[internal.hostname]["ports"]}
    client = urlsplit(catalog.s3_client_endpoint or "")
    assert client.hostname in ("localhost", "127.0.0.1")
    assert str(client.port) in published, "the client endpoint's port is published on the host"
    assert catalog.warehouse_properties["s3.client-endpoint"] == catalog.s3_client_endpoint
    for name in ("ingest", "maintain"):
        env = {k: str(v) for k, v in services[name]["environment"].items()}
        assert env["FLOE_SPARK_STORAGE_ENDPOINT"] == "internal"
        runtime = RuntimeSettings(spark_storage_endpoint=env["FLOE_SPARK_STORAGE_ENDPOINT"])
        assert runtime.spark_storage_endpoint == "internal"
