//! The verifier jail: the task's tests run in a private mount namespace of the trial
//! container, set up by a short-lived sibling container that shares the trial's PID and network
//! namespaces and runs the static helper `contain` (see `contain/main.rs` and ARCHITECTURE.md).
//!
//! The trial container itself never gets a capability more than Docker's default; only the
//! jail has `CAP_SYS_ADMIN`, and only the helper (uploaded into the jail's own fresh root, out of
//! the agent's reach) holds it. The helper's results land in the jail's root: a jail started
//! early sends them over its stdout as they are written (`warm.rs`), a fresh one has them
//! downloaded after it stops.

pub(crate) mod preflight;
pub(crate) mod signal;
pub(crate) mod upload;
pub(crate) mod warm;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, KillContainerOptionsBuilder, LogsOptionsBuilder,
};
use engine::ExecObserver;
use futures_util::StreamExt;
use tasks::isolation::{IsolatedRun, IsolatedVerifyOutcome, IsolatedVerifyRequest};
use tasks::records::LeftoverProcess;

use crate::connect::DockerClient;
use crate::container::archive::{self, DownloadBudget, DownloadReport};
use crate::container::removals::Removals;
use crate::container::remove_container;
use crate::error::DockerError;
use crate::jail::upload::{HELPER, HELPER_PATH, jail_root_parts, pack_off_thread};
use crate::jail::warm::WarmJail;

/// Grace between TERM and KILL when the tests' deadline passes.
const KILL_GRACE: Duration = Duration::from_secs(5);
/// How long the host waits past the tests' deadline and grace for the jail to exit.
const HOST_BACKSTOP: Duration = Duration::from_secs(20);
/// Most bytes of one verifier output file the helper copies out.
const MAX_FILE_BYTES: u64 = 64 << 20;
/// Most bytes of verifier output in all the helper copies out (the host's verifier budget
/// is the same or smaller).
const MAX_TOTAL_BYTES: u64 = 256 << 20;
/// The trial directory whose emptiness after the tests the helper reports (`artifacts\tempty`
/// in its status, see `contain/main.rs`).
pub(crate) const CHECKED_EMPTY: &str = "/logs/artifacts";
/// How the record names the mechanism.
const MECHANISM: &str = "verifier jail: /tests and /logs/verifier private to the tests";

/// Everything the jail needs to know about its trial container.
#[derive(Debug, Clone)]
pub(crate) struct JailSpec {
    /// The trial container's id and name.
    pub trial_id: String,
    pub trial_name: String,
    /// The image the trial runs (the jail starts from it, so nothing else must be pulled).
    pub image: String,
    /// The trial container's environment (`K=V`), so the tests see what an exec would.
    pub env: Vec<String>,
    /// The image's default user (the tests' user when the task names none).
    pub default_user: Option<String>,
    /// The trial's default working directory (the task's, else the image's).
    pub workdir: Option<String>,
    /// Labels of the jail (the trial's, so sweeps and reaping find it).
    pub labels: HashMap<String, String>,
    /// The trial's limits, applied to the jail too.
    pub limits: HostConfig,
    /// Tests put into the early jail's root with the helper, before the agent is done (see
    /// `warm.rs`); a verification of these tests then skips their upload.
    pub early_tests: Option<PathBuf>,
    /// The tests' side of the egress proxy (host directory, path in the jail): bound
    /// read-only into the jail only, where the helper starts the tests' relay from it
    /// (`contain/egress.rs`). `None` without a network allowlist in the task.
    pub tests_egress: Option<(PathBuf, String)>,
    /// Directories of the trial the early jail makes as it starts (`contain/logdirs.rs`),
    /// when no process of the trial runs before the agent phase; empty: none.
    pub make_dirs: Vec<String>,
}

