//! The job directory writer: result.json rewritten as trials finish, lock.json as images are
//! ready, job.log as anything happens. Every record write is atomic and durable. result.json
//! summarises every finished trial, so writing it is O(trials): it is rewritten at most every
//! [`RESULT_INTERVAL`] (the job's loop flushes a pending change on its tick, and the job's end
//! always writes it), not on every event, which made a job O(trials²). On a resume
//! the recorder starts from the trials already complete, so the records describe the whole
//! job as if it had run in one go.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tasks::TrialOutcome;
use tasks::atomic::write_json_atomic;
use tasks::records::{
    Coverage, EstimateInterval, EvalIntervals, JobLock, JobResult, JobStats, LockTrial,
    SharedNames, TrialResult, TrialTotals,
};

use super::log::JobLog;
use super::record_manifest::ManifestRecorder;
use super::stats::job_stats;
use crate::backend::ImageInfo;
use crate::events::{Event, TimedEvent};

/// The most often result.json is rewritten while trials run.
pub const RESULT_INTERVAL: Duration = Duration::from_millis(500);

/// Keeps the job's records current on disk.
pub struct JobRecorder {
    /// When result.json was last written, and whether it is behind the events since.
    written_at: Option<Instant>,
    behind: bool,
    dir: PathBuf,
    result: JobResult,
    lock: JobLock,
    /// The totals of every finished trial (never whole records: see [`TrialTotals`]).
    finished: Vec<TrialTotals>,
    /// The strings those totals share.
    names: SharedNames,
    running: u32,
    log: JobLog,
    /// Trials a resume found complete (their lock entries keep the image they ran in).
    done_before: std::collections::HashSet<String>,
    /// record_manifest.jsonl: each trial's files hashed as it ends.
    manifest: ManifestRecorder,
}

impl JobRecorder {
    /// Starts recording a job of `total` planned trials into `dir`, of which `done` are
    /// already complete (a resume); `started_at` is the job's first start when resumed.
    pub fn new(
        dir: PathBuf,
        job_id: &str,
        total: u32,
        lock: JobLock,
        started_at: Option<DateTime<Utc>>,
        done: Vec<TrialTotals>,
        log: JobLog,
    ) -> JobRecorder {
        let now = Utc::now();
        let result = JobResult {
            schema_version: Default::default(),
            id: job_id.to_owned(),
            started_at: started_at.unwrap_or(now),
            updated_at: now,
            finished_at: None,
            n_total_trials: total,
            stats: Default::default(),
            coverage: None,
            llm_bridge: None,
            shard: None,
            n_shards: None,
        };
        let done_before = done.iter().map(|r| r.trial_name.clone()).collect();
        let manifest = ManifestRecorder::open(&dir, job_id, &done_before);
        JobRecorder {
            written_at: None,
            behind: false,
            dir,
            result,
            lock,
            finished: done,
            names: SharedNames::default(),
            running: 0,
            log,
            done_before,
            manifest,
        }
    }

    /// Updates the records for `event`.
    pub fn record(&mut self, event: &TimedEvent) -> std::io::Result<()> {
        self.log.event(event);
        match &event.event {
            Event::TrialStarted { .. } => self.trial_started(),
            Event::TrialFinished(result) => self.trial_finished(result),
            Event::TrialRetrying { .. } => {
                self.running = self.running.saturating_sub(1);
                self.update_result()
            }
            Event::ImageReady { task, image, .. } => self.image_ready(task, image),
            Event::Phase { .. }
            | Event::Placed { .. }
            | Event::ImageProgress { .. }
            | Event::ImageFailed { .. }
            | Event::Paused { .. }
            | Event::Warning(_) => Ok(()),
        }
    }

    /// A trial started.
    pub fn trial_started(&mut self) -> std::io::Result<()> {
        self.running += 1;
        self.update_result()
    }

    /// A trial finished.
    pub fn trial_finished(&mut self, result: &TrialResult) -> std::io::Result<()> {
        self.running = self.running.saturating_sub(1);
        self.finished.push(TrialTotals::of(result, &mut self.names));
        // Counted whatever the hashing says: a trial left out of the manifest shows at
        // validation, and the error fails the job's records (as a result.json write would).
        let hashed = self.manifest.trial_finished(&result.trial_name);
        self.update_result()?;
        hashed
    }

    /// An image is ready: record it (reference, id, digests, origin) for the task's trials,
    /// except those a resume found complete, which keep the image they ran in.
    pub fn image_ready(&mut self, task: &str, image: &ImageInfo) -> std::io::Result<()> {
        let kept: Vec<(usize, LockTrial)> = self
            .lock
            .trials
            .iter()
            .enumerate()
            .filter(|(_, t)| t.task.name == task && self.done_before.contains(&t.trial_name))
            .map(|(i, t)| (i, t.clone()))
            .collect();
        self.lock.record_image(task, &image.lock_image());
        for (i, trial) in kept {
            self.lock.trials[i] = trial;
        }
        self.write_lock()
    }

