"""The `FLOE_*` variables of the development components (`floe dev`): documented with the others in
README's generated configuration table; built with `runtime.settings.read_settings`."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from runtime.settings import ENV_PREFIX


class DevSettings(BaseSettings):
    """Local development components (`floe dev kafka`)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, env_ignore_empty=True, extra="forbid")

    home: Path | None = Field(
        None,
        description="`floe dev kafka` keeps its data in `$FLOE_HOME/kafka` when this is set",
        json_schema_extra={"shown_default": "`$XDG_DATA_HOME/floe/kafka`, else `~/.local/share/floe/kafka`"},
    )
