//! Submission validation over the fixtures in `leaderboard/tests/fixtures`: Harbor-shaped jobs
//! that pass, and for every rule a variant of the valid job that only that rule catches.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use testkit::files::copy_dir;

use super::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

const H13_JOB: &str = "harbor-h13/2026-06-10__12-00-00";
const H144_JOB: &str = "harbor-h144/tbench-2.0-k5-v01";
const TRIALS: [&str; 5] = [
    "regex-log__aB3dE9x",
    "regex-log__Zx81kPq",
    "regex-log__Qw12ErT",
    "regex-log__mN45bVc",
    "regex-log__Hj67kLp",
];

/// A scratch copy of the valid [H13] job, the dataset and the metadata.
struct Scratch {
    _dir: tempfile::TempDir,
    job: PathBuf,
    dataset: PathBuf,
    metadata: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("job");
        copy_dir(&fixtures().join(H13_JOB), &job);
        let dataset = dir.path().join("dataset");
        copy_dir(&fixtures().join("dataset"), &dataset);
        let metadata = dir.path().join("metadata.yaml");
        std::fs::copy(fixtures().join("metadata.yaml"), &metadata).unwrap();
        isolate(&job);
        Scratch {
            _dir: dir,
            job,
            dataset,
            metadata,
        }
    }

    fn edit_json(&self, rel: &str, edit: impl FnOnce(&mut Value)) {
        let path = self.job.join(rel);
        let mut value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        edit(&mut value);
        std::fs::write(&path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    }

    fn validate(&self) -> Report {
        validate(&self.options()).unwrap()
    }

    fn options(&self) -> Options {
        Options {
            dataset: Some(self.dataset.clone()),
            metadata: Some(self.metadata.clone()),
            ..Options::new(vec![self.job.clone()])
        }
    }
}

