//! The trial engine, as a library over a [`Backend`].
//!
//! A job is planned ([`job::plan_job`]), then its trials are scheduled with bounded
//! concurrency ([`job::run_job`]); each trial is a value ([`trial`]) that goes through Harbor's
//! phases — environment, agent setup, agent run, verification, collection, teardown — each
//! returning `Result<_, TrialFailure>`. Everything the engine asks of the world beyond files
//! goes through the [`Backend`] trait (Docker is one implementation, a fake one drives the unit
//! tests). Progress is reported as [`events::Event`]s; the job directory is written by the
//! engine itself.

pub mod backend;
pub mod context;
pub mod error_overrides;
pub mod event_text;
pub mod events;
pub mod failure;
pub mod image_cache;
pub mod images;
pub mod job;
pub mod limits;
pub mod model_bridge;
pub mod pause;
pub mod phases;
pub mod pool;
pub mod timeouts;
pub mod trial;

pub use backend::{
    Backend, BackendError, BackendErrorKind, BindMount, EngineCapacity, Environment,
    EnvironmentSpec, ExecObserver, IMAGE_PROGRESS_STREAM, ImageInfo, ImageOrigin, NetworkAccess,
    OutputSink, SandboxOf, ServiceSpec, ServiceState, VerifierImage,
};
pub use failure::TrialFailure;
pub use images::{ImageRequest, ImageSource, image_source};
pub use limits::LimitSettings;
pub use model_bridge::{BridgedTrial, ModelBridge, ModelBridgeError, TrialBudget};
pub use timeouts::PhaseTimeouts;
/// A row of an `artifacts/manifest.json` (a trial's or a step's), as the job directory's
/// readers parse it.
pub use trial::artifacts::ManifestEntry;
