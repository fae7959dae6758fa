"""The `FLOE_*` variables of the Spark runtime that `floe ingest` and `floe maintain` share: where pinned
jars come from and are cached, the Spark master and log level, and which storage endpoint Spark uses.

Each field's description is its documentation (README's configuration table is generated from it). An
empty variable counts as unset. `read_settings` is the one way to build a settings class here and in
devtools: a bad value is a ValueError naming the variable, not a pydantic traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "FLOE_"
SettingsT = TypeVar("SettingsT", bound=BaseSettings)
# FLOE_* variables only (no .env or secrets files), frozen; an empty variable is unset.
SETTINGS_CONFIG = SettingsConfigDict(
    env_prefix=ENV_PREFIX, frozen=True, env_ignore_empty=True, extra="forbid"
)
SparkLogLevel = Literal["ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"]


def variable_name(settings_cls: type[BaseSettings], field_name: str) -> str:
    """The environment variable of one field of a `FLOE_`-prefixed settings class."""
    alias = settings_cls.model_fields[field_name].validation_alias
    prefix = settings_cls.model_config.get("env_prefix") or ""
    return alias if isinstance(alias, str) else prefix + field_name.upper()


def read_settings(settings_cls: type[SettingsT]) -> SettingsT:
    """`settings_cls` from the environment; a ValueError naming each bad variable if it does not validate."""
    try:
        return settings_cls()
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            name = str(error["loc"][0]) if error["loc"] else ""
            variable = variable_name(settings_cls, name) if name in settings_cls.model_fields else name
            problems.append(f"{variable}: {error['msg']} (got {error['input']!r})")
        raise ValueError("\n".join(problems)) from None


def _upper(value: Any) -> Any:
    return value.strip().upper() if isinstance(value, str) else value


class RuntimeSettings(BaseSettings):
    """The Spark runtime (`floe ingest`, `floe maintain`) and the pinned downloads of `floe dev`."""

    model_config = SETTINGS_CONFIG

    maven_repository: Annotated[str, AfterValidator(lambda url: url.rstrip("/"))] = Field(
        "https://repo1.maven.org/maven2",
        pattern=r"^(https?|file)://",
        description="the Maven repository pinned jars are downloaded from (a Maven Central mirror); "
        "each file is still checked against its pinned SHA-1",
    )
    cache_dir: Path | None = Field(
        None,
        description="floe's per-user download cache (jars, Kafka, the schema registry)",
        json_schema_extra={"shown_default": "`$XDG_CACHE_HOME/floe`, else `~/.cache/floe`"},
    )
    jars_dir: Path | None = Field(
        None,
        description="an offline install's jars: nothing is downloaded, a jar missing there is an error",
        json_schema_extra={"shown_default": "`$FLOE_CACHE_DIR/jars`, downloading what is missing"},
    )
    spark_master: str | None = Field(
        None,
        description="the Spark master of `floe ingest`, `floe maintain` and `floe up` (`local[N]`, "
        "`spark://host:7077`, `k8s://…`); `--master` overrides it",
        json_schema_extra={"shown_default": "`local[*]` (ingest, up), `local[2]` (maintain)"},
    )
    spark_storage_endpoint: Literal["client", "internal"] = Field(
        "client",
        description="which S3 endpoint of a warehouse Spark asks the catalog for: `client` (what every "
        "engine is told) or `internal` (the catalog's own `FLOE_S3_ENDPOINT`, for Spark on the catalog's "
        "network when `FLOE_S3_CLIENT_ENDPOINT` names an address only the outside reaches, as in compose)",
    )
    spark_log_level: Annotated[SparkLogLevel, BeforeValidator(_upper)] = Field(
        "WARN", description="Spark's log level (`INFO`, `WARN`, `ERROR`, …)"
    )
