# Shared by both steps' tests (the shared tests/ is uploaded first, then the step's own).
# reward_if CONDITION...: writes 1 when the command succeeds, else 0.
reward_if() {
    mkdir -p /logs/verifier
    if "$@"; then
        echo 1 > /logs/verifier/reward.txt
    else
        echo 0 > /logs/verifier/reward.txt
        return 1
    fi
}
