#!/usr/bin/env bash
# The whole test suite on a fresh machine: creates .venv, installs floe with its test extras, then runs
# ruff, mypy and pytest (which starts PostgreSQL, floe servers and every other component itself).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy"
.venv/bin/mypy
# Two runs: the quick tier spread over the cores (pytest-xdist), then the e2e tier on two xdist workers
# (E2E_WORKERS; 1: one process), a whole module at a time, each worker starting its own Kafka, Spark,
# Trino and registry once (see tests/conftest.py); both run even if the first fails.
# The e2e tier lists its 40 slowest tests: CI must stay under 45 minutes.
echo "== pytest: quick tier"
status=0
# Exit status 5 is "no test selected" (arguments naming only tests of the other tier).
.venv/bin/pytest -m "not e2e" "$@" || { rc=$?; [ "$rc" -eq 5 ] || status=$rc; }
# Free disk before and after the e2e tier (its images, Kafka logs and warehouses need a few GB): a run
# that fails with "No space left on device" shows here whether the machine or the suite filled it.
disk() { df -h "${TMPDIR:-/tmp}" "${XDG_CACHE_HOME:-$HOME/.cache}" 2>/dev/null | sed "s/^/== disk $1: /" || true; }
disk "before the e2e tier"
echo "== pytest: e2e tier"
.venv/bin/pytest -m e2e --durations=40 "$@" || { rc=$?; [ "$rc" -eq 5 ] || status=$rc; }
disk "after the e2e tier"
exit "$status"
