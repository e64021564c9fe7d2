//! The seam between the engine and whatever runs environments: images, services, sandboxes.
//!
//! An *environment* is everything one trial runs in: a main service (the agent's container)
//! and possibly sidecars (docker-compose services) or, later, a separate verifier service.
//! The engine never names a container or an engine API; it asks a [`Backend`] for an image,
//! then for an environment built from an [`EnvironmentSpec`], drives the main service through
//! [`tasks::Sandbox`], and finally removes the environment.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tasks::records::{StorageEnforcement, TrialLimits, TruncatedOutput};
use tasks::{ExceptionType, Sandbox, Task};

use crate::images::ImageRequest;

/// Receives command output as it arrives: (`"stdout"`, `"stderr"` or `"runner"`, bytes).
pub type OutputSink = Arc<dyn Fn(&str, &[u8]) + Send + Sync>;

/// What the engine wants to see of every command a sandbox runs: its output (streamed into
/// `trial.log`), its wall time (to tell the runner's own overhead from time inside the
/// environment), and every file the backend cut at a cap on the way back to the host.
#[derive(Clone)]
pub struct ExecObserver {
    /// Where output goes.
    pub output: OutputSink,
    exec_nanos: Arc<AtomicU64>,
    truncated: Arc<Mutex<Vec<TruncatedOutput>>>,
}

impl ExecObserver {
    /// An observer that streams output to `output` and starts its clock at zero.
    pub fn new(output: OutputSink) -> Self {
        Self {
            output,
            exec_nanos: Arc::new(AtomicU64::new(0)),
            truncated: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Records that `path` (relative to the trial directory) was cut at `cap_bytes`.
    pub fn record_truncation(&self, path: impl Into<String>, cap_bytes: u64) {
        if let Ok(mut list) = self.truncated.lock() {
            list.push(TruncatedOutput {
                path: path.into(),
                cap_bytes,
                cap_entries: None,
            });
        }
    }

    /// Records that the download into `path` (a directory relative to the trial directory)
    /// stopped at the trial's entry cap of `cap_entries`; `cap_bytes` is its byte cap.
    pub fn record_entry_cap(&self, path: impl Into<String>, cap_bytes: u64, cap_entries: u64) {
        if let Ok(mut list) = self.truncated.lock() {
            list.push(TruncatedOutput {
                path: path.into(),
                cap_bytes,
                cap_entries: Some(cap_entries),
            });
        }
    }

    /// Every truncation recorded so far.
    pub fn truncations(&self) -> Vec<TruncatedOutput> {
        self.truncated.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Adds one command's wall time.
    pub fn add_exec_time(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.exec_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Total time spent inside commands so far.
    pub fn exec_time(&self) -> Duration {
        Duration::from_nanos(self.exec_nanos.load(Ordering::Relaxed))
    }
}

/// The state of a running environment's main service (see [`Environment::main_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceState {
    /// It runs.
    Running,
    /// It stopped: its PID 1 exited with `exit_code`; `oom_killed` when its memory limit
    /// killed it.
    Stopped {
        /// The exit code its engine reports.
        exit_code: i64,
        /// True when the kernel's OOM killer ended it.
        oom_killed: bool,
    },
    /// It no longer exists (removed by someone else than the trial).
    Gone,
}

/// How a task's image came to be available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageOrigin {
    /// Built by this job.
    Built,
    /// Pulled from a registry by this job.
    Pulled,
    /// Found already present (a previous build of the same content, or a prebuilt image
    /// pulled or imported before the job).
    Reused,
}

impl ImageOrigin {
    /// `built`, `pulled` or `reused`, as records and the live view say it.
    pub fn as_str(self) -> &'static str {
        match self {
            ImageOrigin::Built => "built",
            ImageOrigin::Pulled => "pulled",
            ImageOrigin::Reused => "reused",
        }
    }

    /// The same, as lock.json records it.
    pub fn lock_origin(self) -> tasks::records::LockImageOrigin {
        use tasks::records::LockImageOrigin as Lock;
        match self {
            ImageOrigin::Built => Lock::Built,
            ImageOrigin::Pulled => Lock::Pulled,
            ImageOrigin::Reused => Lock::Reused,
        }
    }
}

/// The image a task's trials run in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// The reference trials start from (a content-addressed tag, or the task's `docker_image`).
    pub tag: String,
    /// The backend's immutable id for it (for Docker, `sha256:…`).
    pub id: String,
    /// Whether this job built it, pulled it, or found it.
    pub origin: ImageOrigin,
    /// Registry digests of the image (`repository@sha256:…`); empty for local builds.
    pub repo_digests: Vec<String>,
    /// The engine that holds the image and its version (`docker 20.10.24`), when known.
    pub engine_version: Option<String>,
    /// The image's size in bytes, when the backend knows it.
    pub size_bytes: Option<u64>,
}

