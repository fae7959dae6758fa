"""A Chromium for browser tests: Debian's `chromium` package, which Playwright drives through
`executable_path` (Playwright's own browser download is not used: its host is out of reach offline).

`find_chromium` returns `FLOE_CHROMIUM` when set, else Debian's Chromium binary (behind its `chromium`
wrapper script) or the first `chromium` on the PATH; when there is none and this process may run apt
(root on a Debian-like system), it installs the package first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from devtools.settings import DevSettings
from runtime.settings import read_settings

NAMES = ("chromium", "chromium-browser")
# Debian's /usr/bin/chromium is a shell script that adds flags: Playwright starts the binary itself.
DEBIAN_BINARY = Path("/usr/lib/chromium/chromium")
APT_PACKAGE = "chromium"
INSTALL_TIMEOUT_SECONDS = 900


class ChromiumUnavailable(RuntimeError):
    """No Chromium here, and none could be installed."""


def _on_path() -> Path | None:
    if DEBIAN_BINARY.is_file():
        return DEBIAN_BINARY
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
    return None


def _install() -> None:
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise ChromiumUnavailable(
            "No chromium found and apt-get cannot install it here (needs root on Debian/Ubuntu): "
            "run `apt-get install -y chromium` or set FLOE_CHROMIUM to a Chromium executable"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    result = subprocess.run(
        [apt, "install", "-y", "-q", "--no-install-recommends", APT_PACKAGE],
        env=env,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_SECONDS,
        check=False,
    )
    if result.returncode != 0:  # a stale package index: update once, then retry
        subprocess.run([apt, "update", "-q"], env=env, capture_output=True, timeout=600, check=False)
        result = subprocess.run(
            [apt, "install", "-y", "-q", "--no-install-recommends", APT_PACKAGE],
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_SECONDS,
            check=False,
        )
    if result.returncode != 0:
        raise ChromiumUnavailable(f"apt-get install {APT_PACKAGE} failed: {result.stderr[-2000:]}")


def find_chromium() -> Path:
    """A Chromium executable: FLOE_CHROMIUM, one on the PATH, or Debian's package installed now."""
    configured = read_settings(DevSettings).chromium
    if configured is not None:
        if not configured.is_file():
            raise ChromiumUnavailable(f"FLOE_CHROMIUM={configured} is not a file")
        return configured
    found = _on_path()
    if found is None:
        _install()
        found = _on_path()
    if found is None:
        raise ChromiumUnavailable(
            f"apt-get installed {APT_PACKAGE} but no {' or '.join(NAMES)} is on the PATH"
        )
    return found
