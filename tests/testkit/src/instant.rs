//! [`InstantBackend`]: a backend whose every operation takes no time and touches nothing, so
//! what a job costs with it is the engine's own cost (planning, scheduling, the trial state
//! machine, the job directory). Its verifier "runs" isolated and writes a reward of 1, so every
//! trial is scored the way a real one is. [`run_instant_job`] runs a whole job on it, for the
//! scale test and the scale benchmark.

use std::path::{Path, PathBuf};
use std::time::Duration;

use adapter::AnyAgent;
use engine::job::{JobOutcome, plan_job, run_job};
use engine::{
    Backend, BackendError, Environment, EnvironmentSpec, ImageInfo, ImageOrigin, OutputSink,
};
use tasks::isolation::{IsolatedRun, IsolatedVerifyOutcome, IsolatedVerifyRequest};
use tasks::{Dataset, ExecOutput, ExecRequest, Sandbox, SandboxError, Task};
use tokio_util::sync::CancellationToken;

use crate::TaskFixture;

/// The backend (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct InstantBackend;

/// One instant environment.
pub struct InstantEnvironment {
    sandbox: InstantSandbox,
}

/// A sandbox in which every command succeeds at once with no output.
#[derive(Debug, Clone, Copy, Default)]
pub struct InstantSandbox;

impl Backend for InstantBackend {
    type Environment = InstantEnvironment;

    async fn prepare_image(
        &self,
        task: &Task,
        _image: &engine::ImageRequest,
        _log: &OutputSink,
    ) -> Result<ImageInfo, BackendError> {
        Ok(ImageInfo::new(
            format!("instant/{}:latest", task.short_name()),
            "sha256:instant",
            ImageOrigin::Reused,
        ))
    }

    async fn start_environment(
        &self,
        _spec: &EnvironmentSpec,
    ) -> Result<InstantEnvironment, BackendError> {
        Ok(InstantEnvironment {
            sandbox: InstantSandbox,
        })
    }

    async fn remove_job(&self, _job_id: &str) -> Result<usize, BackendError> {
        Ok(0)
    }
}

impl Environment for InstantEnvironment {
    type Sandbox = InstantSandbox;

    fn main(&self) -> &InstantSandbox {
        &self.sandbox
    }

    fn describe(&self) -> String {
        "instant environment".into()
    }

    async fn remove(self) -> Result<(), BackendError> {
        Ok(())
    }
}

impl Sandbox for InstantSandbox {
    async fn exec(&self, _request: ExecRequest) -> Result<ExecOutput, SandboxError> {
        Ok(ExecOutput {
            exit_code: Some(0),
            ..ExecOutput::default()
        })
    }

    async fn upload_dir(&self, _source: &Path, _target: &str) -> Result<(), SandboxError> {
        Ok(())
    }

    async fn upload_bytes(
        &self,
        _bytes: Vec<u8>,
        _target: &str,
        _mode: u32,
    ) -> Result<(), SandboxError> {
        Ok(())
    }

    async fn download_dir(&self, _source: &str, _target: &Path) -> Result<(), SandboxError> {
        Ok(())
    }

    async fn verify_isolated(
        &self,
        request: IsolatedVerifyRequest,
    ) -> Result<IsolatedVerifyOutcome, SandboxError> {
        std::fs::write(request.output_dir.join("reward.txt"), "1\n")
            .map_err(|e| SandboxError::new("writing the reward", e))?;
        Ok(IsolatedVerifyOutcome::Ran(IsolatedRun {
            mechanism: "instant".into(),
            exit_code: Some(0),
            ..IsolatedRun::default()
        }))
    }
}

/// A job of `trials` trials of one task (`k = trials`), `n_concurrent` at once, on the
/// instant backend with the `nop` agent, written to `<dir>/jobs/scale`.
pub async fn run_instant_job(dir: &Path, trials: u32, n_concurrent: u32) -> JobOutcome {
    run_instant_job_on(InstantBackend, dir, trials, n_concurrent).await
}

/// [`run_instant_job`] on `backend` (a pool of instant engines, for the pool's benchmark).
pub async fn run_instant_job_on<B: Backend>(
    backend: B,
    dir: &Path,
    trials: u32,
    n_concurrent: u32,
) -> JobOutcome {
    let dataset_dir = dir.join("dataset");
    TaskFixture::new("scale/instant")
        .test_sh("echo 1 > /logs/verifier/reward.txt")
        .write(&dataset_dir.join("instant"));
    let dataset = Dataset::load(&dataset_dir).expect("the scale dataset loads");
    let agent = AnyAgent::builtin("nop").expect("nop is built in");
    let settings = {
        let mut settings = crate::job_settings(dir, "scale", &agent, trials);
        settings.n_concurrent = n_concurrent;
        settings.watchdog_grace = Duration::from_secs(120);
        settings.invocation = vec!["scale".into()];
        settings
    };
    let plan = plan_job(&dataset, &settings);
    run_job(
        backend,
        agent,
        plan,
        job_dir(dir),
        &settings,
        CancellationToken::new(),
        |_| {},
    )
    .await
    .expect("the job directory is written")
}

/// A temp dir for [`run_instant_job`]: on tmpfs (`/dev/shm`) when the machine has one, else
/// under `$TMPDIR`. The scale and memory tests check what is recorded and what is kept in
/// memory, not durability; on a disk each trial's fsyncs (its records and their directory
/// entries, ~8 ms a trial on a VM's ext4) would make a 10,000-trial job take 90 s instead of 10.
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("a temp dir")
}

/// Where [`run_instant_job`] writes its job.
pub fn job_dir(dir: &Path) -> PathBuf {
    dir.join("jobs/scale")
}
