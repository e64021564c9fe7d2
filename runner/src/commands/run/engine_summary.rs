//! The end-of-job lines of a pool run: for each engine, the trials whose final attempt ran
//! there, and the attempts lost there (infrastructure errors, retried on the others).

use std::collections::BTreeMap;
use std::path::Path;

use tasks::TrialOutcome;
use tasks::records::TrialResult;

/// Per engine: (final attempts, of those with an exception, earlier attempts lost there).
type Tally = BTreeMap<String, (usize, usize, usize)>;

/// A trial's result through the records' one reader; one that cannot be read is left out of
/// the tally (the summary above already counts it).
fn read(path: &Path) -> Option<TrialResult> {
    tasks::records::read::read_typed(path).ok().flatten()
}

/// One line per engine, or nothing when no trial of `job_dir` names one (a single-engine
/// run).
pub fn engine_lines(job_dir: &Path) -> Vec<String> {
    let mut tally = Tally::new();
    for trial in std::fs::read_dir(job_dir).into_iter().flatten().flatten() {
        let Some(result) = read(&trial.path().join("result.json")) else {
            continue;
        };
        if let Some(engine) = &result.engine {
            let entry = tally.entry(engine.clone()).or_default();
            entry.0 += 1;
            entry.1 += usize::from(result.exception_info.is_some());
        }
        let attempts = trial.path().join(engine::job::ATTEMPTS_DIR);
        for attempt in std::fs::read_dir(attempts).into_iter().flatten().flatten() {
            if let Some(earlier) = read(&attempt.path().join("result.json"))
                && let Some(engine) = earlier.engine
                && earlier.outcome == Some(TrialOutcome::InfraError)
            {
                tally.entry(engine).or_default().2 += 1;
            }
        }
    }
    tally
        .into_iter()
        .map(|(engine, (trials, errors, lost))| {
            format!("engine {engine}: {trials} trial(s), {errors} with an exception, {lost} attempt(s) lost and retried elsewhere")
        })
        .collect()
}