    /// Records each task's image on each engine of a pool (lock.json's `engine_images`,
    /// merged over what a resumed job's lock already held) and writes lock.json.
    pub fn record_engine_images(
        &mut self,
        images: Vec<(String, String, String)>,
    ) -> std::io::Result<()> {
        for (task, engine, id) in images {
            self.lock
                .engine_images
                .entry(task)
                .or_default()
                .insert(engine, id);
        }
        self.write_lock()
    }

    /// Records which shard of its plan the job is (`--shard I/N`), as config.json does.
    pub fn set_shard(&mut self, shard: Option<u32>, n_shards: Option<u32>) {
        self.result.shard = shard;
        self.result.n_shards = n_shards;
    }

    /// Records the LLM bridge's job totals (written with the next result.json).
    pub fn set_llm_usage(&mut self, usage: tasks::records::JobLlmUsage) {
        self.result.llm_bridge = Some(usage);
    }

    /// The job ended (normally or interrupted).
    pub fn finish(&mut self) -> std::io::Result<()> {
        self.result.finished_at = Some(Utc::now());
        self.running = 0;
        // Every trial's teardown is done by now (the job's end waits for them): its
        // sidecars' logs are complete.
        let sidecars = self.manifest.teardowns_done();
        self.write_result()?;
        sidecars
    }

    /// Ends the record at `at` (a merged job's last part's end; none while a part runs).
    pub fn finish_at(&mut self, at: Option<DateTime<Utc>>) -> std::io::Result<()> {
        self.result.finished_at = at;
        self.running = 0;
        self.write_result()
    }

    /// Writes the initial result.json (the trials a resume found complete, the rest pending).
    pub fn write_initial(&mut self) -> std::io::Result<()> {
        self.write_result()
    }

    /// Finished trials' totals so far (including those a resume found complete).
    pub fn finished(&self) -> &[TrialTotals] {
        &self.finished
    }

    /// The finished trials' totals: a resume's complete ones first, then in the order they
    /// finished.
    pub fn into_finished(self) -> Vec<TrialTotals> {
        self.finished
    }

    /// The job's coverage as last written.
    pub fn coverage(&self) -> Coverage {
        self.result
            .coverage
            .clone()
            .unwrap_or_else(|| coverage(self.result.n_total_trials, &self.finished))
    }

    /// Writes lock.json, as Harbor 0.26 writes it (no null fields), and hashes it (and
    /// config.json, written before the first lock) into the record manifest.
    pub fn write_lock(&mut self) -> std::io::Result<()> {
        let lock = tasks::records::HarborLock(&self.lock);
        write_json_atomic(&self.dir.join("lock.json"), &lock)?;
        self.manifest.job_files_written()
    }

    /// The record manifest (a merge sets its trials' entries from the parts').
    pub fn manifest_mut(&mut self) -> &mut ManifestRecorder {
        &mut self.manifest
    }

    /// Writes result.json if a change is pending (the job's loop calls this on its tick).
    pub fn flush(&mut self) -> std::io::Result<()> {
        if self.behind {
            self.write_result()
        } else {
            Ok(())
        }
    }

    /// Notes a change: written now unless result.json was written less than
    /// [`RESULT_INTERVAL`] ago (then the next flush or event writes it).
    fn update_result(&mut self) -> std::io::Result<()> {
        self.behind = true;
        match self.written_at {
            Some(at) if at.elapsed() < RESULT_INTERVAL => Ok(()),
            _ => self.write_result(),
        }
    }

    fn write_result(&mut self) -> std::io::Result<()> {
        self.behind = false;
        self.written_at = Some(Instant::now());
        let mut stats = job_stats(&self.finished);
        stats.n_running_trials = self.running;
        stats.n_pending_trials = self
            .result
            .n_total_trials
            .saturating_sub(self.running + stats.n_completed_trials);
        let coverage = coverage(self.result.n_total_trials, &self.finished);
        stats.n_retries = coverage.retries;
        add_intervals(&mut stats, &self.finished);
        self.result.coverage = Some(coverage);
        self.result.stats = stats;
        self.result.updated_at = Utc::now();
        write_json_atomic(&self.dir.join("result.json"), &self.result)
    }
}

