//! One task through every selected check: the static rules, then the oracle's trials (they
//! build the image), then the nop agent, the probes and the leak scan at once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tasks::lint::{Area, Finding, Severity, lint_task};
use tasks::{Task, TaskError};

use super::probes::{broken_answers, probes, scan_and_edit};
use super::report::{CheckName, CheckResult, Message, Status, TaskReport};
use super::stage::probe_copy;
use super::trials::{Runner, Trial};
use super::verdicts::{
    judge_broken, judge_leaks, judge_nop, judge_oracle, judge_probe, wanted_files,
};
use crate::exit::CliError;

/// What every task's check shares.
pub struct Context {
    /// The trial runner, `None` when no selected check needs containers.
    pub runner: Option<Runner>,
    /// The selected checks.
    pub selected: Vec<CheckName>,
    /// Oracle trials.
    pub repeat: u32,
    /// Where probe copies of tasks go.
    pub stage_dir: PathBuf,
    /// The task's index (keeps job names unique across tasks with one short name).
    pub index: usize,
}

/// The report of a task that did not load: `loads` fails with the error, the rest is skipped.
pub fn malformed(err: &TaskError) -> TaskReport {
    let text = err.to_string();
    let (name, path) = match err {
        TaskError::Invalid { path, .. } | TaskError::Missing { path, .. } => {
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, dir)
        }
        _ => (text.clone(), PathBuf::new()),
    };
    let mut checks = BTreeMap::new();
    checks.insert(
        CheckName::Loads,
        CheckResult::of(vec![Message::new(Status::Fail, text)]),
    );
    TaskReport {
        name,
        path,
        digest: None,
        checks,
        oracle_seconds: Vec::new(),
        seconds: 0.0,
    }
}

/// Every selected check of `task`.
pub async fn check_task(cx: &Context, task: &Task) -> TaskReport {
    let findings = lint_task(task);
    let mut checks = static_checks(cx, task, &findings);
    let static_leaks = from_findings(&findings, Area::Leaks);
    let runner = match &cx.runner {
        Some(runner) if task.unsupported.is_empty() => runner,
        _ => {
            skip_container_checks(cx, task, &mut checks, static_leaks);
            return report(task, checks, Vec::new());
        }
    };
    let mut oracle_seconds = Vec::new();
    if cx.selected(CheckName::Oracle) {
        let result = match runner
            .trials(&task.dir, "oracle", cx.repeat, &cx.job(task, "oracle"))
            .await
        {
            Ok(trials) => {
                let (result, seconds) = judge_oracle(&trials, task.config.agent.timeout_sec);
                oracle_seconds = seconds;
                result
            }
            Err(err) => trials_failed(&err),
        };
        checks.insert(CheckName::Oracle, result);
    }
    // The oracle built the image: the rest run at once.
    let wanted = wanted_files(task);
    let (nop, broken, hacks, scan) = tokio::join!(
        nop_check(cx, runner, task),
        broken_check(cx, runner, task),
        hacks_check(cx, runner, task),
        scan_probe(cx, runner, task, &wanted),
    );
    if let Some(nop) = nop {
        checks.insert(CheckName::Nop, nop);
    }
    if let Some(broken) = broken {
        checks.insert(CheckName::Broken, broken);
    }
    if let Some(mut hacks) = hacks {
        if let Some(scan) = &scan {
            let edit = judge_probe(
                "tests-edit",
                "test files the agent can see, rewritten to pass or deleted",
                clone_outcome(scan),
            );
            hacks.messages.push(edit);
            hacks = CheckResult::of(hacks.messages);
        }
        checks.insert(CheckName::Hacks, hacks);
    }
    if cx.selected(CheckName::Leaks) {
        let mut messages = static_leaks;
        match &scan {
            Some(Ok(trial)) => messages.extend(judge_leaks(trial, &wanted)),
            Some(Err(err)) => messages.push(Message::new(
                Status::Warn,
                format!("the agent's environment could not be scanned: {err}"),
            )),
            None => messages.push(Message::new(
                Status::Skip,
                "multi-step task: the agent's environment was not scanned",
            )),
        }
        checks.insert(CheckName::Leaks, CheckResult::of(messages));
    }
    report(task, checks, oracle_seconds)
}

impl Context {
    /// Whether `check` was selected.
    fn selected(&self, check: CheckName) -> bool {
        self.selected.contains(&check)
    }

    /// The job name of one of `task`'s runs (`what`).
    fn job(&self, task: &Task, what: &str) -> String {
        format!("{:03}-{}-{what}", self.index, task.short_name())
    }
}

