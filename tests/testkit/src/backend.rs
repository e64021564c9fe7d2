//! [`FakeBackend`]: the engine's `Backend` with no Docker, for unit tests of the trial state
//! machine. Each environment is a [`FakeSandbox`]; faults and delays are injected per call, and
//! every start and removal is counted so tests can check that nothing is left behind.
//!
//! What an agent can do to its own container is modelled by marker files a command creates
//! in the sandbox: [`STOPPED_MARKER`] stands for a PID 1 ended from inside (`kill 1`), and
//! [`BROKEN_SHELL_MARKER`] for a `bash` deleted or made `chmod 000`. From then on the fake
//! answers as the Docker engine does: execs into a stopped container are refused, execs
//! through a broken shell exit 126 with the runtime's message, and the main service's state
//! says so; uploads, downloads and network switches still work (Docker's do on a stopped
//! container).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine::{
    Backend, BackendError, BackendErrorKind, Environment, EnvironmentSpec, ImageInfo, ImageOrigin,
    NetworkAccess, OutputSink, ServiceState,
};
use tasks::isolation::IsolatedVerifyOutcome;
use tasks::{ExecOutput, ExecRequest, SandboxError, Task};

use crate::FakeSandbox;

/// What the fake backend does on each call; a fault is used once, by the next call.
#[derive(Debug, Default)]
pub struct Script {
    /// Errors the next `prepare_image` calls return, in order.
    pub image_faults: VecDeque<BackendError>,
    /// Errors the next `start_environment` calls return, in order.
    pub start_faults: VecDeque<BackendError>,
    /// How long every `prepare_image` takes.
    pub image_delay: Duration,
    /// How long every `start_environment` takes.
    pub start_delay: Duration,
    /// The next `start_environment` panics (a stand-in for a runner bug).
    pub panic_on_start: bool,
    /// Downloads of this container directory never return (an engine that stops answering).
    pub hang_download_of: Option<String>,
    /// What every isolated verification answers; `None` is the fake's "cannot isolate", so
    /// the verifier runs the tests by plain exec.
    pub isolated_outcome: Option<IsolatedVerifyOutcome>,
    /// The first exec whose command contains this text fails as an engine error would (once).
    pub exec_fault_once: Option<String>,
    /// The engine does not answer a ping (a pool drains it).
    pub unreachable: bool,
    /// What the engine says it can hold.
    pub capacity: engine::EngineCapacity,
    /// Every `start_environment` waits here until the gate opens (see [`StartGate`]).
    pub start_gate: Option<StartGate>,
}

/// Holds each start until `n` starts, over every backend sharing the gate, have arrived, so
/// a test has that many environments starting at once by event, not by a delay. Past
/// [`StartGate::DEADLINE`] a start goes on alone: a scheduler that never sends the `n`th
/// start then fails the test's assertions instead of hanging it.
#[derive(Debug, Clone)]
pub struct StartGate {
    arrived: Arc<tokio::sync::watch::Sender<usize>>,
    n: usize,
}

impl StartGate {
    /// How long a start waits for the others at most; generous, as it is reached only when
    /// the behaviour under test is broken.
    pub const DEADLINE: Duration = Duration::from_secs(60);

    /// A gate that opens once `n` starts have arrived.
    pub fn new(n: usize) -> Self {
        Self {
            arrived: Arc::new(tokio::sync::watch::channel(0).0),
            n,
        }
    }

    async fn pass(&self) {
        let mut arrived = self.arrived.subscribe();
        self.arrived.send_modify(|count| *count += 1);
        let open = arrived.wait_for(|count| *count >= self.n);
        let _ = tokio::time::timeout(Self::DEADLINE, open).await;
    }
}

/// A command that creates this file in the sandbox has stopped the container's PID 1.
pub const STOPPED_MARKER: &str = "/.fake-container-stopped";
/// A command that creates this file in the sandbox has made its `bash` unusable.
pub const BROKEN_SHELL_MARKER: &str = "/.fake-shell-broken";

/// What happened, for assertions.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// `prepare_image` calls.
    pub images_prepared: usize,
    /// Environments started, by trial name.
    pub started: Vec<String>,
    /// Environments removed, by trial name.
    pub removed: Vec<String>,
    /// `remove_job` sweeps.
    pub sweeps: usize,
}

#[derive(Debug, Default)]
struct State {
    script: Script,
    tally: Tally,
}

/// A backend whose environments are host directories (see [`FakeSandbox`]).
#[derive(Debug, Clone, Default)]
pub struct FakeBackend {
    state: Arc<Mutex<State>>,
}

impl FakeBackend {
    /// A backend that succeeds at everything at once.
    pub fn new() -> Self {
        Self::default()
    }

    /// Changes what later calls do.
    pub fn script(&self, edit: impl FnOnce(&mut Script)) {
        edit(&mut self.state.lock().expect("not poisoned").script);
    }

