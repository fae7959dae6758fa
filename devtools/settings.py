"""The `FLOE_*` variables of the development components (`floe dev`): documented with the others in
README's generated configuration table; built with `runtime.settings.read_settings`."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings

from runtime.settings import SETTINGS_CONFIG


class DevSettings(BaseSettings):
    """Local development components (`floe dev kafka`, the Trino the tests start)."""

    model_config = SETTINGS_CONFIG

    home: Path | None = Field(
        None,
        description="`floe dev kafka` keeps its data in `$FLOE_HOME/kafka` when this is set, else in "
        "`$XDG_DATA_HOME/floe/kafka` (`~/.local/share/floe/kafka`)",
    )
    trino_java_home: Path | None = Field(
        None,
        description="a JDK 24+ for the Trino 476 that `devtools/trino.py` starts (tests); else `JAVA_HOME` "
        "when it is 24+, else the newest JDK under `/usr/lib/jvm`, `/usr/local/lib/jvm` or `/opt`",
    )
    chromium: Path | None = Field(
        None,
        description="the Chromium the console's browser test drives (`devtools/chromium.py`); else Debian's "
        "`chromium` on the PATH, installed with apt-get when missing and running as root",
    )
