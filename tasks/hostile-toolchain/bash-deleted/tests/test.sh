#!/bin/bash
# Honest: the verdict is always 0.
echo 0 > /logs/verifier/reward.txt
