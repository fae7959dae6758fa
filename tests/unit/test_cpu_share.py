"""`maintenance.cpu_share`: a worker thread rests after each table in proportion to the CPU it used."""

from __future__ import annotations

import threading
import time

import pytest

from maintenance import cpu_share


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


@pytest.mark.parametrize(
    ("share", "cpu", "wall", "rest"),
    [
        (0.25, 0.1, 0.1, 0.3),  # 0.1 s of CPU is a quarter of 0.4 s
        (0.25, 0.1, 0.5, 0.0),  # the visit already waited long enough (I/O)
        (0.5, 0.2, 0.2, 0.2),
        (1.0, 0.2, 0.2, 0.0),  # a whole core: no limit
        (0.0, 0.2, 0.2, 0.0),  # nonsense is no limit, never an endless rest
    ],
)
def test_rest_seconds(share: float, cpu: float, wall: float, rest: float) -> None:
    assert cpu_share.rest_seconds(share, cpu, wall) == pytest.approx(rest)


def test_a_busy_visit_is_followed_by_a_rest_that_holds_it_to_its_share() -> None:
    started = time.monotonic()
    with cpu_share.held_to(0.25, threading.Event()):
        _spin(0.1)
    took = time.monotonic() - started
    # 0.1 s of this thread's CPU at a quarter of a core: ~0.4 s in all (the CPU is measured, not assumed).
    assert 0.38 <= took < 1.5


def test_no_share_and_a_set_stop_do_not_rest() -> None:
    started = time.monotonic()
    with cpu_share.held_to(None, threading.Event()):
        _spin(0.1)
    stop = threading.Event()
    stop.set()
    with cpu_share.held_to(0.01, stop):  # would rest ~10 s
        _spin(0.1)
    assert time.monotonic() - started < 1.0


def test_waiting_is_not_counted_as_cpu() -> None:
    started = time.monotonic()
    with cpu_share.held_to(0.25, threading.Event()):
        time.sleep(0.3)  # I/O, not CPU: nothing to make up for
    assert time.monotonic() - started < 0.45


def test_floe_up_runs_its_maintenance_workers_at_a_quarter_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """`floe up`'s workers share its process with ingestion: each gets `MAINTENANCE_CPU_SHARE`."""
    from types import SimpleNamespace
    from typing import Any

    from floe.cli import up_maintenance
    from maintenance import worker

    seen: list[Any] = []

    class Worker:
        def __init__(self, spark: object, options: worker.WorkerOptions) -> None:
            seen.append(options)

        def run_forever(self, stop: threading.Event) -> None:
            pass

        def close(self) -> None:
            pass

    monkeypatch.setattr(worker, "MaintenanceWorker", Worker)
    context = SimpleNamespace(setLocalProperty=lambda *a: None, setJobGroup=lambda *a, **k: None)
    keys = SimpleNamespace(key=lambda role, cluster: SimpleNamespace(client_id="id", client_secret="s"))
    up = up_maintenance.UpMaintenance(
        SimpleNamespace(sparkContext=context),  # type: ignore[arg-type]
        keys,  # type: ignore[arg-type]
        "http://127.0.0.1:1",
        "default",
        lambda: ["main"],
    )
    up._run_worker("main")
    [options] = seen
    assert options.cpu_share == up_maintenance.MAINTENANCE_CPU_SHARE == 0.25
