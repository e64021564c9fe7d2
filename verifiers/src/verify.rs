//! Running a task's tests in its sandbox and turning their output into a `VerifierResult`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tasks::Task;
use tasks::isolation::{IsolatedRun, IsolatedVerifyOutcome, IsolatedVerifyRequest};
use tasks::records::{LeftoverProcess, VerifierIsolation, VerifierResult};
use tasks::sandbox::{ExecOutput, ExecRequest, Sandbox};

use crate::checks::{read_checks, tally};
use crate::error::{VerifierError, VerifierErrorKind};
use crate::inspect::{
    DirState, VERIFIER_DIR, judge, listing_command, parse_listing, removal_command,
};
use crate::leftovers;
use crate::reward::read_rewards;
use crate::target::Target;

/// Where the task's `tests/` is copied, only at verification time.
pub const TESTS_DIR: &str = "/tests";

/// After a timeout, how long salvaging `/logs/verifier` for the record may take.
const SALVAGE_GRACE: Duration = Duration::from_secs(20);
/// How long past the verifier deadline the host waits: an isolated run stops the tests itself
/// at the deadline (TERM, grace, KILL) and then copies their outputs out.
const HOST_GRACE: Duration = Duration::from_secs(30);
/// How long listing the agent's leftover processes may take.
const LISTING_TIMEOUT: Duration = Duration::from_secs(20);

// Runs as root before the tests (after `rm -rf /tests` when they are uploaded: nothing the
// agent planted there, say a `json.py` that shadows the stdlib for a Python test, survives).
// Stale reward and check files are removed so an agent cannot pre-write its own reward; a
// /logs/verifier that is not a real directory (e.g. a symlink the agent made) is replaced.
const PREPARE_LOGS: &str = "d=/logs/verifier; \
    if [ -L \"$d\" ] || { [ -e \"$d\" ] && [ ! -d \"$d\" ]; }; then rm -rf -- \"$d\"; fi; \
    mkdir -p \"$d\" && rm -rf -- \"$d/reward.json\" \"$d/reward.txt\" \"$d/ctrf.json\" \"$d/test-stdout.txt\" \
    && chmod 777 \"$d\"";

/// Finds the verifier image's own test script and makes it executable; exit 3 when it has none.
const IMAGE_TESTS: &str =
    "[ -f /tests/test.sh ] || exit 3; [ -x /tests/test.sh ] || chmod +x /tests/test.sh";

const RUN_TESTS: &str = "(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1";

/// A successful verification.
#[derive(Debug, Clone)]
pub struct VerifierOutcome {
    /// Rewards, the test exit code and the named checks, as recorded in the trial result.
    pub result: VerifierResult,
    /// Wall time of `/tests/test.sh`.
    pub test_elapsed: Duration,
    /// Wall time of every verifier command inside the container (for overhead accounting).
    pub exec_time: Duration,
}

/// What verification saw of the environment, whatever its outcome: recorded in the trial's
/// result (runner-only fields) and `trial.log`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VerifyNotes {
    /// Whether the tests ran isolated from the agent's processes, or why not.
    pub isolation: Option<VerifierIsolation>,
    /// Processes the agent left running when the tests started.
    pub leftover_processes: Vec<LeftoverProcess>,
    /// Verifier outputs that were not copied (links, FIFOs) or were cut at the cap.
    pub refused_outputs: Vec<String>,
    /// Set by the caller: an environment directory to bring back to the host once the tests
    /// are done, with an isolated run's results (`IsolatedVerifyRequest::then_download`).
    pub then_download: Option<(String, PathBuf)>,
    /// True when the isolated run brought `then_download` back (else it is the caller's).
    pub then_downloaded: bool,
    /// Set by the caller: run the tests with the agent's programs and startup hooks (the
    /// job's `--agent-toolchain`).
    pub agent_toolchain: bool,
    /// The tests' programs and startup hooks the agent changed, when a jail checked them.
    pub toolchain_changes: Option<Vec<String>>,
    /// Set by the caller: env over the target's (the egress proxy of an allowlist phase).
    pub extra_env: BTreeMap<String, String>,
}

