"""`floe maintain` runs below the machine's other work: its threads, and the processes it starts
(Spark's JVM), at the niceness it asks for; an operator's own higher niceness stands."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from floe.cli import maintain
from floe.cli.maintain import maintain_command
from floe.cli.services import autogroup_nice
from floe.cli.settings import MAINTAIN_NICE

# Run in a child: a niceness once lowered cannot be raised again without privilege (nor should the
# test worker run lowered).
PROBE = """
import json, os, subprocess, sys, threading
from floe.cli.services import autogroup_nice, lower_cpu_priority

def nice_of(task):
    # Field 19 of /proc/<pid>/task/<tid>/stat, after the command's closing parenthesis.
    return int(open(task).read().rsplit(")", 1)[1].split()[16])

started = threading.Event()
waiting = threading.Event()
threading.Thread(target=lambda: (started.set(), waiting.wait()), daemon=True).start()
started.wait()
now = lower_cpu_priority(int(sys.argv[1]))
threads = [nice_of(f"/proc/self/task/{t}/stat") for t in os.listdir("/proc/self/task")]
child = subprocess.run([sys.executable, "-c", "import os; print(os.nice(0))"], capture_output=True, text=True)
waiting.set()
niceness = sorted(set(threads))
group = autogroup_nice("self")
print(json.dumps({"now": now, "threads": niceness, "count": len(threads), "child": int(child.stdout),
                  "group": group}))
"""


def probe(nice: int, *prefix: str, session: bool = True) -> dict[str, object]:
    """The probe's findings, run in a session of its own (as a service) unless `session` is False."""
    out = subprocess.run(
        [*prefix, sys.executable, "-c", PROBE, str(nice)],
        capture_output=True,
        text=True,
        check=True,
        start_new_session=session,
    )
    found: dict[str, object] = json.loads(out.stdout)
    # The probe's own thread and the main thread at least (imports may start more).
    count = found.pop("count")
    assert isinstance(count, int)
    assert count >= 2
    return found


def test_every_thread_and_child_process_runs_at_the_niceness() -> None:
    found = probe(7)
    assert found["now"] == 7
    assert found["threads"] == [7], "a thread started before kept its priority"
    assert found["child"] == 7, "a process started after (Spark's JVM) did not inherit it"
    assert found["group"] == 7, "its session's autogroup still competes at the others' priority"


def test_in_a_shared_session_the_group_is_left_to_its_other_members() -> None:
    found = probe(7, session=False)
    assert (found["now"], found["threads"], found["child"]) == (7, [7], 7)
    assert found["group"] == autogroup_nice(os.getpid())


def test_an_operators_own_higher_niceness_stands() -> None:
    assert probe(3, "nice", "-n", "12") == {"now": 12, "threads": [12], "child": 12, "group": 12}


def test_zero_leaves_the_priority_alone() -> None:
    assert probe(0) == {"now": 0, "threads": [0], "child": 0, "group": 0}


def test_maintain_runs_at_niceness_10_unless_told() -> None:
    option = next(p for p in maintain_command.params if p.name == "nice")
    assert option.default == MAINTAIN_NICE == 10
    assert option.envvar == "FLOE_MAINTAIN_NICE"


def test_a_niceness_out_of_range_is_refused_before_anything_runs() -> None:
    result = CliRunner().invoke(maintain_command, ["--once", "--nice", "25"])
    assert result.exit_code == 2
    assert "--nice" in result.output
    assert "0<=x<=19" in result.output


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [([], {"FLOE_MAINTAIN_NICE": None}, 10), (["--nice", "7"], {}, 7), ([], {"FLOE_MAINTAIN_NICE": "3"}, 3)],
)
def test_maintain_lowers_its_priority_before_anything_else(
    monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str | None], expected: int
) -> None:
    """The command applies its niceness first (before Java or the catalog are checked, before a thread
    starts), from --nice, else FLOE_MAINTAIN_NICE, else 10."""
    applied: list[int] = []
    monkeypatch.setattr(maintain, "lower_cpu_priority", applied.append)
    unreachable = {"FLOE_URL": "http://127.0.0.1:9", "FLOE_CLIENT_ID": "x", "FLOE_CLIENT_SECRET": "y"}
    result = CliRunner().invoke(maintain_command, ["--once", *args], env={**unreachable, **env})
    assert result.exit_code == 1, result.output
    assert applied == [expected]
