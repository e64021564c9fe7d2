#!/bin/bash
# Writes the reward as a plain file; what the agent planted must not be read instead.
echo 1 > /logs/verifier/reward.txt