/// Records in every trial of `job` that its tests ran isolated, as runner records it (Harbor's
/// records do not say, and `verifier_isolated` requires it).
fn isolate(job: &Path) {
    for trial in TRIALS {
        let path = job.join(trial).join("result.json");
        let mut value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        value["verifier_isolation"] = json!({"isolated": true, "detail": "verifier jail"});
        std::fs::write(&path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    }
}

/// Asserts that exactly `rule` failed, and returns its violations. A failed leaderboard rule
/// makes the report invalid; a failed evidence rule only the evidence verdict.
fn only_failure(report: &Report, rule: Rule) -> Vec<Violation> {
    assert_eq!(
        report.failed_rules(),
        [rule.name()],
        "{}",
        render::text(report)
    );
    match rule.verdict() {
        Verdict::Leaderboard => assert!(!report.valid),
        Verdict::Evidence => {
            assert!(report.valid && !report.verdicts.evidence.valid);
            let mut options_required = report.clone();
            options_required.require_evidence = true;
            assert!(!options_required.deciding_failures().is_empty());
        }
    }
    // An evidence rule's notes on trials that do not say are not its failures.
    report
        .outcome(rule)
        .violations
        .iter()
        .filter(|v| !v.not_recorded)
        .cloned()
        .collect()
}

/// Asserts that `violation`'s message says `text`, showing the message otherwise.
fn assert_says(violation: &Violation, text: &str) {
    assert!(violation.message.contains(text), "{}", violation.message);
}

/// Asserts that some violation's message says `text`, showing them all otherwise.
fn assert_any_says(violations: &[Violation], text: &str) {
    assert!(
        violations.iter().any(|v| v.message.contains(text)),
        "{violations:?}"
    );
}

/// Asserts that there are as many violations as `texts` and that each text is said by one.
fn assert_all_said(violations: &[Violation], texts: &[&str]) {
    assert_eq!(violations.len(), texts.len(), "{violations:?}");
    for text in texts {
        assert_any_says(violations, text);
    }
}

#[test]
fn the_fixture_digest_is_the_dataset_content_digest() {
    let dataset = tasks::Dataset::load(&fixtures().join("dataset")).unwrap();
    let config: Value = serde_json::from_slice(
        &std::fs::read(fixtures().join(H13_JOB).join(TRIALS[0]).join("config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(config["task"]["ref"], json!(dataset.tasks[0].digest));
}

#[test]
fn harbor_h13_job_passes_every_rule() {
    let report = Scratch::new().validate();
    assert!(report.valid, "{}", render::text(&report));
    // Harbor keeps no record manifest: not recorded, so not signed.
    let not_recorded = [Rule::RecordsUnchanged.name(), Rule::TrustedSignature.name()];
    assert!(
        report
            .rules
            .iter()
            .filter(|r| r.verdict == Verdict::Leaderboard)
            .all(|r| r.status == Status::Passed
                || (r.status == Status::Skipped && not_recorded.contains(&r.rule)))
    );
}

/// The evidence rules a Harbor-written job cannot answer.
const HARBOR_NOT_RECORDED: [&str; 5] = [
    "verifier_isolated",
    "verifier_toolchain",
    "declared_models_only",
    "same_task_image",
    "bridge_metering",
];

#[test]
fn harbor_h13_job_figures() {
    let f = Scratch::new().validate().figures;
    assert_eq!(
        (f.n_trials, f.n_tasks, f.n_successes, f.n_errored),
        (5, 1, 3, 1)
    );
    assert!((f.accuracy - 0.6).abs() < 1e-12);
    // One task, p = 0.6, k = 5: stderr² = 0.24 / 4.
    assert!((f.accuracy_stderr.unwrap() - 0.06f64.sqrt()).abs() < 1e-12);
    // n = 5, c = 3: pass@2 = 1 - (2/5)(1/4) = 0.9; pass@4 = pass@5 = 1.
    assert_eq!(f.pass_at_k.keys().collect::<Vec<_>>(), ["2", "4", "5"]);
    assert!((f.pass_at_k["2"] - 0.9).abs() < 1e-12);
    assert_eq!(f.pass_at_k["5"], 1.0);
    assert_eq!(f.trials_per_task["terminal-bench/regex-log"], 5);
    assert_eq!(f.errored_by_exception_type["AgentTimeoutError"], 1);
}

#[test]
fn a_pure_harbor_job_is_valid_with_its_evidence_not_recorded_and_invalid_when_it_is_required() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join(H13_JOB), dir.path());
    let mut options = Options::new(vec![dir.path().to_path_buf()]);
    let report = validate(&options).unwrap();
    assert!(report.valid, "{}", render::text(&report));
    assert!(report.failed_rules().is_empty());
    let evidence = &report.verdicts.evidence;
    assert_eq!(evidence.not_recorded, HARBOR_NOT_RECORDED);
    assert!(!evidence.valid && !evidence.decides);
    let notes = &report.outcome(Rule::VerifierIsolated).violations;
    assert_eq!(notes.len(), 1, "one note per job: {notes:?}");
    assert_says(&notes[0], "not recorded: 5 trials");
    let text = render::text(&report);
    assert!(
        text.contains("Evidence: NOT RECORDED (verifier_isolated"),
        "{text}"
    );
    assert!(text.ends_with("Result: VALID\n"), "{text}");

    options.require_evidence = true;
    let report = validate(&options).unwrap();
    assert!(!report.valid);
    assert!(report.verdicts.leaderboard.valid && report.verdicts.evidence.decides);
    assert_eq!(report.deciding_failures(), HARBOR_NOT_RECORDED);
    let text = render::text(&report);
    assert!(
        text.contains("Result: INVALID (5 rule(s) failed: verifier_isolated"),
        "{text}"
    );
}

#[test]
fn harbor_h144_job_without_a_dataset_fails_only_for_its_missing_lock_and_isolation() {
    let report = validate(&Options::new(vec![fixtures().join(H144_JOB)])).unwrap();
    assert_eq!(
        report.failed_rules(),
        ["planned_trials"],
        "{}",
        render::text(&report)
    );
    assert_eq!(report.verdicts.evidence.not_recorded, HARBOR_NOT_RECORDED);
    assert_says(
        &report.outcome(Rule::PlannedTrials).violations[0],
        "no readable lock.json",
    );
    assert_eq!(
        report.outcome(Rule::CorrectTaskVersions).status,
        Status::Skipped
    );
    assert_eq!(
        report.outcome(Rule::MetadataFormattedCorrectly).status,
        Status::Skipped
    );
    assert_eq!(
        report.figures.errored_by_exception_type["RewardFileNotFoundError"],
        1
    );
}

#[test]
fn harbor_h144_job_has_no_task_refs_to_check_against_a_dataset() {
    let mut options = Options::new(vec![fixtures().join(H144_JOB)]);
    options.dataset = Some(fixtures().join("dataset"));
    let report = validate(&options).unwrap();
    let violations = report.outcome(Rule::CorrectTaskVersions).violations.clone();
    assert_eq!(violations.len(), 5);
    assert_says(&violations[0], "no task ref");
}

#[test]
fn several_dirs_of_one_job_count_together() {
    let s = Scratch::new();
    let second = s.job.parent().unwrap().join("job2");
    copy_dir(&s.job, &second);
    std::fs::remove_dir_all(s.job.join(TRIALS[2])).unwrap();
    let mut options = Options::new(vec![s.job.clone()]);
    let report = validate(&options).unwrap();
    assert_eq!(
        report.failed_rules(),
        ["planned_trials", "min_trials_per_task"]
    );
    assert_says(
        &report.outcome(Rule::PlannedTrials).violations[0],
        "planned 5 trial(s), the submission holds 4",
    );
    // The job's other part, holding the missing trial, makes five again.
    for (i, trial) in TRIALS.iter().enumerate() {
        if i != 2 {
            std::fs::remove_dir_all(second.join(trial)).unwrap();
        }
    }
    options.job_dirs.push(second);
    let report = validate(&options).unwrap();
    assert!(report.valid, "{}", render::text(&report));
    assert_eq!(report.figures.n_jobs, 2);
}

#[test]
fn rule_no_job_overrides() {
    let s = Scratch::new();
    s.edit_json("config.json", |c| {
        c["timeout_multiplier"] = json!(2.0);
        c["agents"][0]["override_timeout_sec"] = json!(3600);
        c["environment"]["override_cpus"] = json!(8);
    });
    let v = only_failure(&s.validate(), Rule::NoJobOverrides);
    assert_eq!(v.len(), 3);
    assert!(
        v.iter()
            .any(|v| v.message.starts_with("timeout_multiplier is 2.0"))
    );
    assert!(
        v.iter()
            .all(|v| v.file.as_deref().unwrap().ends_with("job/config.json"))
    );
}

#[test]
fn rule_no_job_overrides_rejects_a_per_phase_multiplier_of_one() {
    let s = Scratch::new();
    s.edit_json("config.json", |c| {
        c["agent_timeout_multiplier"] = json!(1.0)
    });
    let v = only_failure(&s.validate(), Rule::NoJobOverrides);
    assert_says(&v[0], "agent_timeout_multiplier is 1.0; it must be null");
}

#[test]
fn rule_no_trial_overrides() {
    let s = Scratch::new();
    s.edit_json(&format!("{}/config.json", TRIALS[0]), |c| {
        c["verifier"]["max_timeout_sec"] = json!(60)
    });
    s.edit_json(&format!("{}/result.json", TRIALS[1]), |r| {
        r["config"]["agent"]["override_setup_timeout_sec"] = json!(9)
    });
    let v = only_failure(&s.validate(), Rule::NoTrialOverrides);
    assert_eq!(v.len(), 2);
    assert!(
        v[0].file
            .as_deref()
            .unwrap()
            .ends_with(&format!("{}/result.json", TRIALS[1]))
    );
    assert_says(&v[0], "config.agent.override_setup_timeout_sec is 9");
    assert_says(&v[1], "verifier.max_timeout_sec is 60");
}

#[test]
fn rule_trial_results_complete() {
    let s = Scratch::new();
    s.edit_json(&format!("{}/result.json", TRIALS[2]), |r| {
        r["finished_at"] = Value::Null
    });
    s.edit_json(&format!("{}/result.json", TRIALS[4]), |r| {
        r["verifier_result"] = Value::Null
    });
    s.edit_json(&format!("{}/result.json", TRIALS[4]), |r| {
        r["exception_info"] = Value::Null
    });
    let v = only_failure(&s.validate(), Rule::TrialResultsComplete);
    assert_all_said(&v, &["finished_at", "neither rewards"]);
}

#[test]
fn rule_trial_results_complete_without_result_json() {
    let s = Scratch::new();
    std::fs::remove_file(s.job.join(TRIALS[2]).join("result.json")).unwrap();
    let v = only_failure(&s.validate(), Rule::TrialResultsComplete);
    assert_says(&v[0], "no result.json");
}

#[test]
fn rule_agent_config_match_explains_a_null_agent_name() {
    let s = Scratch::new();
    s.edit_json("config.json", |c| {
        c["agents"][0]["name"] = Value::Null;
        c["agents"][0]["import_path"] = json!("my_agent:Agent");
    });
    let v = only_failure(&s.validate(), Rule::AgentConfigMatch);
    assert_eq!(v.len(), 1, "one violation per job and agent");
    assert_says(&v[0], "5 trials");
    assert_says(&v[0], "named agent config");
}

#[test]
fn rule_agent_config_match_compares_the_model() {
    let s = Scratch::new();
    s.edit_json("config.json", |c| {
        c["agents"][0]["model_name"] = json!("anthropic/claude-sonnet-4-5")
    });
    let v = only_failure(&s.validate(), Rule::AgentConfigMatch);
    assert_says(&v[0], "anthropic/claude-opus-4-6");
}

#[test]
fn rule_min_trials_per_task() {
    let s = Scratch::new();
    std::fs::remove_dir_all(s.job.join(TRIALS[2])).unwrap();
    // A job of k = 4: its lock planned four.
    s.edit_json("lock.json", |l| {
        l["trials"].as_array_mut().unwrap().pop();
    });
    let v = only_failure(&s.validate(), Rule::MinTrialsPerTask);
    assert_says(
        &v[0],
        "task terminal-bench/regex-log has 4 trial(s); at least 5",
    );
}

#[test]
fn rule_min_trials_per_task_covers_every_dataset_task() {
    let s = Scratch::new();
    copy_dir(&s.dataset.join("regex-log"), &s.dataset.join("fix-git"));
    std::fs::write(
        s.dataset.join("fix-git/task.toml"),
        "[task]\nname = \"terminal-bench/fix-git\"\n",
    )
    .unwrap();
    let v = only_failure(&s.validate(), Rule::MinTrialsPerTask);
    assert_says(&v[0], "fix-git has 0 trial(s)");
}

#[test]
fn rule_correct_task_versions() {
    let s = Scratch::new();
    let other = format!("sha256:{}", "ab".repeat(32));
    s.edit_json(&format!("{}/config.json", TRIALS[3]), |c| {
        c["task"]["ref"] = json!(other)
    });
    let v = only_failure(&s.validate(), Rule::CorrectTaskVersions);
    assert_eq!(v.len(), 1);
    assert_says(&v[0], "content differs");
}

#[test]
fn rule_correct_task_versions_catches_changed_task_content() {
    let s = Scratch::new();
    std::fs::write(
        s.dataset.join("regex-log/instruction.md"),
        "Something else.\n",
    )
    .unwrap();
    let v = only_failure(&s.validate(), Rule::CorrectTaskVersions);
    assert_eq!(v.len(), 5);
}

/// Gives the lock's trials runner's `trial_name` and `task.image`, the image id of trial i
/// being `ids[i]`.
fn lock_images(s: &Scratch, ids: [&str; 5]) {
    s.edit_json("lock.json", |l| {
        for (i, trial) in l["trials"].as_array_mut().unwrap().iter_mut().enumerate() {
            trial["trial_name"] = json!(TRIALS[i]);
            trial["task"]["image"] = json!({
                "reference": "127.0.0.1:5000/regex-log:1", "id": ids[i],
                "repo_digests": [], "origin": "pulled"
            });
        }
    });
}

#[test]
fn rule_same_task_image() {
    let s = Scratch::new();
    lock_images(&s, ["sha256:1"; 5]);
    assert!(s.validate().valid, "one image for every trial passes");
    lock_images(
        &s,
        ["sha256:1", "sha256:1", "sha256:2", "sha256:1", "sha256:1"],
    );
    let v = only_failure(&s.validate(), Rule::SameTaskImage);
    assert_eq!(v.len(), 1);
    assert!(
        v[0].message.contains("ran on 2 different images")
            && v[0]
                .message
                .contains("sha256:2 (127.0.0.1:5000/regex-log:1, pulled; trials: 1 in"),
        "{}",
        v[0].message
    );
}

#[test]
fn rule_passing_trial_trajectories() {
    let s = Scratch::new();
    std::fs::remove_file(s.job.join(TRIALS[0]).join("agent/trajectory.json")).unwrap();
    s.edit_json(&format!("{}/agent/trajectory.json", TRIALS[1]), |t| {
        t["steps"][2]["step_id"] = json!(7)
    });
    let v = only_failure(&s.validate(), Rule::PassingTrialTrajectories);
    assert_all_said(&v, &["no agent/trajectory.json", "$.steps[2].step_id"]);
}

#[test]
fn rule_no_container_secrets() {
    let s = Scratch::new();
    s.edit_json("config.json", |c| {
        c["allow_container_secrets"] = json!(true)
    });
    s.edit_json("lock.json", |l| l["allow_container_secrets"] = json!(true));
    let v = only_failure(&s.validate(), Rule::NoContainerSecrets);
    assert_eq!(v.len(), 2);
}

#[test]
fn rule_no_provider_keys_reports_file_and_line_but_never_the_value() {
    let s = Scratch::new();
    let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345";
    std::fs::write(
        s.job.join(TRIALS[3]).join("agent/notes.txt"),
        format!("one\ntwo\nexport KEY={key}\n"),
    )
    .unwrap();
    std::fs::write(s.job.join("job.log"), format!("{key}\n")).unwrap();
    let report = s.validate();
    let v = only_failure(&report, Rule::NoProviderKeys);
    assert_eq!(v.len(), 2);
    assert!(v[0].file.as_deref().unwrap().ends_with("job/job.log"));
    assert_eq!(v[1].line, Some(3));
    assert!(v[1].file.as_deref().unwrap().ends_with("agent/notes.txt"));
    let everything = format!(
        "{}{}{}{}",
        serde_json::to_string(&report).unwrap(),
        render::text(&report),
        render::annotations(&report),
        render::markdown(&report)
    );
    assert!(
        !everything.contains("abcdefghijklmnop"),
        "a key fragment leaked"
    );
}

#[test]
fn rule_metadata_formatted_correctly() {
    let s = Scratch::new();
    let text = std::fs::read_to_string(&s.metadata).unwrap();
    std::fs::write(
        &s.metadata,
        text.replace("    model_display_name: Claude Opus 4.6\n", "")
            .replace("agent_url:", "#"),
    )
    .unwrap();
    let v = only_failure(&s.validate(), Rule::MetadataFormattedCorrectly);
    let messages: Vec<&str> = v.iter().map(|v| v.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "`agent_url` is missing or empty",
            "`models[0].model_display_name` is missing or empty"
        ]
    );
}

#[test]
fn bad_input_is_an_error_not_a_report() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        validate(&Options::new(vec![])),
        Err(SubmissionError::NoJobs)
    ));
    let err = validate(&Options::new(vec![dir.path().join("missing")])).unwrap_err();
    assert!(matches!(err, SubmissionError::NotADirectory { .. }));
    let err = validate(&Options::new(vec![dir.path().to_owned()])).unwrap_err();
    assert!(err.to_string().contains("no config.json"), "{err}");
    std::fs::write(dir.path().join("config.json"), "{").unwrap();
    assert!(matches!(
        validate(&Options::new(vec![dir.path().to_owned()])),
        Err(SubmissionError::BadJobConfig { .. })
    ));
}

