//! The floor benchmark: what a trial costs beyond the commands it must run, against what the
//! Docker engine itself costs for one container, measured in one run with the samples
//! interleaved so machine load affects all of them alike.
//!
//! (a) bollard alone: create + start + one exec (`true`) + remove of the examples' task image,
//!     with the runner's container settings (init, `sleep infinity`) and none of its logic;
//! (b) a runner trial of `bench/floor-task` (the `nop` agent, a verifier that writes a reward);
//! (c) the oracle on `tasks/examples`.
//!
//! For (b) and (c) the figure is the trial's own overhead line in `trial.log` (wall time minus
//! time inside the agent's and verifier's commands, `FinishedTrial::in_container`); the ratio
//! is against (a)'s median wall time. Run through `bench/floor.sh` (which builds the release
//! runner) or `cargo bench -p docker-backend --bench floor` with `RUNNER_BIN` set.
//!
//! Environment: `FLOOR_ROUNDS` (default 5), `RUNNER_BIN` (default `target/release/runner`),
//! `FLOOR_SKIP_EXAMPLES=1` to leave (c) out.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};
use futures_util::StreamExt;

/// One sample of (a), by step.
#[derive(Debug, Clone, Copy, Default)]
struct FloorSample {
    create: f64,
    start: f64,
    exec: f64,
    remove: f64,
}

impl FloorSample {
    fn total(&self) -> f64 {
        self.create + self.start + self.exec + self.remove
    }
}

