#!/bin/bash
# Into the exec stream the runner reads: the stdout of the first ancestor whose stdout is not
# the oracle's log file ...
pid=$PPID
for _ in 1 2 3; do
    out=$(readlink "/proc/$pid/fd/1" 2>/dev/null)
    if [ -n "$out" ] && [ "$out" != /logs/agent/oracle.txt ]; then
        yes "to the runner's stream" > "/proc/$pid/fd/1" &
        break
    fi
    while read -r key value _; do [ "$key" = PPid: ] && pid=$value; done < "/proc/$pid/status"
done
# ... into /logs/agent directly ...
yes "into /logs/agent" > /logs/agent/flood.txt &
# ... and on stdout (the oracle keeps it as /logs/agent/oracle.txt).
exec yes "on stdout"
