//! `summary` and `compare` over runner's and Harbor's job dirs: the figures against hand
//! computation, and snapshots of the text and JSON renderings.

mod support;

use std::path::Path;

use support::*;
use testkit::files::copy_dir;
use viewer::{ViewerError, compare_loaded, comparison_text, load_job, summary, summary_text};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn the_runner_fixture_has_runners_record_shapes() {
    let job = Path::new(RUNNER_JOB);
    let read =
        |p: &Path| serde_json::from_slice::<serde_json::Value>(&std::fs::read(p).unwrap()).unwrap();
    serde_json::from_value::<tasks::records::JobConfig>(read(&job.join("config.json"))).unwrap();
    serde_json::from_value::<tasks::records::JobResult>(read(&job.join("result.json"))).unwrap();
    let mut results = 0;
    for entry in std::fs::read_dir(job).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        serde_json::from_value::<tasks::records::TrialConfig>(read(&dir.join("config.json")))
            .unwrap();
        if dir.join("result.json").is_file() {
            let result: tasks::records::TrialResult =
                serde_json::from_value(read(&dir.join("result.json"))).unwrap();
            assert_eq!(
                result.trial_name,
                dir.file_name().unwrap().to_str().unwrap()
            );
            results += 1;
        }
        let trajectory = dir.join("agent/trajectory.json");
        // The adversary's trajectory is hostile on purpose, invalid ATIF included.
        if trajectory.is_file() && !dir.ends_with("adversary__Ij78Kl9") {
            let errors = tasks::atif::validate_bytes(
                &std::fs::read(&trajectory).unwrap(),
                &dir.join("agent"),
            );
            assert!(errors.is_empty(), "{}: {errors:?}", trajectory.display());
        }
    }
    assert_eq!(results, 5);
}

#[test]
fn runner_job_summary_by_hand() {
    let s = summary(Path::new(RUNNER_JOB)).unwrap();
    assert_eq!(
        (
            s.n_trials,
            s.n_finished,
            s.n_unfinished,
            s.n_errored,
            s.n_tasks
        ),
        (6, 5, 1, 1, 3)
    );
    assert_eq!(s.title.dataset.as_deref(), Some("demo"));
    assert_eq!(s.title.agent.as_deref(), Some("oracle"));
    assert_eq!(s.title.model, None);
    // Main rewards 1, 0 (hello), 0 (adversary), none (slow, errored) and 1 (slow): 2 of 5.
    assert!(close(s.main.mean.value, 0.4));
    let keys: Vec<&str> = s.rewards.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["reward", "correctness", "format"]);
    // correctness: 1 and 1 in hello, missing (0) elsewhere → 2/5; format: 1/5.
    assert!(close(s.rewards[1].stats.mean.value, 0.4));
    assert!(close(s.rewards[2].stats.mean.value, 0.2));
    // The adversary task has one trial, so no k ≥ 2 is defined.
    assert!(s.main.pass_at_k.is_empty());
    let hello = &s.tasks.iter().find(|t| t.task == "hello").unwrap();
    assert_eq!((hello.trials, hello.errors), (2, 0));
    assert!(close(hello.rewards["format"], 0.5));
    assert_eq!(s.errors_by_type["AgentTimeoutError"], 1);
    // Three tasks: intervals exist, and the cluster-robust standard error is by hand
    // Task sums 1 (2 trials), 0 (1), 1 (2): N = 5, ȳ = 0.4, residuals 0.2, −0.4, 0.2;
    // se² = 3/2 · 0.24 / 25.
    let se = s.main.mean.stderr_clustered.unwrap();
    assert!(close(se, (1.5f64 * 0.24 / 25.0).sqrt()), "{se}");
    assert!(s.main.mean.ci.is_some());
}

