#!/bin/bash
source /tests/lib.sh
reward_if test "$(cat /app/draft.txt 2>/dev/null)" = "draft"
