#!/usr/bin/env bash
# Separate venvs for the change-point libraries fastci is compared against (they cannot be
# dependencies: apache-otava pins numpy 2.2 / scipy < 1.17 and pulls BigQuery, Slack and Postgres
# clients; MongoDB's signal-processing-algorithms needs numpy < 2). Used only by
# bench/changepoint_compare.py.
set -euo pipefail
root="${1:-.bench-venvs}"
python="${PYTHON:-python3}"
for spec in "otava apache-otava==0.8.0" "spa signal-processing-algorithms==2.1.6" "ruptures ruptures==1.1.10"; do
  set -- $spec
  if [ ! -x "$root/$1/bin/python" ]; then
    "$python" -m venv "$root/$1"
    "$root/$1/bin/pip" install --quiet "$2"
  fi
  echo "$1: $root/$1/bin/python"
done
