//! The job directory writer: result.json rewritten as trials finish, lock.json as images are
//! ready. Every write is atomic.

use std::path::PathBuf;

use chrono::Utc;
use tasks::atomic::write_json_atomic;
use tasks::records::{JobLock, JobResult, TrialResult};

use super::stats::job_stats;
use crate::backend::ImageInfo;
use crate::events::Event;

/// Keeps the job's records current on disk.
pub struct JobRecorder {
    dir: PathBuf,
    result: JobResult,
    lock: JobLock,
    finished: Vec<TrialResult>,
    running: u32,
}

impl JobRecorder {
    /// Starts recording a job of `total` trials into `dir`.
    pub fn new(dir: PathBuf, job_id: &str, total: u32, lock: JobLock) -> JobRecorder {
        let now = Utc::now();
        let result = JobResult {
            id: job_id.to_owned(),
            started_at: now,
            updated_at: now,
            finished_at: None,
            n_total_trials: total,
            stats: Default::default(),
        };
        JobRecorder {
            dir,
            result,
            lock,
            finished: Vec::new(),
            running: 0,
        }
    }

    /// Updates the records for `event`.
    pub fn record(&mut self, event: &Event) -> std::io::Result<()> {
        match event {
            Event::TrialStarted { .. } => self.trial_started(),
            Event::TrialFinished(result) => self.trial_finished((**result).clone()),
            Event::ImageReady { task, image, .. } => self.image_ready(task, image),
            Event::Phase { .. } | Event::ImageProgress { .. } | Event::ImageFailed { .. } => Ok(()),
        }
    }

    /// A trial started.
    pub fn trial_started(&mut self) -> std::io::Result<()> {
        self.running += 1;
        self.write_result()
    }

    /// A trial finished.
    pub fn trial_finished(&mut self, result: TrialResult) -> std::io::Result<()> {
        self.running = self.running.saturating_sub(1);
        self.finished.push(result);
        self.write_result()
    }

    /// An image is ready: record it (reference, id, digests, origin) for the task's trials.
    pub fn image_ready(&mut self, task: &str, image: &ImageInfo) -> std::io::Result<()> {
        self.lock.record_image(task, &image.lock_image());
        self.write_lock()
    }

    /// The job ended (normally or interrupted).
    pub fn finish(&mut self) -> std::io::Result<()> {
        self.result.finished_at = Some(Utc::now());
        self.running = 0;
        self.write_result()
    }

    /// Writes the initial result.json (all trials pending).
    pub fn write_initial(&mut self) -> std::io::Result<()> {
        self.write_result()
    }

    /// Finished trial results so far.
    pub fn finished(&self) -> &[TrialResult] {
        &self.finished
    }

    /// The finished trial results, in the order they finished.
    pub fn into_finished(self) -> Vec<TrialResult> {
        self.finished
    }

    /// Writes lock.json.
    pub fn write_lock(&self) -> std::io::Result<()> {
        write_json_atomic(&self.dir.join("lock.json"), &self.lock)
    }

    fn write_result(&mut self) -> std::io::Result<()> {
        let refs: Vec<&TrialResult> = self.finished.iter().collect();
        let mut stats = job_stats(&refs);
        stats.n_running_trials = self.running;
        stats.n_pending_trials = self
            .result
            .n_total_trials
            .saturating_sub(self.running + stats.n_completed_trials);
        self.result.stats = stats;
        self.result.updated_at = Utc::now();
        write_json_atomic(&self.dir.join("result.json"), &self.result)
    }
}