/// The checks that need no container (`loads`, `reproducible`), and every unselected one
/// marked skipped.
fn static_checks(
    cx: &Context,
    task: &Task,
    findings: &[Finding],
) -> BTreeMap<CheckName, CheckResult> {
    let mut checks = BTreeMap::new();
    for check in CheckName::ALL {
        if !cx.selected(check) {
            checks.insert(check, CheckResult::skipped("not selected (--checks)"));
        }
    }
    if cx.selected(CheckName::Loads) {
        let mut messages = from_findings(findings, Area::Loads);
        messages.extend(task.unsupported.iter().map(|f| {
            Message::new(
                Status::Warn,
                format!("loads, but this runner cannot run it: {f}"),
            )
        }));
        checks.insert(CheckName::Loads, CheckResult::of(messages));
    }
    if cx.selected(CheckName::Reproducible) {
        checks.insert(
            CheckName::Reproducible,
            CheckResult::of(from_findings(findings, Area::Reproducible)),
        );
    }
    checks
}

/// No container runs (none selected, or the task cannot run here): the container checks are
/// skipped, and `leaks` holds only what the static rules found.
fn skip_container_checks(
    cx: &Context,
    task: &Task,
    checks: &mut BTreeMap<CheckName, CheckResult>,
    static_leaks: Vec<Message>,
) {
    let why = if task.unsupported.is_empty() {
        "no container checks selected"
    } else {
        "the task cannot run here (see loads)"
    };
    for check in [
        CheckName::Oracle,
        CheckName::Nop,
        CheckName::Broken,
        CheckName::Hacks,
    ] {
        checks
            .entry(check)
            .or_insert_with(|| CheckResult::skipped(why));
    }
    if cx.selected(CheckName::Leaks) {
        let mut messages = static_leaks;
        messages.push(Message::new(
            Status::Skip,
            format!("the agent's environment was not scanned: {why}"),
        ));
        checks.insert(CheckName::Leaks, CheckResult::of(messages));
    }
}

/// Why a probe does not run on `task`: the probes run on single-step tasks.
fn multi_step(task: &Task) -> Option<CheckResult> {
    (!task.config.steps.is_empty())
        .then(|| CheckResult::skipped("multi-step task: the probes run on single-step tasks"))
}

/// `nop`: the nop agent must not pass.
async fn nop_check(cx: &Context, runner: &Runner, task: &Task) -> Option<CheckResult> {
    if !cx.selected(CheckName::Nop) {
        return None;
    }
    Some(
        match runner
            .trials(&task.dir, "nop", 1, &cx.job(task, "nop"))
            .await
        {
            Ok(trials) => judge_nop(&trials),
            Err(err) => trials_failed(&err),
        },
    )
}

/// `broken`: wrong answers must fail.
async fn broken_check(cx: &Context, runner: &Runner, task: &Task) -> Option<CheckResult> {
    if !cx.selected(CheckName::Broken) {
        return None;
    }
    if let Some(skipped) = multi_step(task) {
        return Some(skipped);
    }
    let job = cx.job(task, "probe-broken");
    let outcome = run_probe(cx, runner, task, "broken", &broken_answers(), true, &job).await;
    Some(judge_broken(outcome))
}

/// `hacks`: every probe's shortcut must fail.
async fn hacks_check(cx: &Context, runner: &Runner, task: &Task) -> Option<CheckResult> {
    if !cx.selected(CheckName::Hacks) {
        return None;
    }
    if let Some(skipped) = multi_step(task) {
        return Some(skipped);
    }
    let runs = probes().into_iter().map(|probe| async move {
        let job = cx.job(task, &format!("probe-{}", probe.name));
        let outcome = run_probe(cx, runner, task, probe.name, &probe.script, false, &job).await;
        judge_probe(probe.name, probe.what, outcome)
    });
    Some(CheckResult::of(futures_util::future::join_all(runs).await))
}

/// The scan of the agent's environment for the `wanted` files (answers, tests), which also
/// tries to edit the tests (`leaks` and `hacks`); `None` when neither is selected or the task
/// has steps.
async fn scan_probe(
    cx: &Context,
    runner: &Runner,
    task: &Task,
    wanted: &std::collections::HashMap<String, (u64, PathBuf, bool)>,
) -> Option<ProbeOutcome> {
    if multi_step(task).is_some()
        || !(cx.selected(CheckName::Leaks) || cx.selected(CheckName::Hacks))
    {
        return None;
    }
    let hashes: Vec<(u64, String, bool)> = wanted
        .iter()
        .map(|(hash, (size, _, test))| (*size, hash.clone(), *test))
        .collect();
    let job = cx.job(task, "probe-scan");
    Some(
        run_probe(
            cx,
            runner,
            task,
            "scan",
            &scan_and_edit(&hashes),
            false,
            &job,
        )
        .await,
    )
}

