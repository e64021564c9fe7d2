//! Leaderboard preflight: validates one or more job directories (Harbor's or ours) as one
//! submission against the leaderboard rules (docs/harbor-format.md §6), offline, and computes the figures
//! a leaderboard would publish. Job files are read as JSON values so Harbor's older shapes pass.

mod agents;
mod binding;
mod coverage;
mod error;
mod evidence;
mod figures;
mod files;
mod images;
mod job;
pub mod manifest;
pub mod metadata;
mod models;
mod overrides;
mod planned;
mod records;
pub mod render;
mod report;
mod rule;
mod scan;
mod trial;
pub mod yaml;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use agents::SubmittedAgent;
pub use coverage::DatasetTasks;
pub use error::SubmissionError;
pub use models::JobModels;
pub use report::{
    Figures, Interval, IntervalMethod, REPORT_SCHEMA, Report, RuleOutcome, Status, VerdictSummary,
    Verdicts, Violation,
};
pub use rule::{Rule, Verdict};
pub use trial::reward_of;

/// Harbor's `MIN_TRIALS_PER_TASK`.
pub const DEFAULT_MIN_TRIALS: usize = 5;

/// What to validate.
#[derive(Debug, Clone)]
pub struct Options {
    /// Job dirs validated together as one submission.
    pub job_dirs: Vec<PathBuf>,
    /// The dataset whose tasks must all be covered at their exact content digests: a dataset
    /// dir or a manifest file ([`DatasetTasks::from_path`]).
    pub dataset: Option<PathBuf>,
    /// `metadata.yaml` to check.
    pub metadata: Option<PathBuf>,
    /// Minimum trials per task across all jobs.
    pub min_trials: usize,
    /// Every evidence rule decides `valid` too (`--require-evidence`).
    pub require_evidence: bool,
    /// How each job dir is shown in the report, by position; the path as given for the rest.
    pub job_names: Vec<String>,
    /// Public keys (files) one of which must have signed every job's record manifest.
    pub trusted_keys: Vec<PathBuf>,
    /// The dirs whose records `records_unchanged` and `trusted_signature` judge, by position:
    /// the originals of scrubbed copies (scrub rewrites a file it redacts, which the job's
    /// manifest cannot vouch for). Empty: the job dirs themselves.
    pub records_of: Vec<PathBuf>,
}

impl Options {
    /// Options for `job_dirs` with the defaults (no dataset, no metadata, 5 trials per task).
    pub fn new(job_dirs: Vec<PathBuf>) -> Options {
        Options {
            job_dirs,
            dataset: None,
            metadata: None,
            min_trials: DEFAULT_MIN_TRIALS,
            require_evidence: false,
            job_names: Vec::new(),
            trusted_keys: Vec::new(),
            records_of: Vec::new(),
        }
    }
}

/// Validates a submission. `Err` only for input that cannot be validated at all.
pub fn validate(options: &Options) -> Result<Report, SubmissionError> {
    if options.job_dirs.is_empty() {
        return Err(SubmissionError::NoJobs);
    }
    let dataset = match &options.dataset {
        Some(path) => Some(DatasetTasks::from_path(path)?),
        None => None,
    };
    // The instructions trajectories are bound to: a dataset folder has them, a manifest not.
    // `read`, not `load`: a submission may cover tasks Harbor runs and this runner cannot yet.
    let read_dataset = match &options.dataset {
        Some(dir) if dir.is_dir() => Some(tasks::Dataset::read(dir)?),
        _ => None,
    };
    let trusted = options
        .trusted_keys
        .iter()
        .map(|p| tasks::records::record_signature::read_verifying_key(p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut violations = Vec::new();
    if let Some(path) = &options.metadata {
        violations.extend(metadata::check(path)?);
    }
    let mut jobs = Vec::new();
    for (i, dir) in options.job_dirs.iter().enumerate() {
        let display = match options.job_names.get(i) {
            Some(name) => name.clone(),
            None => dir.display().to_string().trim_end_matches('/').to_owned(),
        };
        jobs.push(job::load(dir, display)?);
    }
    let work: Vec<(usize, &PathBuf)> = jobs
        .iter()
        .enumerate()
        .flat_map(|(i, j)| j.trial_dirs.iter().map(move |d| (i, d)))
        .collect();
    let trials = inspect_all(&jobs, &work);

    for job in &mut jobs {
        violations.append(&mut job.violations);
    }
    let mut trials = trials;
    for trial in &mut trials {
        violations.append(&mut trial.violations);
    }
    // Counted once whatever paths point at a trial; every rule below sees each trial once.
    violations.extend(planned::dedup(&mut trials, &jobs));
    violations.extend(planned::check(&jobs, &trials));
    violations.extend(agents::check(&jobs, &trials));
    violations.extend(agents::check_one_agent(&jobs, &trials));
    violations.extend(models::check(&jobs, &trials));
    violations.extend(evidence::check(&jobs, &trials));
    let images: Vec<images::TrialImage> = jobs.iter().flat_map(|j| j.images.clone()).collect();
    violations.extend(images::check(&images));
    let counts = coverage::trials_per_task(&trials, dataset.as_ref());
    violations.extend(coverage::check_min_trials(&counts, options.min_trials));
    let mut skipped = Vec::new();
    // The run's own evidence: records unchanged since each trial ended, trajectories bound.
    let records_of = if options.records_of.is_empty() {
        &options.job_dirs
    } else {
        &options.records_of
    };
    let records = records::check(records_of, &jobs, &trusted);
    violations.extend(records.violations);
    if !records.any_recorded {
        skipped.push((Rule::RecordsUnchanged, records::NOT_RECORDED));
    }
    if trusted.is_empty() {
        skipped.push((Rule::TrustedSignature, records::NEEDS_TRUSTED_KEY));
    }
    let instructions = read_dataset
        .as_ref()
        .map(binding::instructions)
        .unwrap_or_default();
    violations.extend(binding::check(&options.job_dirs, &trials, &instructions));
    match &dataset {
        Some(ds) => violations.extend(coverage::check_versions(&trials, ds)),
        None => skipped.push((Rule::CorrectTaskVersions, "needs --dataset DIR|MANIFEST")),
    }
    if options.metadata.is_none() {
        skipped.push((
            Rule::MetadataFormattedCorrectly,
            "needs --metadata metadata.yaml",
        ));
    }
    let mut figures = figures::compute(jobs.len(), &trials, counts);
    figures.models_called = models::per_job(&jobs, &trials);
    figures::add_leaderboard_accuracy(&mut figures, planned::planned_count(&jobs, &trials));
    let mut report = Report::new(
        jobs.iter().map(|j| j.display.clone()).collect(),
        violations,
        &skipped,
        figures,
        options.require_evidence,
    );
    report.agent = agents::submitted(&trials);
    Ok(report)
}

/// Inspects every trial dir, spread over the available cores (trials are independent; reading
/// and scanning files dominates).
fn inspect_all(jobs: &[job::Job], work: &[(usize, &PathBuf)]) -> Vec<trial::TrialFacts> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(work.len().max(1));
    let next = AtomicUsize::new(0);
    let inspect = |i: usize| {
        let (job, dir) = work[i];
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        (
            i,
            trial::inspect(job, dir, format!("{}/{name}", jobs[job].display)),
        )
    };
    let mut results: Vec<(usize, trial::TrialFacts)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= work.len() {
                            break mine;
                        }
                        mine.push(inspect(i));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a trial inspection thread panicked"))
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests;
