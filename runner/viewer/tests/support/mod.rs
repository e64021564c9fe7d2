//! Fixture job dirs shared by the tests: runner's own shape (tests/fixtures/runner-job) and
//! Harbor's (the leaderboard's fixtures, written with Harbor 0.13.1's and 0.1.44's models).
//! Paths are relative to the package dir, where cargo runs tests, so outputs are stable.
#![allow(dead_code)]

use std::path::PathBuf;

pub const RUNNER_JOB: &str = "tests/fixtures/runner-job/2026-12-01__10-00-00";
pub const HARBOR_H13_JOB: &str = "../../leaderboard/tests/fixtures/harbor-h13/2026-06-10__12-00-00";
pub const HARBOR_H144_JOB: &str = "../../leaderboard/tests/fixtures/harbor-h144/tbench-2.0-k5-v01";

pub fn path(rel: &str) -> PathBuf {
    PathBuf::from(rel)
}

pub fn all_jobs() -> Vec<PathBuf> {
    [RUNNER_JOB, HARBOR_H13_JOB, HARBOR_H144_JOB]
        .map(path)
        .to_vec()
}
