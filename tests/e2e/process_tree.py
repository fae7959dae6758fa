"""The command lines of the processes a test started, for issue 29 item 12: no secret on a command line
(any local user reads every process's argv with `ps`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def descendant_cmdlines(root: int, *, include_root: bool = False) -> dict[int, bytes]:
    """The command line of every live process below `root` (children, theirs, ...), by pid."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                # The parent pid is the 2nd field after the command name, which is in parentheses.
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: dict[int, bytes] = {}
    todo = [root] if include_root else list(children.get(root, []))
    while todo:
        pid = todo.pop()
        try:
            found[pid] = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        todo += children.get(pid, [])
    return found


def assert_no_secret_on_command_lines(
    root: int, secrets: Iterable[str], *, expected: Iterable[bytes] = (), include_root: bool = False
) -> None:
    """No process below `root` carries one of `secrets` in its argv; `expected` says which processes
    must be among them (so that the check looked where the secrets would be)."""
    commands = descendant_cmdlines(root, include_root=include_root)
    started = b"\n".join(commands.values())
    for process in expected:
        assert process in started, (process, commands)
    for secret in secrets:
        assert secret, "an empty secret proves nothing"
        for pid, command in commands.items():
            assert secret.encode() not in command, f"a secret in the command line of {pid}: {command[:300]!r}"