#[test]
fn github_annotations_escape_and_name_the_rule() {
    let s = Scratch::new();
    s.edit_json("config.json", |c| c["timeout_multiplier"] = json!(2.0));
    let out = render::annotations(&s.validate());
    let line = out.lines().next().unwrap();
    assert!(line.starts_with("::error file="), "{line}");
    assert!(
        line.contains("config.json,title=no_job_overrides::timeout_multiplier is 2.0"),
        "{line}"
    );
    assert_eq!(render::escape_property("a,b:c%\n"), "a%2Cb%3Ac%25%0A");
}

/// Replaces `rel` in the job with a sparse file of `len` zero bytes (cheap to make, and read
/// whole it would cost `len` bytes of memory).
fn sparse(s: &Scratch, rel: &str, len: u64) {
    let file = std::fs::File::create(s.job.join(rel)).unwrap();
    file.set_len(len).unwrap();
}

#[test]
fn an_oversized_result_json_is_a_rule_failure_naming_file_and_cap() {
    let s = Scratch::new();
    sparse(&s, &format!("{}/result.json", TRIALS[1]), 1 << 30);
    let v = only_failure(&s.validate(), Rule::TrialResultsComplete);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].file.as_deref().unwrap().ends_with("result.json")
            && v[0].message.contains("16 MiB limit"),
        "{v:?}"
    );
}

