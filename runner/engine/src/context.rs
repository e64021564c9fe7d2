//! What every trial of a job shares: [`JobContext`], made by the job (`job/mod.rs`) and read
//! by its trials (`trial/`), and [`JobBridge`], the job's LLM bridge as its trials see it. It
//! sits below both, so the trial needs nothing of the job's modules.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use adapter::AnyAgent;
use tasks::Multipliers;
use tokio_util::sync::CancellationToken;

use crate::backend::Backend;
use crate::events::{Event, EventSender};
use crate::image_cache::{ImageCache, ImageJob};
use crate::limits::LimitSettings;
use crate::model_bridge::ModelBridge;
use crate::pause::PauseMonitor;

/// What every trial of a job shares.
pub struct JobContext<B: Backend> {
    /// Runs the environments.
    pub backend: B,
    /// The agent under test.
    pub agent: AnyAgent,
    /// The job's id (labels every environment).
    pub job_id: String,
    /// The job directory; each trial writes `<job_dir>/<trial_name>/`.
    pub job_dir: PathBuf,
    /// Timeout multipliers.
    pub multipliers: Multipliers,
    /// Rebuild images even when one of the same content exists.
    pub force_build: bool,
    /// Limits every trial runs under.
    pub limits: LimitSettings,
    /// Images per task, prepared once by the first trial that needs one.
    pub images: ImageCache,
    /// Progress, for the recorder and the reporter.
    pub events: EventSender,
    /// Cancelled on Ctrl-C, SIGTERM or SIGHUP.
    pub cancel: CancellationToken,
    /// Pauses of the runner seen so far.
    pub pauses: PauseMonitor,
    /// How long past its deadline a phase may run before the watchdog ends the trial.
    pub watchdog_grace: Duration,
    /// The LLM bridge the agent's models are called through, when the job has one.
    pub bridge: Option<JobBridge>,
}

impl<B: Backend> JobContext<B> {
    pub(crate) fn emit(&self, event: Event) {
        // The receiver only goes away when the job is over; nothing is lost that matters then.
        let _ = self.events.send(event);
    }

    /// What preparing a task's image needs of the job.
    pub(crate) fn image_job(&self) -> ImageJob<'_, B> {
        ImageJob {
            backend: &self.backend,
            cache: &self.images,
            events: &self.events,
            force_build: self.force_build,
        }
    }
}

/// What a job gives its trials when models are called through the bridge.
#[derive(Debug, Clone)]
pub struct JobBridge {
    /// The job's bridge (holds the upstream keys and each trial's budget; shared by every
    /// trial). The `runner` binary hands in runner/llm-bridge's.
    pub bridge: Arc<dyn ModelBridge>,
    /// The models every trial may call (`-m`, or the agent config's model).
    pub models: Vec<String>,
    /// `--allow-container-secrets`: the secret check of the agent's env is skipped.
    pub allow_container_secrets: bool,
}
