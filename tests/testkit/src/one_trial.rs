//! One trial of a dataset run as a whole job on a backend, its record read back: how the
//! engine's state-machine tests (steps, blame) look at a single trial.

use std::path::{Path, PathBuf};

use adapter::AnyAgent;
use engine::backend::Backend;
use engine::job::{JobSettings, plan_job, run_job};
use tasks::Dataset;
use tasks::records::TrialResult;
use tokio_util::sync::CancellationToken;

/// Plans `dataset` (one task, k = 1) under `settings` and runs it with `agent` on `backend`
/// into `<dir>/jobs/<job name>`: the trial's directory and its result as written to disk.
pub async fn run_one_trial<B: Backend>(
    dir: &Path,
    backend: B,
    agent: AnyAgent,
    dataset: &Dataset,
    settings: &JobSettings,
) -> (PathBuf, TrialResult) {
    let plan = plan_job(dataset, settings);
    let job_dir = dir.join("jobs").join(&settings.job_name);
    let outcome = run_job(
        backend,
        agent,
        plan,
        job_dir.clone(),
        settings,
        CancellationToken::new(),
        |_| {},
    )
    .await
    .expect("the job directory is written");
    let result = crate::records::on_disk(&job_dir, &outcome.results)
        .into_iter()
        .next()
        .expect("one trial");
    (job_dir.join(&result.trial_name), result)
}
