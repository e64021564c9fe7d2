#!/bin/bash
if [ -e /app/saw-tests ]; then echo 0 > /logs/verifier/reward.txt; else echo 1 > /logs/verifier/reward.txt; fi
