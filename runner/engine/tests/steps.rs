//! Multi-step tasks and artifacts through the trial state machine on the fake backend: steps
//! run in order in one environment, each verified by its own tests, `min_reward` stops the
//! trial, `workdir/setup.sh` runs before its step, rewards aggregate as in Harbor, and
//! declared artifacts come back with Harbor's manifest.

use std::path::{Path, PathBuf};

use adapter::AnyAgent;
use tasks::records::TrialResult;
use tasks::{Dataset, ExceptionType};
use testkit::records::artifact_manifest;
use testkit::{FakeBackend, TaskFixture};

/// Step one's work is `/workspace/one`; step two's is `/workspace/two` and needs step one's.
const TWO_STEPS: &str = "[[steps]]\nname = \"one\"\nmin_reward = 1.0\n[[steps]]\nname = \"two\"\n";

fn reward_if(test: &str) -> String {
    format!("#!/bin/bash\nif {test}; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n")
}

/// `task.toml` with `body`'s top-level keys before `[task]` (the fixture's `toml()` appends
/// after `[task]`, where top-level keys cannot go).
fn task_toml(name: &str, body: &str) -> String {
    format!("{body}\n[task]\nname = \"{name}\"\n")
}

/// A two-step task; `extra` adds `(path, contents)` files and `toml` follows `TWO_STEPS`.
fn two_step_task(root: &Path, toml: &str, extra: &[(&str, &str)]) -> Dataset {
    let mut fixture = TaskFixture::new("test/steps")
        .file(
            "task.toml",
            &task_toml("test/steps", &format!("{TWO_STEPS}{toml}")),
        )
        .file("steps/one/instruction.md", "Make one.\n")
        .file("steps/two/instruction.md", "Make two.\n")
        .file(
            "steps/one/solution/solve.sh",
            "#!/bin/bash\nmkdir -p /workspace && echo one > /workspace/one\n",
        )
        .file(
            "steps/two/solution/solve.sh",
            "#!/bin/bash\necho two > /workspace/two\necho note > /logs/artifacts/note.txt\n",
        )
        .file(
            "steps/one/tests/test.sh",
            &reward_if("[ -f /workspace/one ]"),
        )
        .file(
            "steps/two/tests/test.sh",
            &reward_if(
                "[ -f /workspace/one ] && [ -f /workspace/two ] && [ -f /tests/shared.txt ]",
            ),
        )
        .file("tests/shared.txt", "from the shared tests\n");
    for (path, text) in extra {
        fixture = fixture.file(path, text);
    }
    fixture.write(&root.join("dataset/steps"));
    Dataset::load(&root.join("dataset")).expect("the fixture dataset loads")
}

struct Ran {
    result: TrialResult,
    trial_dir: PathBuf,
    started_and_removed: (usize, usize),
    _dir: tempfile::TempDir,
}

