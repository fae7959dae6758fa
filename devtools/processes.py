"""Child processes that serve HTTP: wait until one answers, stop it (floe, reference servers, test IdPs)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import httpx


def wait_until_answering(
    process: subprocess.Popen[bytes],
    probe_url: str,
    *,
    name: str,
    timeout: float,
    log_text: Callable[[], str],
    interval: float = 0.1,
) -> None:
    """Poll `probe_url` until it answers 200; stop the process and raise if it exits or times out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}: {log_text()[-3000:]}")
        try:
            if httpx.get(probe_url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(interval)
    stop_process(process)
    raise RuntimeError(f"{name} did not become ready: {log_text()[-3000:]}")


def stop_process(process: subprocess.Popen[bytes] | None) -> None:
    """Terminate, and kill when it does not exit within 15 s."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
