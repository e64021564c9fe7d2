//! Running the verifier isolated from what the agent left behind: the request a verifier makes
//! of a sandbox and what comes back. A sandbox without isolation says so
//! ([`IsolatedVerifyOutcome::Unsupported`]) and the verifier falls back to a plain exec,
//! recording that the isolation was missing; a sandbox whose isolation failed to set up
//! ([`IsolatedVerifyOutcome::Unavailable`]) fails the verification instead.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::records::LeftoverProcess;

/// One isolated run of the task's tests.
#[derive(Debug, Clone)]
pub struct IsolatedVerifyRequest {
    /// The task's `tests/` on the host; it becomes the tests' private `/tests`.
    pub tests_dir: PathBuf,
    /// The script given to `bash -c` (it writes into `/logs/verifier`).
    pub command: String,
    /// The `[verifier]` user; `None` is the environment's default user.
    pub user: Option<String>,
    /// `[verifier].env`, on top of the environment's own.
    pub env: BTreeMap<String, String>,
    /// The tests' deadline; the sandbox stops them (TERM, grace, KILL) when it passes.
    pub timeout: Duration,
    /// Run the tests with the programs and startup hooks the agent left instead of the
    /// image's own (the job's `--agent-toolchain`); what the agent changed is recorded either
    /// way.
    pub agent_toolchain: bool,
    /// The host directory that receives the private `/logs/verifier` (regular files and
    /// directories only, within the trial's download cap).
    pub output_dir: PathBuf,
    /// A directory of the environment to bring back (to the host path) once the tests are
    /// done, while the run's own results come back: the trial's `/logs/artifacts`, whose end
    /// of trial download so costs no round trip of its own. `None` leaves it to the caller.
    pub then_download: Option<(String, PathBuf)>,
}

/// What an isolated run did.
#[derive(Debug, Clone, PartialEq)]
pub enum IsolatedVerifyOutcome {
    /// The tests ran isolated.
    Ran(IsolatedRun),
    /// The sandbox has no isolation at all (a backend without a jail): the verifier runs the
    /// tests with a plain exec and records that they were not isolated.
    Unsupported(String),
    /// The sandbox's isolation could not be set up, for a reason outside the trial (the
    /// engine, the host's kernel or security profile): the tests did not run, and the
    /// verification fails as an infrastructure error (never a fallback to a plain exec).
    Unavailable(String),
    /// The trial's own state, which the agent made, kept the isolated tests from starting (a
    /// program of the image replaced by a directory, paths kept swapping): the agent's
    /// failure. The message says what was found.
    Blocked(String),
    /// The verification was killed from inside the trial, nothing the runner did and no
    /// memory limit hit: what ran the tests died of a signal from the trial's PID namespace,
    /// or the trial's container stopped before the verification ended. No result exists; the
    /// message says what was seen. The verifier records it as the agent's failure.
    Killed(String),
}

/// A finished isolated run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IsolatedRun {
    /// How the tests were isolated, for the record.
    pub mechanism: String,
    /// The test command's exit code; `None` when it was killed at the deadline or by a signal.
    pub exit_code: Option<i64>,
    /// True when the deadline stopped the tests.
    pub timed_out: bool,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Processes the agent left running when the tests started.
    pub leftover_processes: Vec<LeftoverProcess>,
    /// Entries of `/logs/verifier` that were not copied out (symlinks, FIFOs, devices), why.
    pub skipped: Vec<String>,
    /// Files cut at the output cap.
    pub truncated: Vec<String>,
    /// True when the request's `then_download` was brought back.
    pub then_downloaded: bool,
    /// The tests' programs and startup hooks the agent changed (`path: what`), whether the
    /// tests then ran with the image's (the default) or the agent's.
    pub toolchain_changes: Vec<String>,
}