fn report(
    task: &Task,
    mut checks: BTreeMap<CheckName, CheckResult>,
    oracle_seconds: Vec<f64>,
) -> TaskReport {
    declared_skips(task, &mut checks);
    TaskReport {
        name: task.name.clone(),
        path: task.dir.clone(),
        digest: Some(task.digest.clone()),
        checks,
        oracle_seconds,
        seconds: 0.0,
    }
}

/// Checks a task declares it fails on purpose (`[metadata.check] skip = ["oracle"]` with a
/// `reason`; Harbor's metadata is free-form, so the task stays Harbor's): each is reported as
/// skipped with the reason instead of its verdict. A name that is not a check is a warning.
fn declared_skips(task: &Task, checks: &mut BTreeMap<CheckName, CheckResult>) {
    let Some(table) = task.config.metadata.get("check").and_then(|v| v.as_table()) else {
        return;
    };
    let reason = table
        .get("reason")
        .and_then(|v| v.as_str())
        .unwrap_or("no reason given");
    let names = table
        .get("skip")
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    for name in names {
        let name = name.as_str().unwrap_or_default().to_owned();
        match CheckName::ALL.into_iter().find(|c| c.as_str() == name) {
            Some(check) => {
                let was = checks.get(&check).map_or(Status::Skip, |c| c.status);
                checks.insert(check, CheckResult::skipped(format!(
                    "the task skips it ([metadata.check] skip): {reason} (its verdict was {was:?})")));
            }
            None => {
                let loads = checks
                    .entry(CheckName::Loads)
                    .or_insert_with(|| CheckResult::of(vec![]));
                loads.messages.push(Message::at(
                    Status::Warn,
                    format!("[metadata.check] skip names {name:?}, not a check of tasks check"),
                    "task.toml".into(),
                    None,
                ));
                *loads = CheckResult::of(std::mem::take(&mut loads.messages));
            }
        }
    }
}

/// A probe's trial, or why it could not run.
pub type ProbeOutcome = Result<Trial, ProbeError>;

/// Why a probe's trial could not run; its message follows "probe <name> could not run: ".
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProbeError {
    /// Copying the task with the probe as its solution failed (the error is shared so an
    /// outcome can be judged twice, as the scan probe is).
    #[error("cannot stage the probe: {0}")]
    Stage(#[source] Arc<std::io::Error>),
    /// The runner could not run the probe's trial (its message says why; shared, as
    /// [`ProbeError::Stage`]'s error is).
    #[error("{0}")]
    Trials(#[source] Arc<CliError>),
    /// The trial ran but left no result.
    #[error("the probe's trial did not finish")]
    Unfinished,
}

fn clone_outcome(outcome: &ProbeOutcome) -> ProbeOutcome {
    match outcome {
        Ok(trial) => Ok(Trial {
            result: trial.result.clone(),
            dir: trial.dir.clone(),
        }),
        Err(e) => Err(e.clone()),
    }
}

/// Stages a copy of `task` with `script` as its solution and runs the oracle on it once.
async fn run_probe(
    cx: &Context,
    runner: &Runner,
    task: &Task,
    label: &str,
    script: &str,
    keep_solution: bool,
    job: &str,
) -> ProbeOutcome {
    let stage = cx.stage_dir.join(format!("{:03}", cx.index));
    let copy = probe_copy(task, &stage, label, script, keep_solution)
        .map_err(|e| ProbeError::Stage(Arc::new(e)))?;
    let mut trials = runner
        .trials(&copy, "oracle", 1, job)
        .await
        .map_err(|e| ProbeError::Trials(Arc::new(e)))?;
    trials.pop().ok_or(ProbeError::Unfinished)
}

fn from_findings(findings: &[Finding], area: Area) -> Vec<Message> {
    findings
        .iter()
        .filter(|f| f.area == area)
        .map(|f| {
            let status = match f.severity {
                Severity::Warn => Status::Warn,
                Severity::Fail => Status::Fail,
            };
            Message::at(
                status,
                format!("[{}] {}", f.rule, f.message),
                f.path.clone(),
                f.line,
            )
        })
        .collect()
}

fn trials_failed(err: &CliError) -> CheckResult {
    CheckResult::of(vec![Message::new(
        Status::Fail,
        format!("the trials could not run: {err}"),
    )])
}
