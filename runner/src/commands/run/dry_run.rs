//! `runner run --dry-run` and `--print-config`: what a job would do, before anyone pays for
//! it. The plan is made exactly as for a run (selection, shard, k, the agent and its models),
//! then printed instead of run: no job dir is made, no container started, no image pulled or
//! built (the engine is only asked which images it already has).
//!
//! The duration estimate has two sources. The task timeouts bound each trial (agent plus
//! verifier, scaled by the multipliers), so they give the longest the job can take with
//! `--n-concurrent` trials at once; earlier jobs given with `--history` give each task's
//! measured mean trial time, which usually says far less. Neither counts image builds.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use docker_backend::{DockerClient, PlannedImage, planned_image};
use engine::job::{JobPlan, JobSettings, TaskWeight};
use serde::Serialize;
use tasks::Task;
use tasks::TimedPhase;

use crate::exit::CliError;
use crate::report::short_duration;

/// The flags that preview a job instead of running it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PreviewArgs {
    /// Print what the job would run (tasks, trials, images to pull or build, models and
    /// budgets, an estimate of its duration) and exit: no job dir, no container.
    #[arg(long, conflicts_with = "resume")]
    pub dry_run: bool,
    /// Print the job's config.json as the run would write it (Harbor's JobConfig) and exit.
    #[arg(long, conflicts_with_all = ["resume", "dry_run"])]
    pub print_config: bool,
    /// With --dry-run: earlier job dirs whose trial times estimate this job's duration per
    /// task (runner's or Harbor's records); repeatable.
    #[arg(long, value_name = "JOB_DIR", requires = "dry_run")]
    pub history: Vec<PathBuf>,
}

/// One task of the plan.
#[derive(Debug, Serialize)]
struct TaskRow {
    task: String,
    trials: usize,
    /// Agent plus verifier timeout of one trial, scaled; `None`: the agent has no deadline.
    bound_sec: Option<f64>,
    /// Mean trial time of this task in the history jobs.
    history_sec: Option<f64>,
    image: Option<ImageRow>,
}

#[derive(Debug, Serialize)]
struct ImageRow {
    reference: String,
    action: &'static str,
    size_bytes: Option<u64>,
}

/// The whole preview (`--format json` prints it as it is).
#[derive(Debug, Serialize)]
struct Preview {
    schema: &'static str,
    job_name: String,
    dataset: String,
    agent: String,
    model: Option<String>,
    models: Vec<String>,
    trial_budget_tokens: Option<u64>,
    trial_budget_usd: Option<f64>,
    k: u32,
    n_concurrent: u32,
    shard: Option<String>,
    trials: usize,
    tasks: Vec<TaskRow>,
    /// Why the images are not listed (the engine could not be asked), if so.
    images_unknown: Option<String>,
    /// The longest the job can take: the trial bounds spread over the slots, plus the
    /// longest one; `None` when some agent has no deadline.
    bound_sec: Option<f64>,
    /// From `--history`: the measured means of the tasks that have one, spread the same way.
    history_sec: Option<f64>,
    history_tasks: usize,
}

/// `--print-config`: the plan's config.json.
pub fn print_config(plan: &JobPlan) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(&plan.config)
        .map_err(|e| CliError::runner_because("cannot print the job config", e))?;
    println!("{text}");
    Ok(())
}

