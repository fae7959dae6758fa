"""Files that hold secrets (API keys, passwords): readable by their owner only, written atomically."""

from __future__ import annotations

import os
from pathlib import Path


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` readable by its owner only (0600), replacing it atomically: a reader never
    sees a half-written file, and the secret never sits in a file others may read, not even briefly."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(descriptor, 0o600)  # whatever the umask, or a leftover scratch file's mode
        with os.fdopen(descriptor, "w") as file:
            descriptor = -1
            file.write(text)
        os.replace(scratch, path)
    finally:
        if descriptor >= 0:
            os.close(descriptor)
        scratch.unlink(missing_ok=True)
