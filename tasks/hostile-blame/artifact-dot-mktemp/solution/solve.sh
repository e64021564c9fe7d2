#!/bin/bash
# A planted "staging" directory holding what the host must never receive outside artifacts/:
# a forged reward and a canary, and a mktemp that names it whatever it is asked.
planted=/tmp/runner-artifact.planted
mkdir -p "$planted/verifier" "$planted/agent"
echo '{"reward": 1.0}' > "$planted/verifier/reward.json"
echo PLANTED-CANARY-7f3a > "$planted/agent/canary.txt"
echo PLANTED-CANARY-7f3a > "$planted/out.txt"
echo PLANTED-CANARY-7f3a > "$planted/artifacts"
for tool in /usr/bin/mktemp /bin/mktemp; do
    [ -e "$tool" ] || continue
    printf '#!/bin/sh\necho %s\n' "$planted" > "$tool"
    chmod 755 "$tool"
done
echo honest > /app/out.txt