/// One trial's figures from its `trial.log`.
#[derive(Debug, Clone, Default)]
struct TrialSample {
    wall: f64,
    in_container: f64,
    overhead: f64,
    phases: BTreeMap<String, f64>,
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().expect("the workspace root exists");
    let rounds: usize = std::env::var("FLOOR_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let runner = std::env::var_os("RUNNER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/runner"));
    assert!(
        runner.is_file(),
        "{} is missing: build it with `cargo build --release -p runner` or set RUNNER_BIN",
        runner.display()
    );
    let with_examples = std::env::var("FLOOR_SKIP_EXAMPLES").as_deref() != Ok("1");
    let jobs = tempfile::Builder::new()
        .prefix("runner-floor-")
        .tempdir()
        .expect("a temporary jobs directory");
    let floor_task = root.join("bench/floor-task");
    let examples = root.join("tasks/examples");

    // Warm-up: builds (or finds) the images, so the timed samples measure trials only.
    let warm = run_job(&runner, &floor_task, "nop", jobs.path(), "warm-floor");
    assert!(!warm.is_empty(), "the warm-up trial did not run");
    if with_examples {
        run_job(&runner, &examples, "nop", jobs.path(), "warm-examples");
    }
    let image = image_of(&jobs.path().join("warm-floor"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let docker = Docker::connect_with_defaults().expect("a Docker engine");
    let bench_id = format!("floor-{}", std::process::id());
    // One untimed floor sample first, so the engine's caches are as warm for (a) as for (b).
    rt.block_on(floor_once(&docker, &image, &bench_id, 0));

    let mut floor = Vec::new();
    let mut nop = Vec::new();
    let mut oracle = Vec::new();
    let started = Instant::now();
    for round in 0..rounds {
        for half in 0..2 {
            floor.push(rt.block_on(floor_once(&docker, &image, &bench_id, 2 * round + half + 1)));
            let name = format!("nop-{round}-{half}");
            nop.extend(run_job(&runner, &floor_task, "nop", jobs.path(), &name));
        }
        if with_examples {
            let name = format!("oracle-{round}");
            oracle.extend(run_job(&runner, &examples, "oracle", jobs.path(), &name));
        }
    }
    let took = started.elapsed();
    report(&floor, &nop, &oracle, rounds, took, &image);
}

/// Runs one job with `agent` on `path` (k=1, one trial at a time) and returns its trials'
/// figures.
fn run_job(runner: &Path, path: &Path, agent: &str, jobs: &Path, name: &str) -> Vec<TrialSample> {
    let status = Command::new(runner)
        .args(["run", "--path"])
        .arg(path)
        .args(["--agent", agent, "--k", "1", "--n-concurrent", "1"])
        .arg("--jobs-dir")
        .arg(jobs)
        .args(["--job-name", name, "--max-retries", "0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the runner starts");
    // A trial that scores 0 (or an agent timeout) exits non-zero; the figures still count.
    let _ = status;
    trial_samples(&jobs.join(name))
}

/// Every trial's figures in a job directory.
fn trial_samples(job: &Path) -> Vec<TrialSample> {
    let mut samples = Vec::new();
    let Ok(entries) = std::fs::read_dir(job) else {
        return samples;
    };
    for entry in entries.flatten() {
        let Ok(log) = std::fs::read_to_string(entry.path().join("trial.log")) else {
            continue;
        };
        if let Some(sample) = parse_trial_log(&log) {
            samples.push(sample);
        }
    }
    samples
}

/// The `overhead:` line and the `phase: … finished in …s` lines of a trial.log.
fn parse_trial_log(log: &str) -> Option<TrialSample> {
    let mut sample = TrialSample::default();
    let mut found = false;
    for line in log.lines() {
        if let Some(rest) = line.split("overhead: wall ").nth(1) {
            let numbers: Vec<f64> = rest
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .filter_map(|t| t.parse().ok())
                .collect();
            if let [wall, inside, overhead, ..] = numbers[..] {
                sample.wall = wall;
                sample.in_container = inside;
                sample.overhead = overhead;
                found = true;
            }
        } else if let Some(rest) = line.split("phase: ").nth(1)
            && let Some((phase, took)) = rest.split_once(" finished in ")
            && let Ok(seconds) = took.trim_end_matches('s').parse::<f64>()
        {
            *sample.phases.entry(phase.to_owned()).or_default() += seconds;
        }
    }
    found.then_some(sample)
}

/// The image the warm-up trial ran in (lock.json records it).
fn image_of(job: &Path) -> String {
    let text = std::fs::read_to_string(job.join("lock.json")).expect("the warm-up wrote lock.json");
    let lock: serde_json::Value = serde_json::from_str(&text).expect("lock.json is JSON");
    lock["trials"][0]["task"]["image_id"]
        .as_str()
        .expect("lock.json names the image")
        .to_owned()
}

/// (a): create, start, one exec, remove, each timed, with no runner logic in between.
async fn floor_once(docker: &Docker, image: &str, bench_id: &str, n: usize) -> FloorSample {
    let labels = HashMap::from([
        ("runner.managed".to_owned(), "1".to_owned()),
        ("runner.job".to_owned(), bench_id.to_owned()),
    ]);
    let body = ContainerCreateBody {
        image: Some(image.to_owned()),
        cmd: Some(vec!["sh".into(), "-c".into(), "sleep infinity".into()]),
        labels: Some(labels),
        host_config: Some(HostConfig {
            init: Some(true),
            network_mode: Some("bridge".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let name = format!("runner-{bench_id}-{n}");
    let options = CreateContainerOptionsBuilder::default().name(&name).build();
    let mut sample = FloorSample::default();
    let t = Instant::now();
    let id = docker
        .create_container(Some(options), body)
        .await
        .expect("create")
        .id;
    sample.create = t.elapsed().as_secs_f64();
    let t = Instant::now();
    docker.start_container(&id, None).await.expect("start");
    sample.start = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let exec = docker
        .create_exec(
            &id,
            CreateExecOptions {
                cmd: Some(vec!["true".to_owned()]),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                ..Default::default()
            },
        )
        .await
        .expect("create exec")
        .id;
    if let StartExecResults::Attached { mut output, .. } =
        docker.start_exec(&exec, None).await.expect("start exec")
    {
        while output.next().await.is_some() {}
    }
    let code = docker
        .inspect_exec(&exec)
        .await
        .expect("inspect exec")
        .exit_code;
    assert_eq!(code, Some(0), "`true` succeeds");
    sample.exec = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let remove = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    docker
        .remove_container(&id, Some(remove))
        .await
        .expect("remove");
    sample.remove = t.elapsed().as_secs_f64();
    sample
}

/// Median, minimum and maximum.
fn spread(values: &[f64]) -> (f64, f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    (median, sorted[0], sorted[n - 1])
}

fn line(label: &str, values: &[f64]) -> f64 {
    let (median, min, max) = spread(values);
    println!(
        "  {label:<34} median {median:.3}s  min {min:.3}s  max {max:.3}s  (n={})",
        values.len()
    );
    median
}

fn report(
    floor: &[FloorSample],
    nop: &[TrialSample],
    oracle: &[TrialSample],
    rounds: usize,
    took: Duration,
    image: &str,
) {
    println!(
        "floor benchmark: {rounds} rounds in {:.1}s, image {image}, load average {}",
        took.as_secs_f64(),
        testkit::load_average()
    );
    println!("(a) bollard create + start + exec + remove, no runner logic");
    let pick = |f: fn(&FloorSample) -> f64| floor.iter().map(f).collect::<Vec<_>>();
    line("create", &pick(|s| s.create));
    line("start", &pick(|s| s.start));
    line("exec `true`", &pick(|s| s.exec));
    line("remove", &pick(|s| s.remove));
    let floor_median = line("total (the floor)", &pick(FloorSample::total));
    for (label, samples) in [
        ("(b) nop trial, trivial verifier", nop),
        ("(c) oracle on tasks/examples", oracle),
    ] {
        if samples.is_empty() {
            continue;
        }
        println!("{label}");
        line("wall", &samples.iter().map(|s| s.wall).collect::<Vec<_>>());
        line(
            "in-container",
            &samples.iter().map(|s| s.in_container).collect::<Vec<_>>(),
        );
        let mut phases: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for sample in samples {
            for (phase, seconds) in &sample.phases {
                phases.entry(phase).or_default().push(*seconds);
            }
        }
        for (phase, values) in &phases {
            line(&format!("phase {phase}"), values);
        }
        let overhead = line(
            "overhead (wall - in-container)",
            &samples.iter().map(|s| s.overhead).collect::<Vec<_>>(),
        );
        println!(
            "  overhead / floor: {:.2}x",
            overhead / floor_median.max(f64::MIN_POSITIVE)
        );
    }
}
