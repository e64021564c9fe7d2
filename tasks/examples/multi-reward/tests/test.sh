#!/bin/bash
# test_outputs.py writes reward.json (several keys) and ctrf.json itself.
# Keep /tests clean: the harness import would otherwise write __pycache__ there.
export PYTHONDONTWRITEBYTECODE=1
mkdir -p /logs/verifier
python3 /tests/test_outputs.py