#[test]
fn an_oversized_trajectory_or_config_is_refused_not_read() {
    let s = Scratch::new();
    sparse(
        &s,
        &format!("{}/agent/trajectory.json", TRIALS[0]),
        tasks::bounded::MAX_TRAJECTORY_BYTES + 1,
    );
    let v = only_failure(&s.validate(), Rule::PassingTrialTrajectories);
    assert!(v[0].message.contains("256 MiB limit"), "{v:?}");

    let s = Scratch::new();
    sparse(&s, &format!("{}/config.json", TRIALS[3]), 1 << 30);
    let report = s.validate();
    let v = report.outcome(Rule::NoTrialOverrides).violations.clone();
    assert!(
        v.iter().any(|v| v.message.contains("16 MiB limit")),
        "{}",
        render::text(&report)
    );
}

#[test]
fn a_large_log_is_scanned_for_keys_without_being_held_whole() {
    let s = Scratch::new();
    let path = s.job.join(TRIALS[0]).join("agent/huge.log");
    let mut data = vec![b'.'; 20 << 20];
    let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345";
    let at = 18 << 20;
    data[at] = b'\n';
    data[at + 1..at + 1 + key.len()].copy_from_slice(key.as_bytes());
    std::fs::write(&path, &data).unwrap();
    let v = only_failure(&s.validate(), Rule::NoProviderKeys);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].line, Some(2));
}

