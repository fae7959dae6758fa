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
echo "== pytest"
.venv/bin/pytest "$@"