impl ImageInfo {
    /// An image known only by tag, id and origin (no digests, engine or size).
    pub fn new(tag: impl Into<String>, id: impl Into<String>, origin: ImageOrigin) -> Self {
        Self {
            tag: tag.into(),
            id: id.into(),
            origin,
            repo_digests: Vec::new(),
            engine_version: None,
            size_bytes: None,
        }
    }

    /// The record lock.json keeps of it.
    pub fn lock_image(&self) -> tasks::records::LockImage {
        tasks::records::LockImage {
            reference: self.tag.clone(),
            id: self.id.clone(),
            repo_digests: self.repo_digests.clone(),
            origin: self.origin.lock_origin(),
            engine_version: self.engine_version.clone(),
        }
    }
}

/// The stream name of image-preparation progress (`pulling x: 3/7 layers, 120/300 MB`): a
/// backend writes such lines to the `log` of [`Backend::prepare_image`] on this stream, and the
/// engine turns each into an `ImageProgress` event for the live view instead of logging it
/// (the backend logs the outcome: what was pulled or built, how much, how long).
pub const IMAGE_PROGRESS_STREAM: &str = "progress";

/// Whether a service can reach networks beyond its own environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkAccess {
    /// Outbound network allowed.
    Public,
    /// No network at all (loopback only).
    None,
}

/// One service of an environment.
#[derive(Debug, Clone)]
pub struct ServiceSpec {
    /// The service's name within the environment (`main` for the agent's service).
    pub name: String,
    /// The image to run ([`ImageInfo::id`]).
    pub image: String,
    /// CPU limit in cores.
    pub cpus: Option<f64>,
    /// Memory limit in MB.
    pub memory_mb: Option<u64>,
    /// Network access.
    pub network: NetworkAccess,
    /// Default working directory of commands.
    pub workdir: Option<String>,
    /// Environment of every command in the service.
    pub env: BTreeMap<String, String>,
    /// Host directories mounted into the service (the LLM bridge's socket directory).
    pub mounts: Vec<BindMount>,
    /// Directories that must exist, writable by every user, before the environment's start
    /// returns (the main service's `/logs/*`), and before the service's own command runs
    /// when it has one (Harbor's are mounts, there from the start). A backend makes them as
    /// part of the start, without a command inside the service where it can (Docker: one
    /// upload right after the container starts, or before when it runs a command of its own).
    pub writable_dirs: Vec<String>,
}

/// A host directory mounted into a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    /// The directory on the host (the engine's host: the Docker engine must see the same path).
    pub host: std::path::PathBuf,
    /// Where it appears in the service.
    pub container: String,
    /// Mounted read-only.
    pub read_only: bool,
    /// The tests' egress directory (the proxy's tests-side socket and the relay): mounted
    /// only where the tests run isolated (Docker: the verifier jail, whose helper starts the
    /// relay from it), never into the service, so no process of the agent can reach it.
    pub tests_egress: bool,
}

/// Everything a backend needs to start one trial's environment.
#[derive(Clone)]
pub struct EnvironmentSpec {
    /// The job's id (backends label what they create with it, so a sweep finds leftovers).
    pub job_id: String,
    /// The trial's name.
    pub trial_name: String,
    /// The task's name.
    pub task_name: String,
    /// The agent's service.
    pub main: ServiceSpec,
    /// Other services (docker-compose sidecars). A backend that cannot run them refuses the
    /// spec with [`BackendErrorKind::Unsupported`] rather than start half an environment.
    pub sidecars: Vec<ServiceSpec>,
    /// Sees every command the environment's sandboxes run.
    pub observer: ExecObserver,
    /// The trial's limits: pids, memory and swap, storage, caps on downloads.
    pub limits: TrialLimits,
    /// True when the engine will change the main service's network between phases
    /// ([`Environment::set_network`]): the backend must start it so that its network can be
    /// switched (on Docker: attached, then disconnected before start when `main.network` is
    /// [`NetworkAccess::None`]).
    pub network_switchable: bool,
    /// The task whose `environment/docker-compose.yaml`, when it has one, defines the
    /// environment's other services (sidecars; see `runner/docker-backend/src/compose/`). `None` for
    /// environments without a compose file of their own (the separate verifier's).
    pub compose_task: Option<Arc<Task>>,
    /// The trial's directory on the host (sidecar logs go to `<trial>/sidecars/`).
    pub trial_dir: PathBuf,
    /// GPUs the task asks for (`[environment] gpus`); a backend without GPUs refuses the
    /// spec with [`BackendErrorKind::Unsupported`] naming the task and the field.
    pub gpus: u32,
    /// The tests the first isolated verification will run, when known at the start: a
    /// backend that prepares its verifier isolation early may put them there while the agent
    /// runs, where no process of the environment can reach them (Docker's jail root).
    pub first_tests: Option<PathBuf>,
}