#[test]
fn an_oversized_job_config_is_bad_input() {
    let s = Scratch::new();
    sparse(&s, "config.json", 1 << 30);
    let err = validate(&Options::new(vec![s.job.clone()])).unwrap_err();
    testkit::assert_says_all(&err.to_string(), &["config.json", "16 MiB limit"]);
}

#[test]
fn a_job_dir_without_trials_is_not_a_submission() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), b"{\"agents\": []}").unwrap();
    let report = validate(&Options::new(vec![dir.path().to_path_buf()])).unwrap();
    let v = report
        .outcome(Rule::TrialResultsComplete)
        .violations
        .clone();
    assert!(v[0].message.contains("has no trials"), "{v:?}");
}

#[test]
fn a_dataset_with_tasks_runner_cannot_run_still_counts_them() {
    let s = Scratch::new();
    let gpu = s.dataset.join("needs-gpu");
    copy_dir(&s.dataset.join("regex-log"), &gpu);
    let toml = std::fs::read_to_string(gpu.join("task.toml")).unwrap();
    let toml = toml.replace("terminal-bench/regex-log", "terminal-bench/needs-gpu")
        + "\n[environment.tpu]\ntype = \"v6e\"\ntopology = \"2x4\"\n";
    std::fs::write(gpu.join("task.toml"), toml).unwrap();
    // The GPU task is part of the dataset for coverage even though `runner run` refuses it.
    let v = only_failure(&s.validate(), Rule::MinTrialsPerTask);
    assert_any_says(&v, "needs-gpu");
}

/// Gives trial `i` bridge metering that says it called `models`.
fn metered(scratch: &Scratch, i: usize, models: &[&str]) {
    scratch.edit_json(&format!("{}/result.json", TRIALS[i]), |r| {
        r["agent_result"]["metadata"] = json!({"llm_bridge": {"models_called": models}});
    });
}

#[test]
fn the_models_each_job_called_are_reported() {
    let scratch = Scratch::new();
    for i in 0..TRIALS.len() {
        metered(&scratch, i, &["anthropic/claude-opus-4-6"]);
    }
    let report = scratch.validate();
    assert!(report.valid, "{}", render::text(&report));
    let models = &report.figures.models_called;
    assert_eq!(models.len(), 1);
    assert_eq!(models[0].called, ["anthropic/claude-opus-4-6"]);
    assert_eq!(models[0].n_metered_trials, 5);
    let text = render::text(&report).replace(&scratch.job.display().to_string(), "<job>");
    insta::assert_snapshot!(text);
}

#[test]
fn a_trial_that_called_an_undeclared_model_is_flagged() {
    let scratch = Scratch::new();
    metered(&scratch, 0, &["anthropic/claude-opus-4-6"]);
    metered(
        &scratch,
        1,
        &["anthropic/claude-opus-4-6", "openai/gpt-4.1-mini"],
    );
    let report = scratch.validate();
    let violations = only_failure(&report, Rule::DeclaredModelsOnly);
    assert_all_said(
        &violations,
        &["trial regex-log__Zx81kPq called model `openai/gpt-4.1-mini`"],
    );
    assert_says(&violations[0], "anthropic/claude-opus-4-6");
    assert_eq!(
        report.figures.models_called[0].called,
        ["anthropic/claude-opus-4-6", "openai/gpt-4.1-mini"]
    );
}

#[test]
fn every_model_the_bridge_allowed_counts_as_declared() {
    // runner records the bridge's whole list as agents[].models (model_name is its first).
    let scratch = Scratch::new();
    scratch.edit_json("config.json", |c| {
        c["agents"][0]["models"] =
            json!(["anthropic/claude-opus-4-6", "anthropic/claude-haiku-4-5"]);
    });
    metered(
        &scratch,
        0,
        &["anthropic/claude-opus-4-6", "anthropic/claude-haiku-4-5"],
    );
    let report = scratch.validate();
    assert!(report.valid, "{}", render::text(&report));
    metered(&scratch, 1, &["openai/gpt-4.1-mini"]);
    let violations = only_failure(&scratch.validate(), Rule::DeclaredModelsOnly);
    assert_all_said(&violations, &["called model `openai/gpt-4.1-mini`"]);
    assert_says(&violations[0], "anthropic/claude-haiku-4-5");
}

#[test]
fn a_rewarded_trial_verified_without_isolation_fails_both_verdicts_an_unrewarded_one_evidence_only()
{
    let s = Scratch::new();
    assert!(s.validate().valid, "{}", render::text(&s.validate()));
    // TRIALS[4] scored 0: its unisolated tests are evidence, not a reward to doubt.
    s.edit_json(&format!("{}/result.json", TRIALS[4]), |r| {
        r["verifier_isolation"] =
            json!({"isolated": false, "detail": "the sandbox cannot run the verifier isolated"});
    });
    let report = s.validate();
    assert!(report.valid, "{}", render::text(&report));
    assert_eq!(report.verdicts.evidence.failed, ["verifier_isolated"]);
    // TRIALS[1] scored 1: its reward is not the task's.
    s.edit_json(&format!("{}/result.json", TRIALS[1]), |r| {
        r["verifier_isolation"] =
            json!({"isolated": false, "detail": "the sandbox cannot run the verifier isolated"});
    });
    let report = s.validate();
    assert_eq!(
        report.failed_rules(),
        ["uncompromised_rewards", "verifier_isolated"]
    );
    assert!(!report.valid);
    let v = &report.outcome(Rule::UncompromisedRewards).violations;
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].file.as_deref().unwrap().contains(TRIALS[1]), "{v:?}");
    assert_says(
        &v[0],
        "reward 1, but the verifier ran in the agent's sandbox without isolation",
    );
    assert_eq!(report.outcome(Rule::VerifierIsolated).violations.len(), 2);
}