impl Ran {
    fn file(&self, rel: &str) -> String {
        std::fs::read_to_string(self.trial_dir.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn step_rewards(&self) -> Vec<(String, Option<f64>)> {
        self.result
            .step_results
            .as_ref()
            .expect("step_results")
            .iter()
            .map(|s| {
                (
                    s.step_name.clone(),
                    s.rewards().and_then(|r| r.get("reward").copied()),
                )
            })
            .collect()
    }
}

/// Runs the dataset's one task once with `agent` on the fake backend.
async fn run_one(dir: tempfile::TempDir, dataset: Dataset, agent: &str) -> Ran {
    let backend = FakeBackend::new();
    let agent = AnyAgent::builtin(agent).unwrap();
    let settings = testkit::job_settings(dir.path(), "job", &agent, 1);
    let (trial_dir, result) =
        testkit::run_one_trial(dir.path(), backend.clone(), agent, &dataset, &settings).await;
    let tally = backend.tally();
    Ran {
        trial_dir,
        result,
        started_and_removed: (tally.started.len(), tally.removed.len()),
        _dir: dir,
    }
}

#[tokio::test]
async fn the_oracle_runs_every_step_in_one_environment_and_each_is_verified() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = two_step_task(dir.path(), "", &[]);
    let ran = run_one(dir, dataset, "oracle").await;
    assert_eq!(
        ran.started_and_removed,
        (1, 1),
        "one environment for both steps"
    );
    assert_eq!(
        ran.step_rewards(),
        [("one".into(), Some(1.0)), ("two".into(), Some(1.0))],
        "step two saw step one's work and the shared tests: {:?}",
        ran.result.exception_info
    );
    assert_eq!(ran.result.reward(), Some(1.0));
    assert_eq!(ran.result.exception_info, None);
    for step in ran.result.step_results.as_ref().unwrap() {
        for timing in [&step.agent_execution, &step.verifier] {
            let timing = timing.as_ref().expect("timed");
            assert!(timing.started_at.is_some() && timing.finished_at.is_some());
        }
    }
    let spanned = ran.result.agent_execution.as_ref().unwrap();
    let steps = ran.result.step_results.as_ref().unwrap();
    assert_eq!(
        spanned.started_at,
        steps[0].agent_execution.as_ref().unwrap().started_at
    );
    assert_eq!(
        spanned.finished_at,
        steps[1].agent_execution.as_ref().unwrap().finished_at
    );
    // Each step's outputs in its own directory, as Harbor lays them out.
    assert_eq!(ran.file("steps/one/verifier/reward.txt").trim(), "1");
    assert_eq!(ran.file("steps/two/verifier/reward.txt").trim(), "1");
    assert!(ran.trial_dir.join("steps/one/agent/oracle.txt").is_file());
    assert_eq!(ran.file("steps/two/artifacts/note.txt"), "note\n");
    let two = artifact_manifest(&ran.trial_dir.join("steps/two/artifacts"));
    assert_eq!(two[0], ["/logs/artifacts", "artifacts", "directory", "ok"]);
    let one = artifact_manifest(&ran.trial_dir.join("steps/one/artifacts"));
    assert_eq!(one[0][3], "empty", "step two's note is not step one's");
    // The record reads back with Harbor's field names.
    let on_disk: serde_json::Value = serde_json::from_str(&ran.file("result.json")).unwrap();
    assert_eq!(on_disk["step_results"][1]["step_name"], "two");
    assert_eq!(
        on_disk["step_results"][1]["verifier_result"]["rewards"]["reward"],
        1.0
    );
    let log = ran.file("trial.log");
    assert!(log.contains("step 2/2: two started"), "{log}");
}

#[tokio::test]
async fn a_step_below_its_min_reward_stops_the_trial_and_later_steps_do_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = two_step_task(dir.path(), "", &[]);
    let ran = run_one(dir, dataset, "nop").await;
    assert_eq!(ran.step_rewards(), [("one".into(), Some(0.0))]);
    assert_eq!(
        ran.result.reward(),
        Some(0.0),
        "the mean over the steps that ran"
    );
    assert_eq!(
        ran.result.exception_info, None,
        "a missed gate is not an error"
    );
    assert!(!ran.trial_dir.join("steps/two").exists());
    assert!(
        ran.file("trial.log")
            .contains("reward=0 below min_reward 1")
    );
    assert_eq!(ran.started_and_removed, (1, 1));
}

#[tokio::test]
async fn without_a_gate_every_step_runs_and_the_rewards_are_averaged_or_the_last_taken() {
    // Step one's solution is broken (reward 0); nothing gates it.
    let broken = [("steps/one/solution/solve.sh", "#!/bin/bash\ntrue\n")];
    for (strategy, want) in [("", 0.5), ("multi_step_reward_strategy = \"final\"\n", 1.0)] {
        let dir = tempfile::tempdir().unwrap();
        let toml = TWO_STEPS.replace("min_reward = 1.0\n", "");
        let dataset = {
            let root = dir.path();
            let mut fixture = TaskFixture::new("test/steps")
                .file(
                    "task.toml",
                    &task_toml("test/steps", &format!("{strategy}{toml}")),
                )
                .file("steps/one/instruction.md", "Make one.\n")
                .file("steps/two/instruction.md", "Make two.\n")
                .file(
                    "steps/one/tests/test.sh",
                    &reward_if("[ -f /workspace/one ]"),
                )
                .file(
                    "steps/two/tests/test.sh",
                    &reward_if("[ -f /workspace/two ]"),
                )
                .file(
                    "steps/two/solution/solve.sh",
                    "#!/bin/bash\nmkdir -p /workspace && echo two > /workspace/two\n",
                );
            for (path, text) in broken {
                fixture = fixture.file(path, text);
            }
            fixture.write(&root.join("dataset/steps"));
            Dataset::load(&root.join("dataset")).unwrap()
        };
        let ran = run_one(dir, dataset, "oracle").await;
        assert_eq!(
            ran.step_rewards(),
            [("one".into(), Some(0.0)), ("two".into(), Some(1.0))]
        );
        assert_eq!(ran.result.reward(), Some(want), "strategy {strategy:?}");
    }
}

