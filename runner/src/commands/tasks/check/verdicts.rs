//! Verdicts: what a check's trials mean (pure over the records and the files the probes
//! brought back), so each rule is tested without Docker.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tasks::Task;

use super::judge::ProbeOutcome;
use super::probes::{LEAKS, PLANTED};
use super::report::{CheckResult, Message, Status};
use super::trials::{Trial, agent_seconds, exception, score};

/// Files of tests/ or solution/ shorter than this are not looked for: an empty `__init__.py`
/// or a one-word file matches too much to mean a leak.
const MIN_LEAK_BYTES: u64 = 32;

/// The oracle check: every trial scores 1 (some but not all is flaky), and the agent phase
/// uses at most half of the agent timeout. Returns the verdict and each trial's seconds.
pub fn judge_oracle(trials: &[Trial], timeout_sec: Option<f64>) -> (CheckResult, Vec<f64>) {
    let scores: Vec<Option<f64>> = trials.iter().map(|t| score(&t.result)).collect();
    let ones = scores
        .iter()
        .filter(|s| s.is_some_and(|s| s >= 1.0 - 1e-9))
        .count();
    let mut messages = Vec::new();
    let others: Vec<String> = trials
        .iter()
        .zip(&scores)
        .filter(|(_, s)| !s.is_some_and(|s| s >= 1.0 - 1e-9))
        .map(|(t, s)| match (s, exception(&t.result)) {
            (_, Some(e)) => e,
            (Some(s), None) => format!("reward {s}"),
            (None, None) => "no reward".to_owned(),
        })
        .collect();
    if ones == trials.len() && !trials.is_empty() {
        messages.push(Message::new(
            Status::Pass,
            format!("scored 1 in {ones} of {} trial(s)", trials.len()),
        ));
    } else if ones > 0 {
        messages.push(Message::new(
            Status::Fail,
            format!(
                "flaky: scored 1 in {ones} of {} trials (others: {})",
                trials.len(),
                others.join("; ")
            ),
        ));
    } else {
        messages.push(Message::new(
            Status::Fail,
            format!(
                "the oracle never scored 1 in {} trial(s): {}",
                trials.len(),
                others.join("; ")
            ),
        ));
    }
    let seconds: Vec<f64> = trials
        .iter()
        .filter_map(|t| agent_seconds(&t.result))
        .collect();
    if let (Some(timeout), Some(longest)) = (timeout_sec, seconds.iter().copied().reduce(f64::max))
        && longest > timeout / 2.0
    {
        messages.push(Message::new(Status::Warn, format!(
            "the solution took {longest:.1}s of the {timeout:.0}s agent timeout (over half): a slower machine may time it out")));
    }
    (CheckResult::of(messages), seconds)
}

/// The nop check: an untouched environment scores 0.
pub fn judge_nop(trials: &[Trial]) -> CheckResult {
    let messages = trials
        .iter()
        .map(|t| match (score(&t.result), exception(&t.result)) {
            (Some(s), _) if s > 0.0 => Message::new(Status::Fail, format!(
                "the nop agent scored {s}: the verifier passes an environment nobody touched")),
            (Some(_), _) => Message::new(Status::Pass, "the nop agent scored 0"),
            (None, e) => Message::new(Status::Warn, format!(
                "the nop agent got no reward ({}); a verifier should write 0 for a missing answer",
                e.unwrap_or_else(|| "no exception".into()))),
        })
        .collect();
    CheckResult::of(messages)
}

/// One probe's verdict: reward above 0 fails, naming what was planted.
pub fn judge_probe(name: &str, what: &str, outcome: ProbeOutcome) -> Message {
    let trial = match outcome {
        Ok(trial) => trial,
        Err(err) => {
            return Message::new(Status::Warn, format!("probe {name} could not run: {err}"));
        }
    };
    let planted =
        std::fs::read_to_string(trial.dir.join("agent").join(PLANTED)).unwrap_or_default();
    let planted: Vec<&str> = planted.lines().filter(|l| !l.is_empty()).collect();
    if name == "tests-edit" && planted.is_empty() {
        return Message::new(
            Status::Pass,
            "tests-edit: no test file is visible to the agent",
        );
    }
    match (score(&trial.result), exception(&trial.result)) {
        (Some(s), _) if s > 0.0 => Message::new(
            Status::Fail,
            format!(
                "probe {name} ({what}) scored {s}; it planted: {}",
                planted.join(", ")
            ),
        ),
        (Some(_), _) => Message::new(
            Status::Pass,
            format!("probe {name} scored 0 (planted {} file(s))", planted.len()),
        ),
        (None, e) => Message::new(
            Status::Warn,
            format!(
                "probe {name} got no reward ({}); planted: {}",
                e.unwrap_or_default(),
                planted.join(", ")
            ),
        ),
    }
}