/// What a backend failure was, so the engine can name it with Harbor's exception types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendErrorKind {
    /// The backend is not reachable at all.
    Unreachable,
    /// An image could not be built.
    Build,
    /// An image is not available and cannot be obtained.
    ImageMissing,
    /// A prebuilt image could not be pulled (after the backend's retries).
    Pull,
    /// Too little free disk space to build or pull.
    DiskSpace,
    /// An environment could not be created or started.
    Start,
    /// The spec asks for something this backend does not do.
    Unsupported,
    /// Any other backend call failed (exec, transfer, removal).
    Operation,
}

/// A backend failure: its kind and a message that says what was being done.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct BackendError {
    /// What failed.
    pub kind: BackendErrorKind,
    /// What was being done and what the backend answered.
    pub message: String,
}

impl BackendError {
    /// A new error.
    pub fn new(kind: BackendErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// The exception type a trial records when this error ends it.
    pub fn exception_type(&self) -> ExceptionType {
        match self.kind {
            BackendErrorKind::Build | BackendErrorKind::ImageMissing => {
                ExceptionType::SandboxBuildFailedError
            }
            BackendErrorKind::Pull => ExceptionType::ImagePullError,
            BackendErrorKind::DiskSpace => ExceptionType::DiskSpaceError,
            BackendErrorKind::Unreachable
            | BackendErrorKind::Start
            | BackendErrorKind::Unsupported => ExceptionType::EnvironmentStartError,
            BackendErrorKind::Operation => ExceptionType::EnvironmentError,
        }
    }
}

/// What a separate verifier's image is made from (Harbor's verifier environment: its
/// `environment_dir` and `task_env_config`).
#[derive(Debug, Clone)]
pub struct VerifierImage {
    /// The verifier environment's `docker_image`; preferred over a build when set.
    pub docker_image: Option<String>,
    /// The build context: a step's `steps/<name>/tests/` when it exists, else `tests/`.
    pub context: PathBuf,
    /// The name a build is tagged with (`<task>-verifier`, `<task>-verifier-<step>`).
    pub name: String,
}

/// Runs environments. Docker is one implementation; a Kubernetes one would map an environment
/// to a pod (see ARCHITECTURE.md).
pub trait Backend: Send + Sync + 'static {
    /// A started environment.
    type Environment: Environment;

    /// Makes the image of `task` available from where the engine resolved it
    /// (`image.source`, by Harbor's precedence: [`crate::images::image_source`]): the prebuilt
    /// `docker_image` (pulled when absent), or a build of `environment/` (reused when the same
    /// content was built before, unless `image.force_build`). A backend may refine the source
    /// by the task's own files (Docker: a compose file's `services.main`), never recompute it.
    /// Called once per task per job; build output goes to `log`, progress lines on
    /// [`IMAGE_PROGRESS_STREAM`].
    fn prepare_image(
        &self,
        task: &Task,
        image: &ImageRequest,
        log: &OutputSink,
    ) -> impl Future<Output = Result<ImageInfo, BackendError>> + Send;

    /// Creates and starts every service of `spec`. On failure nothing of it is left running.
    fn start_environment(
        &self,
        spec: &EnvironmentSpec,
    ) -> impl Future<Output = Result<Self::Environment, BackendError>> + Send;

    /// Starts a separate verifier environment of `task` (`[verifier] environment_mode =
    /// "separate"`, task- or step-level): its image (the verifier environment's
    /// `docker_image`, else a build of `image.context`, as Harbor builds it from the tests
    /// directory), then one container from `spec` (whose `main.image` the backend replaces). Nothing of the
    /// agent's environment is shared with it. Backends that cannot refuse with
    /// [`BackendErrorKind::Unsupported`].
    fn start_verifier_environment(
        &self,
        task: &Task,
        image: &VerifierImage,
        spec: &EnvironmentSpec,
        log: &OutputSink,
    ) -> impl Future<Output = Result<Self::Environment, BackendError>> + Send {
        let _ = (image, spec, log);
        let message = format!(
            "task {}: this backend cannot run a separate verifier environment ([verifier] environment_mode = \"separate\")",
            task.name
        );
        async move { Err(BackendError::new(BackendErrorKind::Unsupported, message)) }
    }

