#!/bin/bash
ln -s /etc/shadow /logs/agent/shadow-link
ln -s / /logs/artifacts/root-link
mkfifo /logs/agent/agent.fifo /logs/artifacts/artifact.fifo
mkdir -p /logs/verifier
ln -sf /etc/passwd /logs/verifier/reward.txt
mkfifo /logs/verifier/reward.json
ln -s /etc/hostname /logs/verifier/ctrf.json