/// The broken-answers verdict: with every file the solution made emptied, the verifier must
/// give 0.
pub fn judge_broken(outcome: ProbeOutcome) -> CheckResult {
    let trial = match outcome {
        Ok(trial) => trial,
        Err(err) => {
            return CheckResult::of(vec![Message::new(
                Status::Warn,
                format!("could not run: {err}"),
            )]);
        }
    };
    let planted =
        std::fs::read_to_string(trial.dir.join("agent").join(PLANTED)).unwrap_or_default();
    let emptied: Vec<&str> = planted.lines().filter(|l| !l.is_empty()).collect();
    if emptied.is_empty() {
        return CheckResult::of(vec![Message::new(
            Status::Warn,
            "the solution created or changed no file, so there was nothing to empty",
        )]);
    }
    let listed = emptied
        .iter()
        .map(|l| l.trim_end_matches(" (emptied)"))
        .collect::<Vec<_>>()
        .join(", ");
    CheckResult::of(vec![
        match (score(&trial.result), exception(&trial.result)) {
            (Some(s), _) if s > 0.0 => Message::new(
                Status::Fail,
                format!(
                    "the verifier gave {s} with every file the solution made emptied ({listed}): it checks nothing the solution made"
                ),
            ),
            (Some(_), _) => {
                Message::new(Status::Pass, format!("emptied outputs score 0 ({listed})"))
            }
            (None, e) => Message::new(
                Status::Warn,
                format!(
                    "no reward with the outputs emptied ({}); a verifier should write 0",
                    e.unwrap_or_default()
                ),
            ),
        },
    ])
}

/// sha256 hex → (size, task-relative path, is a test file) of every file of tests/ and
/// solution/ worth looking for: not tiny, and for tests/ not also an input in environment/
/// (a file the agent is given on purpose; a solution file there is still a leak).
pub fn wanted_files(task: &Task) -> HashMap<String, (u64, PathBuf, bool)> {
    let hash = |path: &Path| {
        std::fs::read(path)
            .ok()
            .map(|b| tasks::digest::sha256_hex(&b))
    };
    let inputs: std::collections::HashSet<String> =
        tasks::lint::files_under(&task.environment_dir(), &task.dir)
            .iter()
            .filter_map(|(_, p)| hash(p))
            .collect();
    let mut out = HashMap::new();
    for (dir, test) in [(task.tests_dir(), true), (task.solution_dir(), false)] {
        for (rel, path) in tasks::lint::files_under(&dir, &task.dir) {
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if meta.len() < MIN_LEAK_BYTES {
                continue;
            }
            if let Some(h) = hash(&path)
                && !(test && inputs.contains(&h))
            {
                out.entry(h).or_insert((meta.len(), rel, test));
            }
        }
    }
    out
}