    /// Removes everything the backend made for `job_id` (a backstop after teardown and on a
    /// second Ctrl-C). Returns how many objects were removed.
    fn remove_job(&self, job_id: &str) -> impl Future<Output = Result<usize, BackendError>> + Send;

    /// What the engine behind this backend can hold (its CPUs and memory), which
    /// [`crate::pool::EnginePool`] places trials against. Unknown by default.
    fn capacity(&self) -> impl Future<Output = Result<EngineCapacity, BackendError>> + Send {
        async { Ok(EngineCapacity::default()) }
    }

    /// Each task's image on each engine of a pool, as made so far: (task name, engine, image
    /// id), recorded in lock.json's `engine_images` at the job's end. Empty by default.
    fn images_by_engine(&self) -> Vec<(String, String, String)> {
        Vec::new()
    }

    /// Asks whether the engine answers at all (the pool's health probe). `Ok` by default.
    fn ping(&self) -> impl Future<Output = Result<(), BackendError>> + Send {
        async { Ok(()) }
    }
}

/// The sandbox of `B`'s environments (what a trial's or an episode's commands run in).
pub type SandboxOf<B> = <<B as Backend>::Environment as Environment>::Sandbox;

/// One trial's running environment.
pub trait Environment: Send + Sync + 'static {
    /// The sandbox agents and verifiers drive.
    type Sandbox: Sandbox + Clone + 'static;

    /// The main service, where the agent runs and (in the shared mode) the verifier.
    fn main(&self) -> &Self::Sandbox;

    /// A one-line description for `trial.log` (container names and ids).
    fn describe(&self) -> String;

    /// Stops and removes every service; a missing service counts as removed. A backend may
    /// return once the removal is under way, when its `remove_job` waits for it to end.
    fn remove(self) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Switches the main service's network between phases (Harbor's per-phase `network_mode`):
    /// [`NetworkAccess::None`] leaves it loopback only, [`NetworkAccess::Public`] restores the
    /// networks it started with (sidecars included). Only called on environments started
    /// with [`EnvironmentSpec::network_switchable`].
    fn set_network(
        &self,
        access: NetworkAccess,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        let message = format!(
            "{}: this backend cannot change a running environment's network (to {access:?})",
            self.describe()
        );
        async move { Err(BackendError::new(BackendErrorKind::Unsupported, message)) }
    }

    /// The sandbox of the compose service `name` (a sidecar, not `main`), for collect hooks and
    /// artifacts declared with its `service`; `None` when the environment runs no such service.
    /// Its commands run with `sh`, the image's default user and directory, and share the
    /// trial's download budget.
    fn service(&self, name: &str) -> Option<Self::Sandbox> {
        let _ = name;
        None
    }

    /// Freezes (`true`) or thaws (`false`) every process of the main service, so nothing the
    /// agent left running acts while sidecars snapshot their state; the rest of the trial
    /// needs it thawed again.
    fn freeze_main(&self, frozen: bool) -> impl Future<Output = Result<(), BackendError>> + Send {
        let message = format!(
            "{}: this backend cannot freeze the main service (to {})",
            self.describe(),
            if frozen { "freeze" } else { "thaw" }
        );
        async move { Err(BackendError::new(BackendErrorKind::Unsupported, message)) }
    }

    /// What state the main service is in, asked after a failure of the runner's own work to
    /// tell the agent's doing (a container stopped from inside) from the infrastructure's.
    /// `Ok(None)`: this backend cannot tell (nothing is then blamed on the agent through it).
    fn main_state(
        &self,
    ) -> impl Future<Output = Result<Option<ServiceState>, BackendError>> + Send {
        async { Ok(None) }
    }

    /// How the environment enforces the task's `storage_mb` (when it sets one): by a quota of
    /// the storage driver, or not at all, so the engine must watch the sandbox's `disk_usage`.
    fn storage_enforcement(&self) -> StorageEnforcement {
        StorageEnforcement::Watched
    }

    /// The engine the environment runs on, as a pool names it (`unix:///…`, `host:port`;
    /// never credentials), recorded in the trial's `result.json`. `None` outside a pool.
    fn engine(&self) -> Option<&str> {
        None
    }
}

/// What one engine can hold; a field the engine does not report is `None` (no bound).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EngineCapacity {
    /// CPUs the engine's host has.
    pub cpus: Option<f64>,
    /// Memory the engine's host has, in MB.
    pub memory_mb: Option<u64>,
}
