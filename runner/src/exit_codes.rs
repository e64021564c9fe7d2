//! Documented process exit codes (the README's table is generated from the same meanings).

/// Success: every trial was scored / the submission is valid / the clean copy was written.
pub const OK: u8 = 0;
/// `validate-*`: the submission or trajectory breaks a rule. `scrub`: aborted, nothing written.
pub const FAILED: u8 = 1;
/// Bad input: a missing or malformed path, flag, task, config or secret.
pub const BAD_INPUT: u8 = 2;
/// `run`: the job finished but some trials errored and have no reward (infrastructure errors).
pub const TRIALS_ERRORED: u8 = 3;
/// `run`: interrupted by Ctrl-C or SIGTERM; containers were removed, finished trials kept.
pub const INTERRUPTED: u8 = 130;
