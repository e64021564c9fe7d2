//! One measured `runner run --agent oracle` of a dataset of hostile tasks, read back by task:
//! the containment, blame and toolchain modules each run their dataset once this way and check
//! one promise per test against the job.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{Job, ensure_base_image, measured, workspace_root};

/// The job of one oracle run of a dataset, with its results by task name.
pub struct OracleRun {
    _jobs: tempfile::TempDir,
    /// The job directory.
    pub job: Job,
    /// The runner's exit code.
    pub code: Option<i32>,
    /// The runner's peak resident memory.
    pub peak_rss_mib: f64,
    /// What the runner printed on stderr.
    pub stderr: String,
    /// result.json by task name (`<prefix>/<name>`).
    pub results: BTreeMap<String, serde_json::Value>,
    /// Trial directory by task name.
    pub dirs: BTreeMap<String, PathBuf>,
    /// The prefix of the dataset's task names.
    prefix: String,
}

impl OracleRun {
    /// Runs `tasks/<dataset>`, whose task names start `<prefix>/`, under `--agent oracle` as
    /// job `job_name`, with `flags` added.
    pub fn of(dataset: &str, prefix: &str, job_name: &str, flags: &[String]) -> OracleRun {
        let path = workspace_root().join("tasks").join(dataset);
        OracleRun::at(&path, prefix, job_name, flags)
    }

    /// Runs the dataset (or task) at `path` as [`OracleRun::of`] does.
    pub fn at(path: &Path, prefix: &str, job_name: &str, flags: &[String]) -> OracleRun {
        ensure_base_image();
        let jobs = tempfile::tempdir().unwrap();
        let mut args: Vec<OsString> = ["run", "--agent", "oracle", "--job-name", job_name]
            .iter()
            .map(OsString::from)
            .collect();
        args.push("--path".into());
        args.push(path.into());
        args.push("--jobs-dir".into());
        args.push(jobs.path().into());
        args.extend(flags.iter().map(OsString::from));
        let run = measured(&args, Duration::from_secs(900));
        let job = Job::single_in(jobs.path());
        let mut results = BTreeMap::new();
        let mut dirs = BTreeMap::new();
        for (trial, result) in job.trial_results() {
            let task = result["task_name"].as_str().unwrap().to_owned();
            dirs.insert(task.clone(), job.dir.join(&trial));
            results.insert(task, result);
        }
        OracleRun {
            _jobs: jobs,
            job,
            code: run.code,
            peak_rss_mib: run.peak_rss_mib,
            stderr: run.stderr,
            results,
            dirs,
            prefix: prefix.to_owned(),
        }
    }

    /// The result of the task `<prefix>/<task>`; a missing one fails with what the run said.
    pub fn result(&self, task: &str) -> &serde_json::Value {
        let name = format!("{}/{task}", self.prefix);
        self.results.get(&name).unwrap_or_else(|| {
            panic!(
                "no result for {name}; the run said:\n{}\nresults: {:?}",
                self.stderr,
                self.results.keys().collect::<Vec<_>>()
            )
        })
    }

    /// The trial directory of `<prefix>/<task>`.
    pub fn dir(&self, task: &str) -> &Path {
        &self.dirs[&format!("{}/{task}", self.prefix)]
    }
}

/// `flag value` pairs as the arguments they are.
pub fn flags(pairs: &[(&str, String)]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|(flag, value)| [flag.to_string(), value.clone()])
        .collect()
}
