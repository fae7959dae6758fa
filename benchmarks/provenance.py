"""Which tree a benchmark measured, for its results' header."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git_commit() -> str | None:
    """The commit of the floe tree measured (with `+changes` when it has uncommitted ones); a tree
    exported with `git archive` has no .git, and says its commit in BENCHMARK_COMMIT."""
    if os.environ.get("BENCHMARK_COMMIT"):
        return os.environ["BENCHMARK_COMMIT"]
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{head}+changes" if dirty else head