    /// What happened so far.
    pub fn tally(&self) -> Tally {
        self.state.lock().expect("not poisoned").tally.clone()
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().expect("not poisoned"))
    }

    /// What the engine answers, instead of running it, to `request` in `sandbox` (one this
    /// backend started): the scripted exec fault, a stopped container's refusal, or a broken
    /// shell's exit 126. `None` when the command runs.
    pub(crate) fn answer_exec(
        &self,
        sandbox: &FakeSandbox,
        request: &ExecRequest,
    ) -> Option<Result<ExecOutput, SandboxError>> {
        let fault = self.with(|s| {
            let matches = (s.script.exec_fault_once.as_deref())
                .is_some_and(|text| request.command.contains(text));
            matches.then(|| s.script.exec_fault_once.take())
        });
        if fault.is_some() {
            return Some(Err(SandboxError::new(
                "exec",
                "error reading from the engine: connection reset by peer",
            )));
        }
        if stopped(sandbox) {
            return Some(Err(SandboxError::new(
                "exec",
                "Error response from daemon: Container fake is not running",
            )));
        }
        if sandbox.path(BROKEN_SHELL_MARKER).exists() {
            return Some(Ok(ExecOutput {
                exit_code: Some(126),
                stdout: "OCI runtime exec failed: exec failed: unable to start container process: \
                         exec: \"bash\": executable file not found in $PATH: unknown\r\n"
                    .into(),
                ..ExecOutput::default()
            }));
        }
        None
    }

    /// Whether a download of the container directory `source` is scripted never to return.
    pub(crate) fn hangs_download_of(&self, source: &str) -> bool {
        self.with(|s| s.script.hang_download_of.as_deref() == Some(source))
    }

    /// What an isolated verification is scripted to answer; `None` for "cannot isolate".
    pub(crate) fn isolated_outcome(&self) -> Option<IsolatedVerifyOutcome> {
        self.with(|s| s.script.isolated_outcome.clone())
    }
}

/// Whether a command stopped the container of `sandbox` (see [`STOPPED_MARKER`]).
fn stopped(sandbox: &FakeSandbox) -> bool {
    sandbox.path(STOPPED_MARKER).exists()
}

/// A failure of `kind`, for scripts.
pub fn fault(kind: BackendErrorKind, message: &str) -> BackendError {
    BackendError::new(kind, message)
}

impl Backend for FakeBackend {
    type Environment = FakeEnvironment;

    async fn prepare_image(
        &self,
        task: &Task,
        _image: &engine::ImageRequest,
        log: &OutputSink,
    ) -> Result<ImageInfo, BackendError> {
        let (delay, fault) = self.with(|s| {
            s.tally.images_prepared += 1;
            (s.script.image_delay, s.script.image_faults.pop_front())
        });
        tokio::time::sleep(delay).await;
        if let Some(fault) = fault {
            return Err(fault);
        }
        log("build", format!("fake build of {}\n", task.name).as_bytes());
        Ok(ImageInfo::new(
            format!("fake/{}:latest", task.short_name()),
            "sha256:fake",
            ImageOrigin::Built,
        ))
    }

    async fn start_environment(
        &self,
        spec: &EnvironmentSpec,
    ) -> Result<FakeEnvironment, BackendError> {
        let (delay, fault, panics, gate) = self.with(|s| {
            let panics = std::mem::take(&mut s.script.panic_on_start);
            (
                s.script.start_delay,
                s.script.start_faults.pop_front(),
                panics,
                s.script.start_gate.clone(),
            )
        });
        if let Some(gate) = gate {
            gate.pass().await;
        }
        tokio::time::sleep(delay).await;
        assert!(!panics, "the fake backend was told to panic");
        if let Some(fault) = fault {
            return Err(fault);
        }
        if !spec.sidecars.is_empty() {
            return Err(fault_unsupported());
        }
        self.with(|s| s.tally.started.push(spec.trial_name.clone()));
        let mut sandbox = FakeSandbox::new().started_by(self.clone(), spec.observer.clone());
        if let Some(workdir) = &spec.main.workdir {
            sandbox = sandbox.with_workdir(workdir.clone());
        }
        Ok(FakeEnvironment {
            backend: self.clone(),
            trial: spec.trial_name.clone(),
            sandbox: Arc::new(sandbox),
        })
    }

    async fn remove_job(&self, _job_id: &str) -> Result<usize, BackendError> {
        self.with(|s| s.tally.sweeps += 1);
        Ok(0)
    }

    async fn capacity(&self) -> Result<engine::EngineCapacity, BackendError> {
        Ok(self.with(|s| s.script.capacity))
    }

    async fn ping(&self) -> Result<(), BackendError> {
        match self.with(|s| s.script.unreachable) {
            true => Err(fault(
                BackendErrorKind::Unreachable,
                "the fake engine is gone",
            )),
            false => Ok(()),
        }
    }
}

fn fault_unsupported() -> BackendError {
    fault(
        BackendErrorKind::Unsupported,
        "the fake backend runs no sidecars",
    )
}

/// One fake environment: its sandbox, and a handle back to the tally for its removal.
pub struct FakeEnvironment {
    backend: FakeBackend,
    trial: String,
    sandbox: Arc<FakeSandbox>,
}

impl Environment for FakeEnvironment {
    type Sandbox = Arc<FakeSandbox>;

    fn main(&self) -> &Arc<FakeSandbox> {
        &self.sandbox
    }

    fn describe(&self) -> String {
        format!("fake environment of {}", self.trial)
    }

    async fn remove(self) -> Result<(), BackendError> {
        self.backend
            .with(|s| s.tally.removed.push(self.trial.clone()));
        Ok(())
    }

    async fn set_network(&self, _access: NetworkAccess) -> Result<(), BackendError> {
        Ok(())
    }

    async fn main_state(&self) -> Result<Option<ServiceState>, BackendError> {
        Ok(Some(if stopped(&self.sandbox) {
            ServiceState::Stopped {
                exit_code: 143,
                oom_killed: false,
            }
        } else {
            ServiceState::Running
        }))
    }
}
