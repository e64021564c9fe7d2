//! The engine at scale, with a backend whose operations take no time: every one of 10,000
//! trials gets its record, and the job's records account for all of them. (How long it takes
//! and how memory grows is `cargo bench -p engine --bench scale`, not a timed test.)

use tasks::records::{JobResult, TrialResult};
use testkit::instant::{job_dir, run_instant_job, scratch_dir};

const TRIALS: u32 = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_trials_all_get_records() {
    let dir = scratch_dir();
    let outcome = run_instant_job(dir.path(), TRIALS, 64).await;
    assert_eq!(outcome.results.len(), TRIALS as usize);
    assert_eq!(outcome.coverage.scored, TRIALS);
    assert!(outcome.results.iter().all(|r| r.reward() == Some(1.0)));
    let job = job_dir(dir.path());
    let mut trial_dirs = 0;
    for entry in std::fs::read_dir(&job).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_dir() {
            continue;
        }
        trial_dirs += 1;
        let text = std::fs::read_to_string(path.join("result.json"))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let record: TrialResult = serde_json::from_str(&text).unwrap();
        assert_eq!(record.reward(), Some(1.0), "{}", path.display());
    }
    assert_eq!(trial_dirs, TRIALS);
    let text = std::fs::read_to_string(job.join("result.json")).unwrap();
    let result: JobResult = serde_json::from_str(&text).unwrap();
    assert_eq!(result.stats.n_completed_trials, TRIALS);
    assert_eq!(result.stats.n_running_trials, 0);
    assert!(result.finished_at.is_some());
}