/// Verifies one trial: runs `/tests/test.sh` as the `[verifier]` user with `[verifier].env`,
/// isolated from whatever the agent left running when the sandbox can (private `/tests` and
/// `/logs/verifier`), else with the tests uploaded to the shared `/tests`; brings
/// `/logs/verifier` back to `<trial_dir>/verifier/` safely and reads the rewards and named
/// checks. Everything must finish by `deadline` (an isolated run gets a short grace to copy
/// its outputs out). `notes` learns the isolation and the agent's leftover processes.
pub async fn verify<S: Sandbox>(
    sandbox: &S,
    task: &Task,
    trial_dir: &Path,
    deadline: Instant,
    notes: &mut VerifyNotes,
) -> Result<VerifierOutcome, VerifierError> {
    let target = Target::task(task, trial_dir)?;
    verify_target(sandbox, task, target, deadline, notes).await
}

/// Verifies step `index` of a multi-step task as [`verify`] verifies a task: the shared
/// `tests/` with `steps/<name>/tests/` over it become `/tests`, the step's `[steps.verifier]`
/// env goes over the task's `[verifier].env` and its user replaces the task's; the outputs
/// come back to `<step_dir>/verifier/`.
pub async fn verify_step<S: Sandbox>(
    sandbox: &S,
    task: &Task,
    index: usize,
    step_dir: &Path,
    deadline: Instant,
    notes: &mut VerifyNotes,
) -> Result<VerifierOutcome, VerifierError> {
    let target = Target::step(task, index, step_dir)?;
    verify_target(sandbox, task, target, deadline, notes).await
}

/// Verifies in a separate verifier environment whose image owns `/tests`, as Harbor does
/// (`skip_tests_upload`): nothing is uploaded and the image's `/tests/test.sh` runs with the
/// env and user of the task (`step` `None`, outputs into `<out_dir>/verifier/`) or of step
/// `step` (outputs into `<step_dir>/verifier/`). No jail and no listing of leftovers: the agent
/// never ran in this container. An image without `/tests/test.sh` is an `AddTestsDirError`.
pub async fn verify_with_image_tests<S: Sandbox>(
    sandbox: &S,
    task: &Task,
    step: Option<usize>,
    out_dir: &Path,
    deadline: Instant,
    notes: &mut VerifyNotes,
) -> Result<VerifierOutcome, VerifierError> {
    let target = Target::in_image(task, step, out_dir)?;
    verify_target(sandbox, task, target, deadline, notes).await
}

async fn verify_target<S: Sandbox>(
    sandbox: &S,
    task: &Task,
    target: Target,
    deadline: Instant,
    notes: &mut VerifyNotes,
) -> Result<VerifierOutcome, VerifierError> {
    let budget = deadline.saturating_duration_since(Instant::now());
    let mut run = Run {
        sandbox,
        task,
        host_dir: target.host_dir.clone(),
        env: target
            .env
            .iter()
            .chain(&notes.extra_env)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        tests_dir: target.tests_dir.clone(),
        tests_in_image: target.tests_in_image,
        user: target.user.clone(),
        budget,
        exec_time: Duration::ZERO,
        notes,
    };
    let host_deadline = deadline.checked_add(HOST_GRACE).unwrap_or(deadline);
    let outcome = tokio::time::timeout_at(host_deadline.into(), run.execute(deadline)).await;
    // The merged tests (a step's) stay on the host until the tests have run.
    drop(target);
    match outcome {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(error)) if !matches!(error.kind, VerifierErrorKind::Timeout { .. }) => Err(error),
        Ok(Err(error)) => Err(run.salvage(error).await),
        Err(_elapsed) => {
            let error = VerifierErrorKind::Timeout {
                task: task.name.clone(),
                timeout_sec: budget.as_secs_f64(),
            };
            Err(run.salvage(error.into()).await)
        }
    }
}

struct Run<'a, S> {
    sandbox: &'a S,
    task: &'a Task,
    host_dir: PathBuf,
    env: BTreeMap<String, String>,
    tests_dir: PathBuf,
    /// The verifier's image owns `/tests`: nothing is uploaded (see [`verify_with_image_tests`]).
    tests_in_image: bool,
    user: Option<String>,
    /// The whole verifier budget, for the timeout message.
    budget: Duration,
    exec_time: Duration,
    notes: &'a mut VerifyNotes,
}

