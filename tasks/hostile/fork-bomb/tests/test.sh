#!/bin/bash
# The environment survived the bomb: the honest reward is 1.
echo 1 > /logs/verifier/reward.txt