/// Adds to each eval its task-clustered intervals (runner-only `intervals`), from the same
/// trials and the same reward rule (`TrialResult::reward`, errors as 0) as its `metrics`.
pub fn add_intervals(stats: &mut JobStats, finished: &[TrialTotals]) {
    let mut by_eval: std::collections::BTreeMap<
        &str,
        std::collections::BTreeMap<&str, Vec<Option<f64>>>,
    > = Default::default();
    for result in finished {
        by_eval
            .entry(&result.eval_key)
            .or_default()
            .entry(&result.task_name)
            .or_default()
            .push(result.reward());
    }
    let resampling = stats::Resampling::default();
    for (key, tasks) in by_eval {
        let Some(eval) = stats.evals.get_mut(key) else {
            continue;
        };
        let estimate = stats::summarize(tasks.values().map(Vec::as_slice), &resampling);
        let interval = |value: f64, ci: Option<stats::Interval>| EstimateInterval {
            value,
            low: ci.map(|c| c.low),
            high: ci.map(|c| c.high),
        };
        eval.intervals = Some(EvalIntervals {
            method: estimate.interval_method.to_owned(),
            level: stats::LEVEL,
            resamples: resampling.resamples as u64,
            seed: resampling.seed,
            mean: interval(estimate.mean.value, estimate.mean.ci),
            mean_stderr_clustered: estimate.mean.stderr_clustered,
            n_tasks: estimate.mean.n_tasks as u64,
            n_trials: estimate.mean.n_trials as u64,
            pass_at_k: estimate
                .pass_at_k
                .iter()
                .map(|p| (p.k.to_string(), interval(p.value, p.ci)))
                .collect(),
        });
    }
}

/// Planned trials by outcome: those with a final record by [`TrialResult::outcome`], the rest
/// not run.
pub fn coverage(planned: u32, finished: &[TrialTotals]) -> Coverage {
    let mut c = Coverage {
        planned,
        ..Coverage::default()
    };
    for result in finished {
        match result.outcome {
            TrialOutcome::Scored => c.scored += 1,
            TrialOutcome::AgentError => c.agent_error += 1,
            TrialOutcome::InfraError => c.infra_error += 1,
        }
        c.retries += result.attempts.max(1) - 1;
    }
    c.not_run = planned.saturating_sub(finished.len() as u32);
    c.fraction = if planned == 0 {
        1.0
    } else {
        f64::from(c.scored) / f64::from(planned)
    };
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::records::{trial_result, with_attempts};

    #[test]
    fn each_eval_gets_its_mean_and_pass_at_k_with_task_clustered_intervals() {
        // Three tasks × 2 trials; rewards per task (1, 1), (1, 0), (0, error).
        let finished: Vec<TrialTotals> = [
            trial_result("a1", "a", Some(1.0), None),
            trial_result("a2", "a", Some(1.0), None),
            trial_result("b1", "b", Some(1.0), None),
            trial_result("b2", "b", Some(0.0), None),
            trial_result("c1", "c", Some(0.0), None),
            trial_result("c2", "c", None, Some("AgentSetupError")),
        ]
        .iter()
        .map(TrialTotals::from)
        .collect();
        let mut stats = job_stats(&finished);
        add_intervals(&mut stats, &finished);
        let eval = stats.evals.values().next().unwrap();
        let intervals = eval.intervals.as_ref().unwrap();
        assert_eq!(intervals.mean.value, eval.metrics[0]["mean"]);
        assert_eq!((intervals.n_tasks, intervals.n_trials), (3, 6));
        let (low, high) = (intervals.mean.low.unwrap(), intervals.mean.high.unwrap());
        assert!(
            low <= 0.5 && 0.5 <= high && low >= 0.0 && high <= 1.0,
            "{low} {high}"
        );
        // Task sums 2, 1, 0 over 2 trials each: N = 6, ȳ = 0.5, residuals 1, 0, −1;
        // se² = 3/2 · 2 / 36 = 1/12.
        let se = intervals.mean_stderr_clustered.unwrap();
        assert!((se - (1.0f64 / 12.0).sqrt()).abs() < 1e-12, "{se}");
        assert!(!eval.pass_at_k.is_empty());
        for (k, value) in &eval.pass_at_k {
            assert_eq!(intervals.pass_at_k[k].value, *value, "pass@{k}");
            assert!(intervals.pass_at_k[k].low.is_some(), "pass@{k}");
        }
        // Harbor reads result.json with unknown keys ignored: the field is an addition.
        let json = serde_json::to_value(&stats).unwrap();
        let evals = json["evals"].as_object().unwrap();
        assert!(evals.values().all(|e| e["intervals"]["level"] == 0.95));
    }

    #[test]
    fn coverage_counts_outcomes_retries_and_trials_not_run() {
        let finished: Vec<TrialTotals> = [
            trial_result("a", "t", Some(1.0), None),
            trial_result("b", "t", Some(0.0), Some("AgentTimeoutError")),
            trial_result("c", "t", None, Some("AgentSetupError")),
            with_attempts(
                trial_result("d", "t", None, Some("EnvironmentStartError")),
                3,
            ),
        ]
        .iter()
        .map(TrialTotals::from)
        .collect();
        let c = coverage(6, &finished);
        assert_eq!(
            (c.scored, c.agent_error, c.infra_error, c.not_run, c.retries),
            (2, 1, 1, 2, 2)
        );
        assert!((c.fraction - 2.0 / 6.0).abs() < 1e-12);
        assert_eq!(coverage(0, &[]).fraction, 1.0);
    }
}