/// Runs the tests of `request` isolated; see the module docs. `warm` is the jail started
/// early for this trial, if there is one (see `warm.rs`): its helper gets the order and
/// the tests start at once. A warm jail that is gone (the agent killed it) is replaced by a
/// fresh one, made as before. The jail's removal is left to `trial.removals`.
pub(crate) async fn verify(
    client: &DockerClient,
    spec: &JailSpec,
    warm: Option<WarmJail>,
    request: &IsolatedVerifyRequest,
    trial: TrialSide<'_>,
    tests_done: TestsDone,
) -> Result<IsolatedVerifyOutcome, DockerError> {
    let (observer, removals) = (trial.observer, trial.removals);
    if HELPER.is_empty() {
        return Ok(IsolatedVerifyOutcome::Unavailable(
            "this runner was built without the static verifier helper (no libc.a at build time)"
                .into(),
        ));
    }
    if let Some(mut warm) = warm {
        // The engine's wait, asked for at the jail's start, says whether it still runs.
        if !warm.has_exited() {
            let outcome = run_warm(client, spec, &mut warm, request, &trial, tests_done).await;
            remove_later(client, removals, observer, warm.id.clone());
            return outcome;
        }
        (observer.output)(
            "runner",
            b"the verifier jail started early is not running any more; starting a fresh one\n",
        );
        // Awaited: the fresh jail takes its name.
        let _ = remove_container(client, &warm.id).await;
    }
    if let Some((exit, oom)) = signal::stopped(client, &spec.trial_id).await? {
        return match signal::stopped_from_inside(exit, oom) {
            Some(why) => Ok(IsolatedVerifyOutcome::Killed(why)),
            None => Err(DockerError::Jail(format!(
                "container {} was stopped by its memory limit (OOM-killed), so nothing can be verified",
                spec.trial_name
            ))),
        };
    }
    let name = jail_name(spec);
    let body = jail_body(spec, request);
    let options = CreateContainerOptionsBuilder::default().name(&name).build();
    let created = match client.api().create_container(Some(options), body).await {
        Ok(created) => created,
        Err(e) => {
            return Ok(IsolatedVerifyOutcome::Unavailable(format!(
                "the engine refused the verifier jail: {e}"
            )));
        }
    };
    let outcome = run_jail(client, &created.id, request, &trial, tests_done).await;
    remove_later(client, removals, observer, created.id);
    outcome
}

/// Starts removing the stopped jail `id`; nothing waits for it but the job's end.
fn remove_later(client: &DockerClient, removals: &Removals, observer: &ExecObserver, id: String) {
    let output = observer.output.clone();
    removals.remove(client, vec![id], move |message| {
        output("runner", format!("{message}\n").as_bytes())
    });
}

/// The jail's name: the trial container's, with `-verifier`.
pub(crate) fn jail_name(spec: &JailSpec) -> String {
    format!("{}-verifier", spec.trial_name)
}