#[test]
fn the_main_reward_is_read_by_name_as_the_runner_reads_it() {
    // A record another tool wrote keeps its verifier's key order; the runner's own records
    // sort the names. Both must give the same main reward.
    let harbor_order = json!({"verifier_result": {"rewards": {"tests": 1, "lint": 0}}});
    let sorted = json!({"verifier_result": {"rewards": {"lint": 0, "tests": 1}}});
    assert_eq!(reward_of(&harbor_order), Some(0.0));
    assert_eq!(reward_of(&harbor_order), reward_of(&sorted));
    let named = json!({"verifier_result": {"rewards": {"a": 0.5, "reward": true}}});
    assert_eq!(reward_of(&named), Some(1.0));
    assert_eq!(
        reward_of(&json!({"verifier_result": {"rewards": {}}})),
        None
    );
}

/// The rules a submission cannot fool by duplication or omission (issue 29, item 7).
mod duplication_and_omission {
    use super::*;

    fn failed(options: &Options) -> Report {
        validate(options).unwrap()
    }

    /// A k = 3 job: two trials removed and the lock planning three.
    fn k3() -> Scratch {
        let s = Scratch::new();
        for trial in &TRIALS[3..] {
            std::fs::remove_dir_all(s.job.join(trial)).unwrap();
        }
        s.edit_json("lock.json", |l| {
            l["trials"].as_array_mut().unwrap().truncate(3);
        });
        s
    }

    #[test]
    fn a_k3_job_given_twice_or_beside_its_copy_is_counted_once() {
        let s = k3();
        let mut options = Options::new(vec![s.job.clone()]);
        options.dataset = Some(s.dataset.clone());
        let alone = failed(&options);
        assert_eq!(alone.failed_rules(), ["min_trials_per_task"]);
        // The same dir twice.
        options.job_dirs = vec![s.job.clone(), s.job.clone()];
        let twice = failed(&options);
        assert_eq!(
            twice.failed_rules(),
            ["unique_trials", "min_trials_per_task"]
        );
        assert_eq!(twice.figures.n_trials, 3);
        // A copy beside it, under another path.
        let copy = s.job.parent().unwrap().join("copy-of-job");
        copy_dir(&s.job, &copy);
        options.job_dirs = vec![s.job.clone(), copy];
        let copied = failed(&options);
        assert_eq!(
            copied.failed_rules(),
            ["unique_trials", "min_trials_per_task"]
        );
        assert_eq!(copied.figures.n_trials, 3);
        let v = copied.outcome(Rule::UniqueTrials).violations.clone();
        assert_eq!(v.len(), 3);
        assert_says(&v[0], "is given 2 times");
        assert_says(
            &copied.outcome(Rule::MinTrialsPerTask).violations[0],
            "has 3 trial(s)",
        );
    }

    #[test]
    fn a_cherry_picked_runner_job_names_its_missing_trials() {
        let s = Scratch::new();
        lock_images(&s, ["sha256:1"; 5]);
        assert!(s.validate().valid);
        std::fs::remove_dir_all(s.job.join(TRIALS[3])).unwrap();
        std::fs::remove_dir_all(s.job.join(TRIALS[4])).unwrap();
        let report = s.validate();
        assert_eq!(
            report.failed_rules(),
            ["planned_trials", "min_trials_per_task"]
        );
        let v = report.outcome(Rule::PlannedTrials).violations.clone();
        assert_says(
            &v[0],
            "2 of the 5 trials lock.json planned are not in the submission",
        );
        assert_says(&v[0], TRIALS[3]);
        assert_says(&v[0], TRIALS[4]);
    }

    #[test]
    fn a_job_without_its_lock_cannot_be_checked_for_omissions() {
        let s = Scratch::new();
        std::fs::remove_file(s.job.join("lock.json")).unwrap();
        let v = only_failure(&s.validate(), Rule::PlannedTrials);
        assert_says(&v[0], "no readable lock.json");
    }

    #[test]
    fn a_trial_moved_in_from_another_job_is_not_planned() {
        let s = Scratch::new();
        lock_images(&s, ["sha256:1"; 5]);
        s.edit_json(&format!("{}/config.json", TRIALS[1]), |c| {
            c["job_id"] = json!("99999999-0000-0000-0000-000000000000")
        });
        let report = s.validate();
        let v = report.outcome(Rule::PlannedTrials).violations.clone();
        assert_any_says(&v, "records job id 99999999");
        assert_any_says(
            &v,
            "1 of the 5 trials lock.json planned are not in the submission",
        );
    }

    #[test]
    fn a_merged_jobs_trials_count_for_it_through_merged_from_alone() {
        let s = Scratch::new();
        lock_images(&s, ["sha256:1"; 5]);
        // Trials 0-2 ran in one part and 3-4 in another; the merged dir has an id of its own.
        for (trial, part) in TRIALS
            .iter()
            .zip(["part-a", "part-a", "part-a", "part-b", "part-b"])
        {
            s.edit_json(&format!("{trial}/config.json"), |c| {
                c["job_id"] = json!(part)
            });
        }
        s.edit_json("result.json", |r| r["id"] = json!("merged"));
        let unlisted = s.validate();
        assert_any_says(
            &unlisted.outcome(Rule::PlannedTrials).violations,
            "records job id part-a",
        );
        s.edit_json("config.json", |c| c["merged_from"] = json!(["part-a"]));
        let one_listed = s.validate();
        let v = one_listed.outcome(Rule::PlannedTrials).violations.clone();
        assert_any_says(&v, "records job id part-b");
        assert!(!v.iter().any(|v| v.message.contains("part-a")), "{v:?}");
        s.edit_json("config.json", |c| {
            c["merged_from"] = json!(["part-a", "part-b"])
        });
        assert!(s.validate().valid);
    }