#[test]
fn harbor_job_summaries_by_hand() {
    let s = summary(Path::new(HARBOR_H13_JOB)).unwrap();
    assert_eq!(
        s.title.text(),
        "terminal-bench/terminal-bench-2-1 · terminus-2 · anthropic/claude-opus-4-6"
    );
    assert!(close(s.main.mean.value, 0.6));
    // n = 5, c = 3: pass@2 = 1 − (2/5)(1/4) = 0.9.
    assert_eq!(s.main.pass_at_k[0].k, 2);
    assert!(close(s.main.pass_at_k[0].value, 0.9));
    assert_eq!(s.main.mean.ci, None, "one task: no interval");
    let task = &s.tasks[0];
    let ci = task.mean_ci.unwrap();
    assert!(
        (ci.low - 0.2307).abs() < 1e-4 && (ci.high - 0.8824).abs() < 1e-4,
        "{ci:?}"
    );
    assert_eq!(s.usage.input_tokens, Some(13_000));

    // Harbor 0.1.44: `task_name` without org, no phase timings, older job result stats.
    let s = summary(Path::new(HARBOR_H144_JOB)).unwrap();
    assert_eq!(s.tasks[0].task, "regex-log");
    assert_eq!(s.title.dataset.as_deref(), Some("terminal-bench"));
    assert!(close(s.main.mean.value, 0.4));
    assert_eq!(s.errors_by_type["RewardFileNotFoundError"], 1);
}

#[test]
fn summary_text_snapshots() {
    insta::assert_snapshot!(
        "runner_job",
        summary_text(&summary(Path::new(RUNNER_JOB)).unwrap())
    );
    insta::assert_snapshot!(
        "harbor_h13_job",
        summary_text(&summary(Path::new(HARBOR_H13_JOB)).unwrap())
    );
}

#[test]
fn summary_json_snapshot() {
    let s = summary(Path::new(RUNNER_JOB)).unwrap();
    insta::assert_json_snapshot!("runner_job_json", s);
}

#[test]
fn compare_pairs_tasks_and_finds_flips() {
    let a = load_job(Path::new(RUNNER_JOB)).unwrap();
    let mut b = a.clone();
    // B: the errored slow trial succeeds, the adversary is solved, hello's first trial fails.
    for trial in &mut b.trials {
        match trial.name.as_str() {
            "slow__Mn01Op2" => {
                trial.exception = None;
                trial.rewards = vec![("reward".into(), 1.0)];
            }
            "adversary__Ij78Kl9" => trial.rewards = vec![("reward".into(), 1.0)],
            "hello__Ab12Cd3" => trial.rewards = vec![("reward".into(), 0.0)],
            _ => {}
        }
    }
    b.name = "candidate".into();
    let c = compare_loaded(&a, &b, &stats::Resampling::default());
    let s = &c.stats;
    assert_eq!(s.paired_tasks, 3);
    // Per task A (0.5, 0, 0.5), B (0, 1, 1): d = (−0.5, 1, 0.5), mean 1/3.
    assert!(close(s.difference, 1.0 / 3.0));
    assert_eq!((s.b_better, s.a_better, s.ties), (2, 1, 0));
    assert_eq!(s.solved_only_by_b, ["adversary"]);
    // hello: A solved it once (1, 0), B never (0, 0).
    assert_eq!(s.solved_only_by_a, ["hello"]);
    // Three differences (1, −0.5, 0.5), exact: the 8 sign patterns give |Σ| = 1, 0, 2, 1,
    // 1, 2, 0, 1, so 6 reach the observed 1: p = 6/8.
    let test = s.test.unwrap();
    assert!(test.exact);
    assert!(close(test.p_value, 0.75));
    insta::assert_snapshot!("comparison", comparison_text(&c));
}

#[test]
fn compare_pairs_org_prefixed_and_bare_task_names() {
    let a = load_job(Path::new(HARBOR_H13_JOB)).unwrap();
    let b = load_job(Path::new(HARBOR_H144_JOB)).unwrap();
    let c = compare_loaded(&a, &b, &stats::Resampling::default());
    assert_eq!(c.stats.paired_tasks, 1, "{:?}", c.stats.only_in_b);
    assert_eq!(c.stats.tasks[0].task, "terminal-bench/regex-log");
    assert!(close(c.stats.difference, -0.2));
}

#[test]
fn not_a_job_dir_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = summary(dir.path()).unwrap_err();
    assert!(matches!(err, ViewerError::NotAJob { .. }));
    assert!(err.to_string().contains("not a job dir"), "{err}");
    let err = summary(&dir.path().join("missing")).unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
    // The jobs dir (parent of job dirs) is not a job either.
    let jobs = dir.path().join("jobs");
    copy_dir(Path::new(RUNNER_JOB), &jobs.join("one"));
    let err = summary(&jobs).unwrap_err();
    assert!(matches!(err, ViewerError::JobsDir { .. }), "{err}");
    assert!(err.to_string().contains("pass a job dir such as"), "{err}");
}