/// The arguments of `contain verify` for `request`.
fn verify_args(spec: &JailSpec, request: &IsolatedVerifyRequest) -> Vec<String> {
    let mut args: Vec<String> = [
        "verify",
        "--command",
        &request.command,
        "--timeout",
        &format!("{:.3}", request.timeout.as_secs_f64()),
        "--grace",
        &KILL_GRACE.as_secs().to_string(),
        "--max-file-bytes",
        &MAX_FILE_BYTES.to_string(),
        "--max-total-bytes",
        &MAX_TOTAL_BYTES.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Empty values are left out: an empty field would end a warm jail's order.
    if let Some(user) = request.user.as_ref().or(spec.default_user.as_ref())
        && !user.is_empty()
    {
        args.extend(["--user".to_owned(), user.clone()]);
    }
    if let Some(workdir) = spec.workdir.as_ref().filter(|w| !w.is_empty()) {
        args.extend(["--workdir".to_owned(), workdir.clone()]);
    }
    if request.env.contains_key("HOME") {
        args.extend(["--keep-home".to_owned(), "1".to_owned()]);
    }
    if request.agent_toolchain {
        args.extend(["--agent-toolchain".to_owned(), "1".to_owned()]);
    }
    if let Some((_, dir)) = &spec.tests_egress {
        args.extend(["--egress-dir".to_owned(), dir.clone()]);
    }
    args
}

/// The jail's host settings: the trial's PID and network namespaces, its limits, and the
/// capabilities the helper needs: `SYS_ADMIN` to mount, `WAKE_ALARM` to mark the tests, and
/// `SYS_PTRACE` to open the namespaces of a trial whose PID 1 is not root (a compose `user`):
/// the kernel lets another user's `/proc/1/ns/*` be opened only with it. The tests never get
/// the last one; their bounding set is the trial's plus `WAKE_ALARM`.
pub(crate) fn jail_host_config(spec: &JailSpec) -> HostConfig {
    let container = format!("container:{}", spec.trial_id);
    HostConfig {
        network_mode: Some(container.clone()),
        pid_mode: Some(container),
        cap_add: Some(vec![
            "SYS_ADMIN".into(),
            "WAKE_ALARM".into(),
            "SYS_PTRACE".into(),
        ]),
        init: Some(false),
        auto_remove: Some(false),
        security_opt: jail_security_opt(),
        // The tests' egress socket and relay: in the jail's own root, which no trial process
        // reaches (see `contain/egress.rs`).
        binds: spec
            .tests_egress
            .as_ref()
            .map(|(host, dir)| vec![format!("{}:{dir}:ro", host.display())]),
        ..spec.limits.clone()
    }
}

/// The jail's security options: the engine's defaults, or no AppArmor confinement when the
/// user set `RUNNER_JAIL_APPARMOR=unconfined` for a host whose default profile denies the
/// jail's mounts (see `preflight.rs`). The agent's container is never affected.
pub(crate) fn jail_security_opt() -> Option<Vec<String>> {
    let choice = std::env::var(crate::jail::preflight::JAIL_APPARMOR_ENV).ok()?;
    (choice == "unconfined").then(|| vec!["apparmor=unconfined".to_owned()])
}

fn jail_body(spec: &JailSpec, request: &IsolatedVerifyRequest) -> ContainerCreateBody {
    let mut entrypoint = vec![HELPER_PATH.to_owned()];
    entrypoint.extend(verify_args(spec, request));
    let mut env = spec.env.clone();
    env.extend(request.env.iter().map(|(k, v)| format!("{k}={v}")));
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        entrypoint: Some(entrypoint),
        cmd: Some(Vec::new()),
        env: Some(env),
        user: Some("0".into()),
        labels: Some(spec.labels.clone()),
        host_config: Some(jail_host_config(spec)),
        ..Default::default()
    }
}

/// A fresh jail: the helper and the tests go into its root before it starts.
async fn run_jail(
    client: &DockerClient,
    id: &str,
    request: &IsolatedVerifyRequest,
    trial: &TrialSide<'_>,
    tests_done: TestsDone,
) -> Result<IsolatedVerifyOutcome, DockerError> {
    let tests = pack_off_thread(&request.tests_dir, archive::pack_tests).await?;
    archive::upload_parts(
        client,
        id,
        jail_root_parts(Some(tests))?,
        "the verifier jail",
    )
    .await?;
    let started = Instant::now();
    if let Err(e) = client.api().start_container(id, None).await {
        return Ok(IsolatedVerifyOutcome::Unavailable(format!(
            "the verifier jail did not start: {e}"
        )));
    }
    let exit = wait_exit(client, id);
    finish_run(client, id, request, trial, (started, exit), tests_done).await
}

/// What of the trial's sandbox a verification uses: its container, the verifier outputs'
/// download budget, the observer of its commands, and where removals go.
pub(crate) struct TrialSide<'a> {
    pub container: &'a str,
    pub budget: Arc<DownloadBudget>,
    pub observer: &'a ExecObserver,
    pub removals: &'a Removals,
}