    #[test]
    fn agent_info_and_verifier_isolation_are_required() {
        let s = Scratch::new();
        s.edit_json(&format!("{}/result.json", TRIALS[0]), |r| {
            r.as_object_mut().unwrap().remove("agent_info");
        });
        s.edit_json(&format!("{}/result.json", TRIALS[1]), |r| {
            r.as_object_mut().unwrap().remove("verifier_isolation");
        });
        let report = s.validate();
        assert_eq!(report.failed_rules(), ["agent_config_match"]);
        assert_says(
            &report.outcome(Rule::AgentConfigMatch).violations[0],
            "no agent_info",
        );
        let outcome = report.outcome(Rule::VerifierIsolated);
        assert_eq!(outcome.status, Status::NotRecorded);
        assert_eq!(outcome.violations.len(), 1);
        assert_says(&outcome.violations[0], &format!("trial {}", TRIALS[1]));
    }

    #[test]
    fn jobs_of_two_agents_are_not_one_submission() {
        let s = Scratch::new();
        let other = s.job.parent().unwrap().join("other-agent");
        copy_dir(&s.job, &other);
        let edit = |rel: &str, f: &dyn Fn(&mut Value)| {
            let path = other.join(rel);
            let mut value: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            f(&mut value);
            std::fs::write(&path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
        };
        edit("config.json", &|c| {
            c["agents"][0]["name"] = json!("other-agent")
        });
        edit("result.json", &|r| {
            r["id"] = json!("22222222-0000-0000-0000-000000000000")
        });
        for trial in TRIALS {
            edit(&format!("{trial}/result.json"), &|r| {
                r["agent_info"]["name"] = json!("other-agent");
                r["config"]["job_id"] = json!("22222222-0000-0000-0000-000000000000");
            });
            edit(&format!("{trial}/config.json"), &|c| {
                c["job_id"] = json!("22222222-0000-0000-0000-000000000000")
            });
        }
        let mut options = Options::new(vec![s.job.clone(), other]);
        options.dataset = Some(s.dataset.clone());
        let report = failed(&options);
        // The "other agent" job is a copy: its trajectories are the first job's sessions,
        // of an agent its agent_info does not name.
        assert_eq!(
            report.failed_rules(),
            ["one_agent", "trajectories_bound"],
            "{}",
            render::text(&report)
        );
        let v = report.outcome(Rule::OneAgent).violations.clone();
        assert_eq!(v.len(), 2, "{v:?}");
        assert_any_says(&v, "the trials ran 2 agents");
        assert_any_says(&v, "the job configs name 2 agents");
    }

    #[test]
    fn rewards_must_be_finite_and_the_main_one_within_0_and_1() {
        let s = Scratch::new();
        s.edit_json(&format!("{}/result.json", TRIALS[0]), |r| {
            r["verifier_result"]["rewards"]["reward"] = json!(1e300)
        });
        s.edit_json(&format!("{}/result.json", TRIALS[2]), |r| {
            r["verifier_result"]["rewards"] = json!({"reward": 0.0, "note": "ok"})
        });
        s.edit_json(&format!("{}/result.json", TRIALS[3]), |r| {
            r["verifier_result"]["rewards"]["reward"] = json!(-0.5)
        });
        let report = s.validate();
        let v = report.outcome(Rule::RewardsInRange).violations.clone();
        assert_all_said(
            &v,
            &[
                "the main reward is 1e+300, outside [0, 1]",
                "reward \"note\" is \"ok\", not a finite number",
                "the main reward is -0.5, outside [0, 1]",
            ],
        );
        assert!(!report.valid);
    }

    #[test]
    fn an_empty_datasets_list_fails_harbors_dataset_rule() {
        let s = Scratch::new();
        s.edit_json("config.json", |c| c["datasets"] = json!([]));
        let v = only_failure(&s.validate(), Rule::DatasetConfig);
        assert_says(&v[0], "datasets list is empty");
    }
}

#[test]
fn a_rewarded_trial_verified_with_the_agents_changed_toolchain_fails() {
    let s = Scratch::new();
    let reward_of_trial = |trial: &str| {
        let text = std::fs::read(s.job.join(trial).join("result.json")).unwrap();
        reward_of(&serde_json::from_slice(&text).unwrap())
    };
    let rewarded = TRIALS
        .iter()
        .find(|t| reward_of_trial(t) > Some(0.0))
        .unwrap();
    let unrewarded = TRIALS
        .iter()
        .find(|t| reward_of_trial(t) == Some(0.0))
        .unwrap();
    let changed = json!(["/usr/local/bin/python3: added by the agent, earlier on PATH"]);
    for trial in [rewarded, unrewarded] {
        s.edit_json(&format!("{trial}/result.json"), |r| {
            r["verifier_isolation"]["toolchain"] = json!("agent");
            r["verifier_toolchain_changes"] = changed.clone();
        });
    }
    let report = s.validate();
    assert_eq!(
        report.failed_rules(),
        ["uncompromised_rewards", "verifier_toolchain"]
    );
    let v = &report.outcome(Rule::UncompromisedRewards).violations;
    assert_eq!(v.len(), 1, "only the rewarded trial: {v:?}");
    assert!(v[0].file.as_deref().unwrap().contains(*rewarded), "{v:?}");
    assert_says(&v[0], "/usr/local/bin/python3: added by the agent");
    assert_eq!(report.outcome(Rule::VerifierToolchain).violations.len(), 2);
    // Invalid whether or not evidence is asked for.
    let mut options = s.options();
    options.require_evidence = true;
    assert!(!validate(&options).unwrap().valid);
    // The image's own toolchain ran the tests: what the agent changed did not matter.
    s.edit_json(&format!("{rewarded}/result.json"), |r| {
        r["verifier_isolation"]["toolchain"] = json!("image");
    });
    assert!(s.validate().valid, "{}", render::text(&s.validate()));
}

/// A TB 2.1-style published manifest (Harbor's `dataset.toml`) in `dir`, pinning each task.
fn manifest(dir: &Path, tasks: &[(&str, &str)]) -> PathBuf {
    let mut text = String::from(
        "[dataset]\nname = \"terminal-bench/terminal-bench-2-1\"\nversion = \"2.1\"\ndescription = \"89 tasks\"\n",
    );
    for (name, digest) in tasks {
        text.push_str(&format!(
            "\n[[tasks]]\nname = \"{name}\"\ndigest = \"{digest}\"\n"
        ));
    }
    let path = dir.join("dataset.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_published_manifest_validates_a_matching_submission_and_names_a_changed_task() {
    let s = Scratch::new();
    let digest = tasks::Dataset::load(&s.dataset).unwrap().tasks[0]
        .digest
        .clone();
    let dir = tempfile::tempdir().unwrap();
    let mut options = s.options();
    options.dataset = Some(manifest(
        dir.path(),
        &[("terminal-bench/regex-log", &digest)],
    ));
    let report = validate(&options).unwrap();
    assert!(report.valid, "{}", render::text(&report));
    assert_eq!(
        report.outcome(Rule::CorrectTaskVersions).status,
        Status::Passed
    );

    let other = format!("sha256:{}", "ab".repeat(32));
    options.dataset = Some(manifest(
        dir.path(),
        &[
            ("terminal-bench/regex-log", &other),
            ("terminal-bench/fix-git", &digest),
        ],
    ));
    let report = validate(&options).unwrap();
    assert_eq!(
        report.failed_rules(),
        ["min_trials_per_task", "correct_task_versions"]
    );
    let v = &report.outcome(Rule::CorrectTaskVersions).violations;
    assert_eq!(v.len(), 5, "one per trial: {v:?}");
    assert_says(
        &v[0],
        &format!(
            "task terminal-bench/regex-log ran at {digest} but the dataset's content digest is {other}"
        ),
    );
    assert_says(
        &report.outcome(Rule::MinTrialsPerTask).violations[0],
        "task terminal-bench/fix-git has 0 trial(s)",
    );
}

#[test]
fn a_manifest_that_pins_nothing_is_bad_input_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dataset.toml");
    std::fs::write(
        &path,
        "[dataset]\nname = \"o/d\"\n[[tasks]]\nname = \"o/t\"\n",
    )
    .unwrap();
    let mut options = Options::new(vec![fixtures().join(H13_JOB)]);
    options.dataset = Some(path.clone());
    let err = validate(&options).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("--dataset: {}", path.display())),
        "{err}"
    );
    assert!(err.contains("tasks[0] (o/t) has no digest"), "{err}");
}

