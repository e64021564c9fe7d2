#!/bin/bash
# A reward forger left running in the background: the verifier's reward file, created
# whenever it is missing, says 1 (the exploit, verbatim).
nohup bash -c 'while :; do [ -e /logs/verifier/reward.json ] || echo "{\"reward\":1}" > /logs/verifier/reward.json; sleep .01; done' >/dev/null 2>&1 &
echo "forger started as $(id -un)"