/// `--dry-run`: prints the plan of `settings` as text or JSON.
pub async fn print_plan(
    plan: &JobPlan,
    settings: &JobSettings,
    preview: &PreviewArgs,
    shard: Option<String>,
    json: bool,
) -> Result<(), CliError> {
    let history = history_means(&preview.history)?;
    let mut tasks: Vec<TaskRow> = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for trial in &plan.trials {
        *counts.entry(trial.task().name.clone()).or_default() += 1;
    }
    let (client, images_unknown) = match DockerClient::connect().await {
        Ok(client) => (Some(client), None),
        Err(e) => (None, Some(e.to_string())),
    };
    for task in plan.tasks() {
        let image = match &client {
            Some(client) => Some(image_row(
                planned_image(
                    client,
                    &task,
                    &engine::ImageRequest::for_task(&task, settings.force_build),
                )
                .await
                .map_err(|e| CliError::bad_input_because(format!("task {}", task.name), e))?,
            )),
            None => None,
        };
        tasks.push(TaskRow {
            trials: counts.get(&task.name).copied().unwrap_or_default(),
            bound_sec: trial_bound(&task, settings),
            history_sec: history.get(&task.name).copied(),
            task: task.name.clone(),
            image,
        });
    }
    let slots = settings.n_concurrent.max(1) as usize;
    let bounds: Option<Vec<f64>> = tasks
        .iter()
        .map(|t| t.bound_sec.map(|b| b * t.trials as f64))
        .collect();
    let longest = |rows: &mut dyn Iterator<Item = f64>| rows.fold(0.0, f64::max);
    let bound_sec = bounds.map(|b| {
        b.iter().sum::<f64>() / slots as f64
            + longest(&mut tasks.iter().filter_map(|t| t.bound_sec))
    });
    let measured: Vec<&TaskRow> = tasks.iter().filter(|t| t.history_sec.is_some()).collect();
    let history_sec = (!measured.is_empty()).then(|| {
        let total: f64 = measured
            .iter()
            .map(|t| t.history_sec.unwrap_or_default() * t.trials as f64)
            .sum();
        (total / slots as f64).max(longest(&mut measured.iter().filter_map(|t| t.history_sec)))
    });
    let budget = settings.bridge.as_ref().map(|b| b.bridge.trial_budget());
    let out = Preview {
        schema: "runner.plan/v1",
        job_name: settings.job_name.clone(),
        dataset: plan
            .config
            .datasets
            .first()
            .and_then(|d| d.path.clone())
            .unwrap_or_default(),
        agent: settings.agent.name.clone().unwrap_or_default(),
        model: settings.agent.model_name.clone(),
        models: settings.agent.models.clone(),
        trial_budget_tokens: budget.and_then(|b| b.max_tokens),
        trial_budget_usd: budget.and_then(|b| b.max_cost_usd),
        k: settings.k,
        n_concurrent: settings.n_concurrent,
        shard,
        trials: plan.trials.len(),
        history_tasks: measured.len(),
        tasks,
        images_unknown,
        bound_sec,
        history_sec,
    };
    if json {
        let text = serde_json::to_string_pretty(&out)
            .map_err(|e| CliError::runner_because("cannot print the plan", e))?;
        println!("{text}");
    } else {
        print!("{}", render(&out));
    }
    Ok(())
}

fn image_row(image: PlannedImage) -> ImageRow {
    ImageRow {
        reference: image.reference,
        action: image.action.as_str(),
        size_bytes: image.size_bytes,
    }
}

/// One trial's longest run: its agent time (every step's) and its verification (once per
/// step), each scaled by its multiplier.
fn trial_bound(task: &Task, settings: &JobSettings) -> Option<f64> {
    let agent = TaskWeight::of(task).seconds?;
    let verifications = task.config.steps.len().max(1) as f64;
    let m = &settings.multipliers;
    Some(
        agent * m.factor(TimedPhase::Agent)
            + task.config.verifier.timeout_sec * verifications * m.factor(TimedPhase::Verifier),
    )
}

/// Mean trial time per task name over the trials of `jobs` that started and finished.
fn history_means(jobs: &[PathBuf]) -> Result<BTreeMap<String, f64>, CliError> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for job in jobs {
        let entries = std::fs::read_dir(job).map_err(|e| {
            CliError::bad_input_because(format!("--history {}: not a job dir", job.display()), e)
        })?;
        if !job.join("config.json").is_file() {
            return Err(CliError::bad_input(format!(
                "--history {}: not a job dir (no config.json)",
                job.display()
            )));
        }
        for entry in entries.flatten() {
            let Some((task, seconds)) = trial_time(&entry.path().join("result.json")) else {
                continue;
            };
            let sum = sums.entry(task).or_default();
            sum.0 += seconds;
            sum.1 += 1;
        }
    }
    Ok(sums
        .into_iter()
        .map(|(task, (total, n))| (task, total / n as f64))
        .collect())
}