#[test]
fn the_leaderboard_accuracy_counts_every_planned_trial() {
    let s = Scratch::new();
    let f = s.validate().figures;
    assert_eq!((f.n_planned_trials, f.n_successes), (5, 3));
    assert!((f.leaderboard_accuracy - 0.6).abs() < 1e-12);
    // A planned trial left out counts as 0 on the leaderboard, not as absent.
    std::fs::remove_dir_all(s.job.join(TRIALS[4])).unwrap();
    let f = s.validate().figures;
    assert_eq!((f.n_trials, f.n_planned_trials, f.n_successes), (4, 5, 3));
    assert!((f.accuracy - 0.75).abs() < 1e-12);
    assert!((f.leaderboard_accuracy - 0.6).abs() < 1e-12);
}

/// Writes `job`'s record manifest as runner would have as its trials ended.
fn record(job: &Path) {
    use tasks::records::record_manifest::ManifestLine;
    let mut lines = vec![
        ManifestLine::header("job"),
        ManifestLine::job_files(job).unwrap(),
    ];
    for trial in TRIALS {
        lines.push(ManifestLine::trial(trial, &job.join(trial)).unwrap());
    }
    let bytes: Vec<u8> = lines.iter().flat_map(ManifestLine::to_line).collect();
    std::fs::write(job.join(tasks::records::RECORD_MANIFEST), bytes).unwrap();
}

#[test]
fn a_scrubbed_copy_is_judged_by_its_originals_records() {
    let s = Scratch::new();
    record(&s.job);
    assert!(s.validate().valid, "{}", render::text(&s.validate()));
    // The copy scrub writes: a redacted log differs from what the manifest holds.
    let copy = s.job.parent().unwrap().join("copy");
    copy_dir(&s.job, &copy);
    let log = format!("{}/trial.log", TRIALS[0]);
    std::fs::write(copy.join(&log), "key: [REDACTED]\n").unwrap();
    let copy_options = Options {
        job_names: vec!["job".into()],
        ..Options {
            job_dirs: vec![copy.clone()],
            ..s.options()
        }
    };
    let as_copy = validate(&copy_options).unwrap();
    let changed = only_failure(&as_copy, Rule::RecordsUnchanged);
    assert_says(
        &changed[0],
        &format!("{log} changed").replace(&format!("{}/", TRIALS[0]), ""),
    );
    // Judged on the original, the copy's records hold ...
    let by_original = Options {
        records_of: vec![s.job.clone()],
        ..copy_options.clone()
    };
    let report = validate(&by_original).unwrap();
    assert!(report.valid, "{}", render::text(&report));
    // ... and an edit of the original still shows.
    std::fs::write(s.job.join(TRIALS[1]).join("verifier/reward.txt"), "1").unwrap();
    let edited = only_failure(&validate(&by_original).unwrap(), Rule::RecordsUnchanged);
    assert_says(&edited[0], "verifier/reward.txt");
}