impl<S: Sandbox> Run<'_, S> {
    async fn execute(&mut self, deadline: Instant) -> Result<VerifierOutcome, VerifierError> {
        if self.tests_in_image {
            return self.execute_image_tests(deadline).await;
        }
        let task = self.task.name.clone();
        let tests_dir = self.tests_dir.clone();
        if !tests_dir.join("test.sh").is_file() {
            return Err(VerifierErrorKind::AddTestsDir {
                task,
                message: format!(
                    "{} does not exist; add the task's test script",
                    tests_dir.join("test.sh").display()
                ),
            }
            .into());
        }
        std::fs::create_dir_all(&self.host_dir).map_err(|e| self.download_failed(e))?;
        let user = self.user.clone();
        let request = IsolatedVerifyRequest {
            tests_dir: tests_dir.clone(),
            command: RUN_TESTS.to_owned(),
            user: user.clone(),
            env: self.env.clone(),
            timeout: deadline.saturating_duration_since(Instant::now()),
            output_dir: self.host_dir.clone(),
            then_download: self.notes.then_download.clone(),
            agent_toolchain: self.notes.agent_toolchain,
        };
        let started = Instant::now();
        let isolated = self.sandbox.verify_isolated(request).await;
        self.exec_time += started.elapsed();
        match isolated.map_err(|e| VerifierErrorKind::Sandbox {
            task: task.clone(),
            step: "run /tests/test.sh isolated".into(),
            message: e.to_string(),
        })? {
            IsolatedVerifyOutcome::Ran(run) => return self.finish_isolated(run),
            IsolatedVerifyOutcome::Killed(message) => {
                return Err(VerifierErrorKind::Killed { task, message }.into());
            }
            IsolatedVerifyOutcome::Blocked(message) => {
                return Err(VerifierErrorKind::Blocked { task, message }.into());
            }
            // Never a fallback: tests run beside the agent's leftovers would let them forge
            // the reward, and the host's failure must not pass for a result.
            IsolatedVerifyOutcome::Unavailable(why) => {
                return Err(VerifierErrorKind::Sandbox {
                    task,
                    step: "set up the verifier jail".into(),
                    message: why,
                }
                .into());
            }
            IsolatedVerifyOutcome::Unsupported(why) => {
                tracing::warn!(task = %task, "verifier isolation unavailable: {why}");
                self.notes.isolation = Some(VerifierIsolation {
                    isolated: false,
                    detail: why,
                    toolchain: None,
                });
                self.list_leftovers().await;
            }
        }
        let prepare = format!("rm -rf {TESTS_DIR}; {PREPARE_LOGS}");
        self.root("prepare /tests and /logs/verifier", &prepare)
            .await?;
        self.sandbox
            .upload_dir(&tests_dir, TESTS_DIR)
            .await
            .map_err(|e| VerifierErrorKind::AddTestsDir {
                task: task.clone(),
                message: e.to_string(),
            })?;
        self.root("chmod +x /tests/test.sh", "chmod +x /tests/test.sh")
            .await?;
        self.run_tests(deadline).await
    }

    /// Runs the image's own `/tests/test.sh` in a container the agent never ran in.
    async fn execute_image_tests(
        &mut self,
        deadline: Instant,
    ) -> Result<VerifierOutcome, VerifierError> {
        self.notes.isolation = Some(VerifierIsolation {
            isolated: true,
            detail: "separate verifier environment: a container of its own, running the tests \
                     its image holds"
                .into(),
            toolchain: None,
        });
        std::fs::create_dir_all(&self.host_dir).map_err(|e| self.download_failed(e))?;
        self.root("prepare /logs/verifier", PREPARE_LOGS).await?;
        let found = self
            .exec("find /tests/test.sh", ExecRequest::runner_own(IMAGE_TESTS))
            .await?;
        match found.exit_code {
            Some(0) => {}
            Some(3) => {
                return Err(VerifierErrorKind::AddTestsDir {
                    task: self.task.name.clone(),
                    message: "the separate verifier's image has no /tests/test.sh: its tests \
                              are the image's own (as in Harbor), so its tests/Dockerfile must \
                              COPY them to /tests"
                        .into(),
                }
                .into());
            }
            code => {
                return Err(VerifierErrorKind::Sandbox {
                    task: self.task.name.clone(),
                    step: "chmod +x /tests/test.sh".into(),
                    message: format!("exit code {code:?}: {}", found.stderr.trim()),
                }
                .into());
            }
        }
        self.run_tests(deadline).await
    }

    /// Runs `/tests/test.sh` as the verifier's user by `deadline`, then brings
    /// `/logs/verifier` back safely and reads the rewards and checks.
    async fn run_tests(&mut self, deadline: Instant) -> Result<VerifierOutcome, VerifierError> {
        let task = self.task.name.clone();
        let user = self.user.clone();
        let remaining = deadline.saturating_duration_since(Instant::now());
        let request = ExecRequest::new(RUN_TESTS)
            .maybe_user(user.as_deref())
            .envs(&self.env)
            .timeout(remaining);
        let output = self.exec("run /tests/test.sh", request).await?;
        if output.timed_out {
            return Err(VerifierErrorKind::Timeout {
                task,
                timeout_sec: self.budget.as_secs_f64(),
            }
            .into());
        }
        let test_elapsed = output.elapsed;
        let mut partial = VerifierResult {
            test_exit_code: output.exit_code,
            ..VerifierResult::default()
        };

        let download = self.download_safely().await;
        fill_checks(&mut partial, &self.host_dir);
        download.map_err(|e| e.with_partial(partial.clone()))?;
        let rewards = read_rewards(&self.host_dir)
            .map_err(|kind| VerifierError::from(kind).with_partial(partial.clone()))?;
        partial.rewards = Some(rewards);
        Ok(VerifierOutcome {
            result: partial,
            test_elapsed,
            exec_time: self.exec_time,
        })
    }

    /// Turns an isolated run into the outcome: its outputs are already on the host (regular
    /// files only), so only the rewards and checks are read.
    // The crate's error type, as every other step returns it (clippy does not lint those
    // because they are async).
    #[allow(clippy::result_large_err)]
    fn finish_isolated(&mut self, run: IsolatedRun) -> Result<VerifierOutcome, VerifierError> {
        self.notes.isolation = Some(VerifierIsolation {
            isolated: true,
            detail: run.mechanism.clone(),
            toolchain: Some(
                if self.notes.agent_toolchain {
                    "agent"
                } else {
                    "image"
                }
                .into(),
            ),
        });
        self.notes.toolchain_changes = Some(run.toolchain_changes);
        self.notes.leftover_processes = run.leftover_processes;
        self.notes.then_downloaded = run.then_downloaded;
        self.notes.refused_outputs = run.skipped.into_iter().chain(run.truncated).collect();
        let mut partial = VerifierResult {
            test_exit_code: run.exit_code,
            ..VerifierResult::default()
        };
        fill_checks(&mut partial, &self.host_dir);
        if run.timed_out {
            return Err(VerifierError::from(VerifierErrorKind::Timeout {
                task: self.task.name.clone(),
                timeout_sec: self.budget.as_secs_f64(),
            })
            .with_partial(partial));
        }
        let rewards = read_rewards(&self.host_dir)
            .map_err(|kind| VerifierError::from(kind).with_partial(partial.clone()))?;
        partial.rewards = Some(rewards);
        Ok(VerifierOutcome {
            result: partial,
            test_elapsed: run.elapsed,
            exec_time: self.exec_time,
        })
    }

    /// Lists the agent's leftover processes with a plain command; a failure is only logged (a
    /// fork bomb may leave no room to start one).
    async fn list_leftovers(&mut self) {
        let request =
            ExecRequest::runner_own(leftovers::listing_command()).timeout(LISTING_TIMEOUT);
        match self.sandbox.exec(request).await {
            Ok(out) if out.success() => {
                self.notes.leftover_processes = leftovers::parse(&out.stdout);
            }
            Ok(out) => {
                tracing::warn!(task = %self.task.name, "listing leftover processes failed: {}", out.stderr.trim())
            }
            Err(e) => {
                tracing::warn!(task = %self.task.name, "listing leftover processes failed: {e}")
            }
        }
    }

    /// Inspects `/logs/verifier` in the container, deletes refused entries, then downloads it.
    async fn download_safely(&mut self) -> Result<(), VerifierError> {
        let task = self.task.name.clone();
        let listing = self.root("list /logs/verifier", &listing_command()).await?;
        let state = parse_listing(&listing.stdout).map_err(|e| VerifierErrorKind::Sandbox {
            task: task.clone(),
            step: "list /logs/verifier".into(),
            message: e.to_string(),
        })?;
        let entries = match state {
            DirState::Dir(entries) => entries,
            DirState::Missing => {
                return Err(VerifierErrorKind::RewardFileNotFound {
                    dir: VERIFIER_DIR.into(),
                }
                .into());
            }
            DirState::Unsafe(refusal) => {
                return Err(VerifierErrorKind::RewardFileUnsafe {
                    path: VERIFIER_DIR.into(),
                    refusal,
                }
                .into());
            }
        };
        let verdict = judge(&entries);
        if !verdict.remove.is_empty() {
            tracing::warn!(task = %task, "removing refused verifier outputs before download: {:?}", verdict.remove);
            self.root(
                "remove refused verifier outputs",
                &removal_command(&verdict.remove),
            )
            .await?;
        }
        std::fs::create_dir_all(&self.host_dir).map_err(|e| self.download_failed(e))?;
        self.sandbox
            .download_dir(VERIFIER_DIR, &self.host_dir)
            .await
            .map_err(|e| self.download_failed(e))?;
        if let Some((name, refusal)) = verdict.reward_refusal {
            return Err(VerifierErrorKind::RewardFileUnsafe {
                path: PathBuf::from(VERIFIER_DIR).join(name),
                refusal,
            }
            .into());
        }
        Ok(())
    }

    /// After a timeout, brings back what the tests wrote (for debugging) within a short grace.
    async fn salvage(&mut self, error: VerifierError) -> VerifierError {
        match tokio::time::timeout(SALVAGE_GRACE, self.download_safely()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(task = %self.task.name, "could not salvage /logs/verifier after the timeout: {e}")
            }
            Err(_) => {
                tracing::warn!(task = %self.task.name, "salvaging /logs/verifier after the timeout took too long")
            }
        }
        let mut partial = VerifierResult::default();
        fill_checks(&mut partial, &self.host_dir);
        error.with_partial(partial)
    }

    /// The host side of `/logs/verifier` could not be made or filled: the one error for both.
    fn download_failed(&self, error: impl std::fmt::Display) -> VerifierErrorKind {
        VerifierErrorKind::DownloadVerifierDir {
            task: self.task.name.clone(),
            target: self.host_dir.clone(),
            message: error.to_string(),
        }
    }

    async fn root(&mut self, step: &str, command: &str) -> Result<ExecOutput, VerifierError> {
        let output = self.exec(step, ExecRequest::runner_own(command)).await?;
        if !output.success() {
            return Err(VerifierErrorKind::Sandbox {
                task: self.task.name.clone(),
                step: step.into(),
                message: format!("exit code {:?}: {}", output.exit_code, output.stderr.trim()),
            }
            .into());
        }
        Ok(output)
    }

    async fn exec(
        &mut self,
        step: &str,
        request: ExecRequest,
    ) -> Result<ExecOutput, VerifierError> {
        let started = Instant::now();
        let result = self.sandbox.exec(request).await;
        self.exec_time += started.elapsed();
        result.map_err(|e| {
            VerifierErrorKind::Sandbox {
                task: self.task.name.clone(),
                step: step.into(),
                message: e.to_string(),
            }
            .into()
        })
    }
}

fn fill_checks(result: &mut VerifierResult, host_dir: &Path) {
    if let Some(checks) = read_checks(host_dir) {
        let (passed, total) = tally(&checks);
        result.assertions_passed = Some(passed);
        result.assertions_total = Some(total);
        result.checks = Some(checks);
    }
}