/// Told once the tests are over, so what must wait for them (the trial's `/logs/artifacts`)
/// comes back while the jail's results do; `true` when the helper found `/logs/artifacts`
/// empty then (there is nothing to download). Dropped unsent when the jail did not run to its
/// end.
pub(crate) type TestsDone = Option<tokio::sync::oneshot::Sender<bool>>;

/// A warm jail: the tests go into its (running) root, then the order starts them, and the
/// results come back over its stdout as they are written (`warm.rs`).
async fn run_warm(
    client: &DockerClient,
    spec: &JailSpec,
    warm: &mut WarmJail,
    request: &IsolatedVerifyRequest,
    trial: &TrialSide<'_>,
    tests_done: TestsDone,
) -> Result<IsolatedVerifyOutcome, DockerError> {
    // The warm jail was made from `spec`: its early tests are already in its root.
    if spec.early_tests.as_ref() != Some(&request.tests_dir) {
        let tar = pack_off_thread(&request.tests_dir, archive::pack_tests).await?;
        archive::upload(client, &warm.id, tar, "the tests into the verifier jail").await?;
    }
    let staging = staging_dir(&request.output_dir)?;
    let started = Instant::now();
    warm.order(&verify_args(spec, request), &request.env)
        .await?;
    let received = warm.receive_results(staging.path(), trial.budget.clone(), trial.observer);
    let Ok(report) = tokio::time::timeout(backstop(request), received).await else {
        return Ok(timed_out(client, &warm.id, trial.observer, started).await);
    };
    let elapsed = ran_for(trial.observer, started);
    let exit = match report
        .as_ref()
        .and_then(|_| read_small(staging.path(), "exit").trim().parse().ok())
    {
        Some(exit) => exit,
        // The stream was cut: the helper's exit says why (it is exiting, or gone).
        None => {
            let exit = match tokio::time::timeout(HOST_BACKSTOP, warm.exit_code()).await {
                Ok(exit) => exit?,
                Err(_) => return Ok(timed_out(client, &warm.id, trial.observer, started).await),
            };
            let killed = signal::killed_from_inside(client, &warm.id, trial.container, exit);
            if let Some(why) = killed.await? {
                return Ok(IsolatedVerifyOutcome::Killed(why));
            }
            exit
        }
    };
    let Some(report) = report else {
        return Err(DockerError::Jail(format!(
            "the verifier jail's results did not come back (its helper exited with {exit})"
        )));
    };
    let fetched = take_results(staging.path(), &request.output_dir, &report)?;
    let status = parse_status(&fetched.status);
    if let Some(done) = tests_done {
        let _ = done.send(status.artifacts_empty);
    }
    outcome_of(exit, status, fetched, elapsed, trial)
}

/// Waits for a fresh jail to exit (its run, from `started` to `exit`, counts as time inside
/// the verifier's command), relays its messages and downloads its results.
async fn finish_run(
    client: &DockerClient,
    id: &str,
    request: &IsolatedVerifyRequest,
    trial: &TrialSide<'_>,
    (started, exit): (Instant, impl Future<Output = Result<i64, DockerError>>),
    tests_done: TestsDone,
) -> Result<IsolatedVerifyOutcome, DockerError> {
    let Ok(exit) = tokio::time::timeout(backstop(request), exit).await else {
        return Ok(timed_out(client, id, trial.observer, started).await);
    };
    let exit = exit?;
    let elapsed = ran_for(trial.observer, started);
    if let Some(done) = tests_done {
        let _ = done.send(false);
    }
    // The helper writes to its stderr only when it fails (the tests' own output goes to
    // test-stdout.txt), so a clean exit spares the logs call.
    if exit != 0 {
        relay_logs(client, id, trial.observer).await;
        if let Some(why) = signal::killed_from_inside(client, id, trial.container, exit).await? {
            return Ok(IsolatedVerifyOutcome::Killed(why));
        }
    }
    let staging = staging_dir(&request.output_dir)?;
    let report = archive::download_dir(
        client,
        id,
        "/.runner/out",
        staging.path(),
        trial.budget.clone(),
    )
    .await?;
    let fetched = take_results(staging.path(), &request.output_dir, &report)?;
    outcome_of(exit, parse_status(&fetched.status), fetched, elapsed, trial)
}