#[tokio::test]
async fn a_steps_workdir_is_uploaded_and_its_setup_sh_runs_before_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let extra = [
        ("steps/two/workdir/input.txt", "given\n"),
        (
            "steps/two/workdir/setup.sh",
            "#!/bin/bash\ncp \"$(dirname \"$0\")/input.txt\" /workspace/prepared\n",
        ),
        (
            "steps/two/tests/test.sh",
            &reward_if("[ -f /workspace/two ] && [ \"$(cat /workspace/prepared)\" = given ]"),
        ),
    ];
    // The fake sandbox's working directory is `/`, so the workdir lands there.
    let dataset = two_step_task(dir.path(), "", &extra);
    let ran = run_one(dir, dataset, "oracle").await;
    assert_eq!(
        ran.step_rewards(),
        [("one".into(), Some(1.0)), ("two".into(), Some(1.0))],
        "{:?}",
        ran.result.step_results
    );
}

#[tokio::test]
async fn a_failing_setup_sh_fails_its_step_and_the_trial_as_the_agents_step_setup_error() {
    let dir = tempfile::tempdir().unwrap();
    let extra = [(
        "steps/one/workdir/setup.sh",
        "#!/bin/bash\necho broken >&2\nexit 3\n",
    )];
    let dataset = two_step_task(dir.path(), "", &extra);
    let ran = run_one(dir, dataset, "oracle").await;
    let steps = ran.result.step_results.as_ref().unwrap();
    assert_eq!(steps.len(), 1, "step two never runs");
    let info = steps[0]
        .exception_info
        .as_ref()
        .expect("the step's failure");
    // Harbor's RuntimeError was read as an infrastructure error (retried, then missing data):
    // the container the setup runs in is the one the agent has had, so it is the agent's.
    assert_eq!(info.exception_type, ExceptionType::StepSetupError);
    assert!(
        info.exception_message
            .contains("Step 'one' setup.sh exited with code 3: broken"),
        "{}",
        info.exception_message
    );
    assert!(steps[0].agent_execution.is_none(), "the agent did not run");
    let trial = ran.result.exception_info.as_ref().expect("the trial's too");
    assert_eq!(trial.exception_type, info.exception_type);
    assert_eq!(ran.result.reward(), None);
    assert_eq!(ran.result.outcome(), tasks::TrialOutcome::AgentError);
    assert_eq!(ran.started_and_removed, (1, 1));
}

#[tokio::test]
async fn declared_artifacts_are_collected_after_the_agent_with_harbors_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let toml = "artifacts = [\"/workspace/out.txt\", \"/workspace/missing.txt\", \
                { source = \"/workspace/logs\", destination = \"kept/logs\", exclude = [\"*.tmp\"] }, \
                { source = \"/workspace/tree\" }]\n";
    TaskFixture::new("test/artifacts")
        .file("task.toml", &task_toml("test/artifacts", toml))
        .file(
            "solution/solve.sh",
            "#!/bin/bash\nmkdir -p /workspace/logs /workspace/tree/sub\n\
             echo result > /workspace/out.txt\necho keep > /workspace/logs/a.log\n\
             echo drop > /workspace/logs/b.tmp\necho leaf > /workspace/tree/sub/leaf.txt\n",
        )
        .test_sh("rm -f /workspace/out.txt; echo 1 > /logs/verifier/reward.txt")
        .write(&dir.path().join("dataset/artifacts"));
    let dataset = Dataset::load(&dir.path().join("dataset")).unwrap();
    let ran = run_one(dir, dataset, "oracle").await;
    assert_eq!(ran.result.reward(), Some(1.0));
    assert_eq!(
        ran.file("artifacts/out.txt"),
        "result\n",
        "collected before the tests removed it"
    );
    assert_eq!(ran.file("artifacts/kept/logs/a.log"), "keep\n");
    assert!(
        !ran.trial_dir.join("artifacts/kept/logs/b.tmp").exists(),
        "excluded"
    );
    assert_eq!(ran.file("artifacts/tree/sub/leaf.txt"), "leaf\n");
    assert_eq!(
        artifact_manifest(&ran.trial_dir.join("artifacts")),
        [
            ["/logs/artifacts", "artifacts", "directory", "empty"],
            ["/workspace/out.txt", "artifacts/out.txt", "file", "ok"],
            [
                "/workspace/missing.txt",
                "artifacts/missing.txt",
                "file",
                "failed"
            ],
            ["/workspace/logs", "artifacts/kept/logs", "directory", "ok"],
            ["/workspace/tree", "artifacts/tree", "directory", "ok"],
        ]
    );
    assert!(
        ran.file("trial.log")
            .contains("artifact /workspace/missing.txt not collected")
    );
}
