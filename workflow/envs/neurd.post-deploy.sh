#!/usr/bin/env bash
# Runs inside the freshly created conda environment, from the directory
# Snakemake runs in (the repository root): install the neurd package itself.
set -euo pipefail
python -m pip install --no-deps -e .
