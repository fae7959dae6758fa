"""`floe serve` (a real process) reports a bad settings variable by name, without a traceback. The
settings and their documentation are checked in tests/unit/test_config_doc.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.unit.test_config_doc import ROOT


def test_floe_serve_reports_a_bad_variable_without_a_traceback(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "FLOE_HOME": str(tmp_path), "FLOE_MAX_CONNECTIONS": "lots"}
    result = subprocess.run(
        [sys.executable, "-m", "floe.cli", "serve"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "FLOE_MAX_CONNECTIONS: Input should be a valid integer" in result.stderr
    assert "Traceback" not in result.stderr