/// How long the host waits for a jail: the tests' deadline, the kill grace and a backstop.
fn backstop(request: &IsolatedVerifyRequest) -> Duration {
    request.timeout + KILL_GRACE + HOST_BACKSTOP
}

/// Counts the jail's run since `started` as time inside the verifier's command and says so
/// in `trial.log`.
fn ran_for(observer: &ExecObserver, started: Instant) -> Duration {
    let elapsed = started.elapsed();
    observer.add_exec_time(elapsed);
    let text = format!("verifier jail ran for {:.3}s\n", elapsed.as_secs_f64());
    (observer.output)("runner", text.as_bytes());
    elapsed
}

/// A jail that outlived its backstop: killed, and recorded as the tests' timeout.
async fn timed_out(
    client: &DockerClient,
    id: &str,
    observer: &ExecObserver,
    started: Instant,
) -> IsolatedVerifyOutcome {
    let kill = KillContainerOptionsBuilder::default()
        .signal("KILL")
        .build();
    let _ = client.api().kill_container(id, Some(kill)).await;
    IsolatedVerifyOutcome::Ran(IsolatedRun {
        mechanism: MECHANISM.into(),
        timed_out: true,
        elapsed: ran_for(observer, started),
        ..IsolatedRun::default()
    })
}

/// What the helper's exit code, status and results say about the run.
fn outcome_of(
    exit: i64,
    status: JailStatus,
    fetched: Fetched,
    elapsed: Duration,
    trial: &TrialSide<'_>,
) -> Result<IsolatedVerifyOutcome, DockerError> {
    let (budget, observer) = (&trial.budget, trial.observer);
    for truncated in &status.truncated {
        observer.record_truncation(format!("verifier: {truncated}"), MAX_FILE_BYTES);
    }
    for truncated in &fetched.truncated {
        observer.record_truncation(format!("verifier/{truncated}"), budget.cap());
    }
    match exit {
        0 => Ok(IsolatedVerifyOutcome::Ran(IsolatedRun {
            mechanism: MECHANISM.into(),
            exit_code: status.exit_code,
            timed_out: status.timed_out,
            elapsed,
            leftover_processes: LeftoverProcess::parse_listing(&fetched.processes),
            skipped: status.skipped,
            truncated: status.truncated,
            // The sandbox sets it when it brought the request's directory back.
            then_downloaded: false,
            toolchain_changes: status.toolchain_changes,
        })),
        2 => Ok(IsolatedVerifyOutcome::Unavailable(
            status
                .unavailable
                .unwrap_or_else(|| "the verifier jail could not isolate the tests".into()),
        )),
        5 => Ok(IsolatedVerifyOutcome::Blocked(
            status.blocked.unwrap_or_else(|| {
                "the verifier jail found the trial in a state it could not verify".into()
            }),
        )),
        code => Err(DockerError::Jail(format!(
            "the verifier jail failed (exit {code}): {}",
            status
                .error
                .unwrap_or_else(|| "no status was written".into())
        ))),
    }
}

/// The jail's exit code (bollard reports a non-zero one as an error carrying it).
pub(crate) async fn wait_exit(client: &DockerClient, id: &str) -> Result<i64, DockerError> {
    let mut waiting = client.api().wait_container(id, None);
    match waiting.next().await {
        Some(Ok(response)) => Ok(response.status_code),
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => Ok(code),
        Some(Err(e)) => Err(DockerError::api("waiting for the verifier jail", e)),
        None => Err(DockerError::Jail(
            "the engine ended the wait without an exit code".into(),
        )),
    }
}

