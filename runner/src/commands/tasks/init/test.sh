#!/bin/bash
# Named checks, each recorded in CTRF (/logs/verifier/ctrf.json); the reward is 1 only when
# every check passed. It reads only what the agent made and what the task knows: the expected
# answer is computed here from the task's own copy of the input, not read from /app.
mkdir -p /logs/verifier
results=()
passed=0
total=0
check() {  # check NAME COMMAND...: runs the command, records the check
    local name=$1
    shift
    total=$((total + 1))
    if "$@"; then
        passed=$((passed + 1))
        results+=("{\"name\": \"$name\", \"status\": \"passed\", \"duration\": 0}")
    else
        results+=("{\"name\": \"$name\", \"status\": \"failed\", \"duration\": 0}")
    fi
}
answer=/app/answer.txt
expected=189  # 3 + 14 + 15 + 92 + 65
check answer_exists test -f "$answer"
check answer_is_a_regular_file test ! -L "$answer"
check answer_is_the_sum test "$(cat "$answer" 2>/dev/null)" = "$expected"
(IFS=,; printf '{"results": {"tool": {"name": "test.sh"}, "summary": {"tests": %d, "passed": %d, "failed": %d}, "tests": [%s]}}\n' \
    "$total" "$passed" "$((total - passed))" "${results[*]}") > /logs/verifier/ctrf.json
if [ "$passed" -eq "$total" ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
