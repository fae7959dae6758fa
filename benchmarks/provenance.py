"""Which tree a benchmark measured, for its results' header."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def git_commit() -> str | None:
    """The commit of the floe tree measured (with `+changes` when it has uncommitted ones); a tree
    exported with `git archive` has no .git, and says its commit in BENCHMARK_COMMIT."""
    if os.environ.get("BENCHMARK_COMMIT"):
        return os.environ["BENCHMARK_COMMIT"]
    try:
        head = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{head}+changes" if dirty else head