/// The helper's own messages (a few lines at most) into `trial.log`.
async fn relay_logs(client: &DockerClient, id: &str, observer: &ExecObserver) {
    let options = LogsOptionsBuilder::default()
        .stdout(true)
        .stderr(true)
        .tail("50")
        .build();
    let mut logs = client.api().logs(id, Some(options));
    while let Some(Ok(chunk)) = logs.next().await {
        (observer.output)("runner", &chunk.into_bytes());
    }
}

/// The files the helper left in the jail's `/.runner/out`.
struct Fetched {
    status: String,
    processes: String,
    truncated: Vec<String>,
}

fn io_error(operation: &str) -> impl FnOnce(std::io::Error) -> DockerError {
    let operation = operation.to_owned();
    move |source| DockerError::Io { operation, source }
}

/// A directory beside `output_dir` for the jail's results, removed when dropped.
fn staging_dir(output_dir: &Path) -> Result<tempfile::TempDir, DockerError> {
    let parent = output_dir.parent().unwrap_or(output_dir);
    tempfile::Builder::new()
        .prefix(".verifier-jail-")
        .tempdir_in(parent)
        .map_err(io_error("creating a staging directory"))
}

/// A small file of the results, as text (empty when it is missing).
fn read_small(staging: &Path, name: &str) -> String {
    tasks::bounded::read_capped(&staging.join(name), 1 << 20, name)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// Reads the helper's own files from the results unpacked into `staging` and moves its
/// `verifier/` into `output_dir`.
fn take_results(
    staging: &Path,
    output_dir: &Path,
    report: &DownloadReport,
) -> Result<Fetched, DockerError> {
    let verifier = staging.join("verifier");
    if verifier.is_dir() {
        std::fs::create_dir_all(output_dir).map_err(io_error("creating the verifier directory"))?;
        let entries =
            std::fs::read_dir(&verifier).map_err(io_error("reading the verifier output"))?;
        for entry in entries {
            let entry = entry.map_err(io_error("reading the verifier output"))?;
            let target = output_dir.join(entry.file_name());
            if std::fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir()) {
                std::fs::remove_dir_all(&target)
                    .map_err(io_error("replacing a verifier output"))?;
            }
            std::fs::rename(entry.path(), &target).map_err(io_error("moving a verifier output"))?;
        }
    }
    Ok(Fetched {
        status: read_small(staging, "status"),
        processes: read_small(staging, "processes"),
        truncated: report
            .truncated
            .iter()
            .filter_map(|t| t.strip_prefix("verifier/").map(str::to_owned))
            .collect(),
    })
}

/// The helper's `status` file.
#[derive(Debug, Default, PartialEq)]
struct JailStatus {
    exit_code: Option<i64>,
    timed_out: bool,
    skipped: Vec<String>,
    truncated: Vec<String>,
    unavailable: Option<String>,
    error: Option<String>,
    /// What the agent left that kept the tests from starting (exit 5).
    blocked: Option<String>,
    /// The tests' programs and startup hooks the agent changed.
    toolchain_changes: Vec<String>,
    /// The trial's `/logs/artifacts` was an empty directory once the tests were over.
    artifacts_empty: bool,
}

fn parse_status(text: &str) -> JailStatus {
    let mut status = JailStatus::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('\t') else {
            continue;
        };
        match key {
            "exit_code" => status.exit_code = value.parse().ok(),
            "timed_out" => status.timed_out = value == "1",
            "skipped" => status.skipped.push(value.to_owned()),
            "truncated" => status.truncated.push(value.to_owned()),
            "unavailable" => status.unavailable = Some(value.to_owned()),
            "error" => status.error = Some(value.to_owned()),
            "blocked" => status.blocked = Some(value.to_owned()),
            "toolchain_change" => status.toolchain_changes.push(value.to_owned()),
            "artifacts" => status.artifacts_empty = value == "empty",
            _ => {}
        }
    }
    status
}

#[cfg(test)]
mod tests;
