"""`floe openapi` in fresh processes writes the same document every run, the one floe renders. The
document itself is checked in tests/unit/test_openapi.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from catalog.api.openapi import render_openapi


def test_cli_writes_the_same_document_every_run(tmp_path: Path) -> None:
    """`floe openapi` in fresh processes: nothing random (such as generated examples) gets in."""
    outputs = []
    for run in range(2):
        target = tmp_path / f"floe-{run}.json"
        subprocess.run(
            [sys.executable, "-m", "floe.cli", "openapi", "-o", str(target)], check=True, timeout=120
        )
        outputs.append(target.read_text(encoding="utf-8"))
    assert outputs[0] == outputs[1]
    assert outputs[0] == render_openapi()