/// The leaks the scan found: each readable copy of a tests/ or solution/ file fails.
pub fn judge_leaks(trial: &Trial, wanted: &HashMap<String, (u64, PathBuf, bool)>) -> Vec<Message> {
    let text = std::fs::read_to_string(trial.dir.join("agent").join(LEAKS)).unwrap_or_default();
    let mut messages: Vec<Message> = text
        .lines()
        .filter_map(|line| {
            let (hash, path) = line.split_once("  ")?;
            let (_, rel, _) = wanted.get(hash)?;
            Some(Message::at(
                Status::Fail,
                format!("readable by the agent at {path}"),
                rel.clone(),
                None,
            ))
        })
        .collect();
    if messages.is_empty() {
        messages.push(Message::new(
            Status::Pass,
            format!(
                "none of {} file(s) of tests/ and solution/ is readable in the agent's environment",
                wanted.len()
            ),
        ));
    }
    messages
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::{Duration, Utc};
    use tasks::records::{PhaseTiming, TrialResult, VerifierResult};

    use super::*;

    /// A trial with `reward` (none: no verifier result), `agent_secs` of agent phase, and
    /// `planted` lines in its agent dir.
    fn trial(dir: &Path, reward: Option<f64>, agent_secs: i64, planted: &str) -> Trial {
        let started = Utc::now();
        let result = TrialResult {
            verifier_result: reward.map(|r| VerifierResult {
                rewards: Some(BTreeMap::from([("reward".to_owned(), r)])),
                ..VerifierResult::default()
            }),
            agent_execution: Some(PhaseTiming {
                started_at: Some(started),
                finished_at: Some(started + Duration::seconds(agent_secs)),
            }),
            ..TrialResult::default()
        };
        std::fs::create_dir_all(dir.join("agent")).unwrap();
        std::fs::write(dir.join("agent").join(PLANTED), planted).unwrap();
        Trial {
            result,
            dir: dir.to_path_buf(),
        }
    }

    #[test]
    fn the_oracle_must_score_1_every_time_within_half_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let good = [
            trial(dir.path(), Some(1.0), 10, ""),
            trial(dir.path(), Some(1.0), 20, ""),
        ];
        let (result, seconds) = judge_oracle(&good, Some(100.0));
        assert_eq!(result.status, Status::Pass);
        assert_eq!(seconds, [10.0, 20.0]);
        let (slow, _) = judge_oracle(&good, Some(30.0));
        assert_eq!(slow.status, Status::Warn);
        assert!(
            slow.messages[1].text.contains("20.0s of the 30s"),
            "{:?}",
            slow.messages
        );
        let flaky = [
            trial(dir.path(), Some(1.0), 1, ""),
            trial(dir.path(), Some(0.0), 1, ""),
        ];
        let (result, _) = judge_oracle(&flaky, None);
        assert_eq!(result.status, Status::Fail);
        assert!(
            result.messages[0]
                .text
                .starts_with("flaky: scored 1 in 1 of 2"),
            "{:?}",
            result.messages
        );
        let (never, _) = judge_oracle(&[trial(dir.path(), None, 1, "")], None);
        assert!(
            never.messages[0].text.contains("never scored 1"),
            "{:?}",
            never.messages
        );
    }

    #[test]
    fn nop_probes_and_broken_answers_must_score_0() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            judge_nop(&[trial(dir.path(), Some(0.0), 1, "")]).status,
            Status::Pass
        );
        assert_eq!(
            judge_nop(&[trial(dir.path(), Some(1.0), 1, "")]).status,
            Status::Fail
        );
        assert_eq!(
            judge_nop(&[trial(dir.path(), None, 1, "")]).status,
            Status::Warn
        );

        let hacked = judge_probe(
            "conftest",
            "a conftest",
            Ok(trial(dir.path(), Some(1.0), 1, "/app/conftest.py\n")),
        );
        assert_eq!(hacked.status, Status::Fail);
        assert!(hacked.text.contains("/app/conftest.py"), "{}", hacked.text);
        let held = judge_probe(
            "conftest",
            "a conftest",
            Ok(trial(dir.path(), Some(0.0), 1, "/app/conftest.py\n")),
        );
        assert_eq!(held.status, Status::Pass);
        let nothing = judge_probe(
            "tests-edit",
            "edits",
            Ok(trial(dir.path(), Some(1.0), 1, "")),
        );
        assert_eq!(
            nothing.status,
            Status::Pass,
            "no test file visible: nothing was edited"
        );
        assert_eq!(
            judge_probe(
                "x",
                "y",
                Err(super::super::judge::ProbeError::Trials(
                    std::sync::Arc::new(crate::exit::CliError::runner("no engine"))
                ))
            )
            .status,
            Status::Warn
        );

        let emptied = "/app/answer.txt (emptied)\n";
        assert_eq!(
            judge_broken(Ok(trial(dir.path(), Some(1.0), 1, emptied))).status,
            Status::Fail
        );
        assert_eq!(
            judge_broken(Ok(trial(dir.path(), Some(0.0), 1, emptied))).status,
            Status::Pass
        );
        assert_eq!(
            judge_broken(Ok(trial(dir.path(), Some(0.0), 1, ""))).status,
            Status::Warn
        );
    }

    #[test]
    fn leaks_are_the_scanned_copies_of_wanted_files() {
        let dir = tempfile::tempdir().unwrap();
        let t = trial(dir.path(), Some(0.0), 1, "");
        let wanted = HashMap::from([(
            "aa".to_owned(),
            (40, PathBuf::from("solution/solve.sh"), false),
        )]);
        std::fs::write(
            dir.path().join("agent").join(LEAKS),
            "aa  /opt/solve.sh\nbb  /other\n",
        )
        .unwrap();
        let found = judge_leaks(&t, &wanted);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].status, Status::Fail);
        assert_eq!(
            found[0].path.as_deref(),
            Some(Path::new("solution/solve.sh"))
        );
        assert!(found[0].text.contains("/opt/solve.sh"));
        std::fs::write(dir.path().join("agent").join(LEAKS), "").unwrap();
        assert_eq!(judge_leaks(&t, &wanted)[0].status, Status::Pass);
    }

    #[test]
    fn wanted_files_skip_tiny_files_and_test_inputs_but_not_solution_copies() {
        let dir = tempfile::tempdir().unwrap();
        let task_dir = dir.path().join("t");
        let long = "a line long enough to be worth looking for in the image\n";
        for (path, text) in [
            ("task.toml", ""),
            ("instruction.md", "Do it.\n"),
            ("environment/Dockerfile", "FROM scratch\n"),
            ("environment/input.csv", long),
            (
                "environment/solve.sh",
                "#!/bin/bash\necho the answer is 42, copied into the image\n",
            ),
            ("tests/test.sh", "#!/bin/bash\n"),
            ("tests/input.csv", long),
            (
                "tests/test_outputs.py",
                "def test_answer():\n    assert open('/app/a').read() == '42'\n",
            ),
            (
                "solution/solve.sh",
                "#!/bin/bash\necho the answer is 42, copied into the image\n",
            ),
        ] {
            std::fs::create_dir_all(task_dir.join(path).parent().unwrap()).unwrap();
            std::fs::write(task_dir.join(path), text).unwrap();
        }
        let task = Task::read(&task_dir).unwrap();
        let mut found: Vec<(PathBuf, bool)> = wanted_files(&task)
            .into_values()
            .map(|(_, p, t)| (p, t))
            .collect();
        found.sort();
        assert_eq!(
            found,
            [
                (PathBuf::from("solution/solve.sh"), false),
                (PathBuf::from("tests/test_outputs.py"), true)
            ]
        );
    }
}