/// A trial record's task name and wall time, when it has both ends.
fn trial_time(path: &std::path::Path) -> Option<(String, f64)> {
    let bytes =
        tasks::bounded::read_capped(path, tasks::bounded::MAX_RECORD_BYTES, "trial").ok()?;
    let record: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let at = |field: &str| -> Option<DateTime<Utc>> { record.get(field)?.as_str()?.parse().ok() };
    let seconds = (at("finished_at")? - at("started_at")?).to_std().ok()?;
    let task = record.get("task_name")?.as_str()?.to_owned();
    Some((task, seconds.as_secs_f64()))
}

fn duration(seconds: f64) -> String {
    short_duration(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
}

fn render(p: &Preview) -> String {
    let mut out = format!(
        "dry run of job {}: nothing started, no job dir written\n  dataset {}\n  agent {}{}, k={}, {} at once{}\n",
        p.job_name,
        p.dataset,
        p.agent,
        p.model
            .as_deref()
            .map(|m| format!(" with model {m}"))
            .unwrap_or_default(),
        p.k,
        p.n_concurrent,
        p.shard
            .as_deref()
            .map(|s| format!(", shard {s}"))
            .unwrap_or_default(),
    );
    if !p.models.is_empty() {
        out += &format!("  models through the bridge: {}\n", p.models.join(", "));
    }
    if p.trial_budget_tokens.is_some() || p.trial_budget_usd.is_some() {
        out += &format!(
            "  budget per trial: {}{}\n",
            p.trial_budget_tokens
                .map(|t| format!("{t} tokens "))
                .unwrap_or_default(),
            p.trial_budget_usd
                .map(|d| format!("${d:.2}"))
                .unwrap_or_default()
        );
    }
    out += &format!("  {} trial(s) of {} task(s)\n\n", p.trials, p.tasks.len());
    let width = p
        .tasks
        .iter()
        .map(|t| t.task.len())
        .max()
        .unwrap_or(4)
        .max(4);
    out += &format!("  {:width$}  TRIALS  BOUND     HISTORY   IMAGE\n", "TASK");
    for t in &p.tasks {
        let image = match &t.image {
            Some(i) => format!(
                "{} {}{}",
                i.action,
                i.reference,
                i.size_bytes
                    .map(|s| format!(" ({} MB)", s / 1_000_000))
                    .unwrap_or_default()
            ),
            None => "unknown".to_owned(),
        };
        out += &format!(
            "  {:width$}  {:>6}  {:<8}  {:<8}  {image}\n",
            t.task,
            t.trials,
            t.bound_sec.map_or("none".to_owned(), duration),
            t.history_sec.map_or("-".to_owned(), duration),
        );
    }
    out += "\n";
    if let Some(why) = &p.images_unknown {
        out += &format!("  images: unknown, the engine could not be asked ({why})\n");
    } else {
        let count = |action: &str| {
            p.tasks
                .iter()
                .filter(|t| t.image.as_ref().is_some_and(|i| i.action == action))
                .count()
        };
        out += &format!(
            "  images: {} present, {} to pull, {} to build\n",
            count("present"),
            count("pull"),
            count("build")
        );
    }
    match p.bound_sec {
        Some(s) => {
            out += &format!(
                "  at most {} by the task timeouts ({} at once; image builds not counted)\n",
                duration(s),
                p.n_concurrent
            )
        }
        None => out += "  no upper bound: some task's agent has no timeout\n",
    }
    if let Some(s) = p.history_sec {
        out += &format!(
            "  about {} by the history ({} of {} task(s) measured)\n",
            duration(s),
            p.history_tasks,
            p.tasks.len()
        );
    }
    out
}
