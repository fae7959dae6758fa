"""Every `FLOE_*` variable is a field of a settings class, and the configuration reference's tables
(docs/reference/configuration.md) are the ones generated from those classes (issue 12, item 14: docs
cannot drift). Also: the catalog's settings keep the
defaults and derived values of the hand-written reader they replace, and a bad value names its variable."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

from catalog.settings import Settings, SettingsError
from floe.cli import main
from floe.cli.config_doc import PAGE, SETTINGS_CLASSES, all_variables, render_tables, with_tables
from runtime.settings import RuntimeSettings, read_settings, variable_name

ROOT = Path(__file__).resolve().parents[2]
CODE = ("catalog", "ingest", "maintenance", "runtime", "devtools", "benchmarks")
# A variable named in prose: FLOE_X, but not a family like FLOE_GLUE_*.
_MENTION = re.compile(r"\bFLOE_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_*])")
_VARIABLE = re.compile(r"FLOE_[A-Z0-9_]*[A-Z0-9]")


def variables_in_code() -> dict[str, str]:
    """Every string literal of floe's code that is a FLOE_* name (how variables are read), to where."""
    found: dict[str, str] = {}
    for package in CODE:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and _VARIABLE.fullmatch(node.value)
                ):
                    found.setdefault(node.value, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_the_configuration_reference_holds_the_generated_tables() -> None:
    page = (ROOT / PAGE).read_text(encoding="utf-8")
    assert page == with_tables(page, render_tables()), f"run `floe config-doc --write {PAGE}`"


def test_every_variable_read_in_the_code_is_a_setting() -> None:
    known = all_variables()
    unknown = {name: where for name, where in variables_in_code().items() if name not in known}
    assert not unknown, f"FLOE_* variables read but not in any settings class: {unknown}"


def test_every_variable_the_docs_and_deployment_files_name_is_a_setting() -> None:
    known = all_variables()
    pages = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").rglob("*.md"))
    for name in ("README.md", "compose.yml", "Dockerfile", "compose/env.example", *pages):
        mentioned = set(_MENTION.findall((ROOT / name).read_text(encoding="utf-8")))
        assert mentioned <= set(known), (
            f"{name} names unknown variables {sorted(set(mentioned) - set(known))}"
        )


def test_every_setting_is_documented() -> None:
    for settings_cls in SETTINGS_CLASSES:
        for name, field in settings_cls.model_fields.items():
            assert field.description, f"{variable_name(settings_cls, name)} has no description"


def _options(command: click.Command) -> list[tuple[str, click.Option]]:
    found = [(command.name or "", p) for p in command.params if isinstance(p, click.Option)]
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            found += [(f"{command.name} {name}", option) for name, option in _options(sub)]
    return found


def test_command_line_options_read_settings_variables_with_their_defaults() -> None:
    """`--url` (FLOE_URL) and the like: the variable is a setting, the option's default the setting's."""
    known = all_variables()
    seen = set()
    for command, option in _options(main):
        names = [option.envvar] if isinstance(option.envvar, str) else list(option.envvar or ())
        for envvar in names:
            if not envvar.startswith("FLOE_"):
                continue
            seen.add(envvar)
            assert envvar in known, f"{command} {option.opts}: {envvar} is not a setting"
            for settings_cls in known[envvar]:
                field_name = next(
                    n for n in settings_cls.model_fields if variable_name(settings_cls, n) == envvar
                )
                default = settings_cls.model_fields[field_name].get_default(call_default_factory=False)
                if default is not None:
                    assert option.default == default, (
                        f"{command} {option.opts}: default differs from {envvar}'s"
                    )
    assert {"FLOE_URL", "FLOE_SPARK_MASTER", "FLOE_INGEST_METRICS_URL"} <= seen


def test_settings_keep_the_defaults_and_derived_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FLOE_WAREHOUSE_NAME", "from-the-process")
    settings = Settings.from_env({})
    home = (tmp_path / ".floe").resolve()
    assert settings.home == home
    assert settings.database_url == f"sqlite+aiosqlite:///{home / 'floe.db'}"
    assert settings.warehouse_location == (home / "warehouse").as_uri()
    assert settings.warehouse_name == "default"  # an explicit mapping replaces the process environment
    assert settings.warehouse_properties == {}
    assert (settings.max_body_bytes, settings.max_header_bytes, settings.max_headers) == (
        16 << 20,
        32 << 10,
        100,
    )
    assert (settings.keep_alive_seconds, settings.max_connections, settings.commit_retries) == (75, 1000, 8)
    assert settings.auth_mode == "oauth2"
    assert settings.migrate_on_start is True
    assert settings.oidc_role_values == {"reader": "reader", "writer": "writer", "admin": "admin"}
    assert settings.idempotency_lifetime_seconds == 1800
    assert Settings.from_env().warehouse_name == "from-the-process"

    custom = Settings.from_env(
        {
            "FLOE_HOME": str(tmp_path / "h"),
            "FLOE_DATABASE_URL": "postgres://u:p@db/floe",
            "FLOE_WAREHOUSE": "s3://bucket/lake/",
            "FLOE_S3_ENDPOINT": "http://minio:9000",
            "FLOE_S3_PATH_STYLE_ACCESS": "true",
            "FLOE_STS_ROLE_ARN": "arn:aws:iam::1:role/r",
            "FLOE_S3_REGION": "",
            "FLOE_AUTH": " None ",
            "FLOE_ADMIN_CLIENT_ID": "",
            "FLOE_MIGRATE_ON_START": "false",
            "FLOE_OIDC_ROLE_VALUES": "readers=reader, owners=admin",
        }
    )
    assert custom.home == (tmp_path / "h").resolve()
    assert custom.database_url == "postgresql+asyncpg://u:p@db/floe"
    assert custom.warehouse_location == "s3://bucket/lake"
    assert custom.warehouse_properties == {
        "s3.endpoint": "http://minio:9000",
        "s3.path-style-access": "true",
        "sts.role-arn": "arn:aws:iam::1:role/r",
    }
    assert custom.auth_mode == "none"
    assert custom.admin_client_id is None
    assert custom.migrate_on_start is False
    assert custom.oidc_role_values == {"readers": "reader", "owners": "admin"}
    assert (
        Settings.from_env({"FLOE_WAREHOUSE": str(tmp_path / "w")}).warehouse_location
        == (tmp_path / "w").as_uri()
    )
    assert (
        Settings.from_env({"FLOE_DATABASE_URL": "sqlite:///x.db"}).database_url == "sqlite+aiosqlite:///x.db"
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("FLOE_MAX_CONNECTIONS", "many", "valid integer"),
        ("FLOE_STORAGE_THREADS", "0", "greater than or equal to 1"),
        ("FLOE_AUTH", "basic", "'oauth2' or 'none'"),
        ("FLOE_OIDC_ISSUER", "http://idp.example.com", "https URL"),
        ("FLOE_OIDC_ROLE_VALUES", "admins=root", "value=reader|writer|admin"),
        ("FLOE_GLUE_ENDPOINT", "glue.example.com", "http(s) URL"),
        ("FLOE_MIGRATE_ON_START", "maybe", "valid boolean"),
        ("FLOE_HEADER_TIMEOUT_SECONDS", "-1", "greater than 0"),
    ],
)
def test_a_bad_value_names_its_variable(variable: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({variable: value})
    assert str(caught.value).startswith(f"{variable}: ")
    assert message in str(caught.value)


def test_secrets_stay_out_of_errors_and_reprs() -> None:
    settings = Settings.from_env(
        {"FLOE_ADMIN_CLIENT_SECRET": "s3cret0value", "FLOE_S3_SECRET_ACCESS_KEY": "k3y"}
    )
    assert "s3cret0value" not in repr(settings)
    assert "k3y" not in repr(settings)
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"FLOE_ADMIN_CLIENT_SECRET": "s3cret0value", "FLOE_COMMIT_RETRIES": "x"})
    assert "s3cret0value" not in str(caught.value)


def test_runtime_settings_name_their_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOE_MAVEN_REPOSITORY", "https://mirror.example.com/maven2/")
    monkeypatch.setenv("FLOE_SPARK_LOG_LEVEL", "info")
    runtime = read_settings(RuntimeSettings)
    assert (runtime.maven_repository, runtime.spark_log_level) == (
        "https://mirror.example.com/maven2",
        "INFO",
    )
    monkeypatch.setenv("FLOE_SPARK_LOG_LEVEL", "loud")
    with pytest.raises(ValueError, match=r"^FLOE_SPARK_LOG_LEVEL: "):
        read_settings(RuntimeSettings)
