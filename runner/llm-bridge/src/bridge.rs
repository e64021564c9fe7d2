//! The public API: a [`Bridge`] per job, a [`TrialBridge`] per trial.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::config::{ApiKind, BridgeConfig, Budget, KeySource, ProviderConfig};
use crate::error::{BridgeError, ModelKeyError, io_error};
use crate::policy::{ModelPolicy, Spend, budget_refusal};
use crate::prices::PriceTable;
use crate::record::TrialRecorder;
use crate::redact::Secrets;
use crate::relay::{RELAY_FILE_NAME, write_relay};
use crate::summary::{JobUsage, TrialUsage, spend};
use crate::token::TrialToken;
use crate::trial::{TrialBridge, TrialState};

/// Where the runner bind-mounts a trial's [`TrialBridge::socket_dir`] in the container.
pub const CONTAINER_BRIDGE_DIR: &str = "/run/runner-llm-bridge";
/// The socket's file name in the socket directory.
pub const SOCKET_FILE_NAME: &str = "bridge.sock";
/// The relay port the agent's base URLs point at, unless the grant says otherwise.
pub const DEFAULT_RELAY_PORT: u16 = 4141;

/// A real provider key. Never printed by `Debug`.
pub(crate) struct ProviderKey(pub(crate) String);

impl fmt::Debug for ProviderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProviderKey(…)")
    }
}

/// Resource caps copied from the config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    pub max_request_bytes: usize,
    pub max_concurrent_calls: usize,
    pub max_recorded_body_bytes: u64,
    pub max_usage_json_bytes: usize,
    pub max_recorded_bytes_per_trial: u64,
    pub default_max_output_tokens: u64,
}

/// Everything trials of one job share.
#[derive(Debug)]
pub(crate) struct JobState {
    pub providers: Vec<ProviderConfig>,
    pub keys: Vec<Option<ProviderKey>>,
    /// The upstream keys, redacted from everything that goes back to agents.
    pub key_secrets: Arc<Secrets>,
    pub prices: PriceTable,
    pub job_budget: Budget,
    pub totals: Mutex<JobUsage>,
    /// What calls in flight hold of the job's budget; its lock orders every admission and
    /// settlement of the job (see `crate::ledger`).
    pub held: Mutex<Spend>,
    /// Forward server tools that reach the network (`BridgeConfig::allow_network_tools`).
    pub allow_network_tools: bool,
    pub client: reqwest::Client,
    pub caps: Caps,
    close_grace: Duration,
    socket_root: tempfile::TempDir,
    relay_path: PathBuf,
    next_trial: AtomicU64,
}

impl JobState {
    /// Why the job budget refuses calls now, if it does.
    pub fn budget_refusal(&self) -> Option<String> {
        let totals = self.totals.lock().unwrap_or_else(|p| p.into_inner());
        budget_refusal("job", &self.job_budget, &spend(&totals.totals))
    }
}

/// The bridge of one job: holds the upstream keys, the price table, the job budget and the
/// runner-owned directory where trial sockets live. Create one per job with [`Bridge::new`].
#[derive(Debug, Clone)]
pub struct Bridge {
    job: Arc<JobState>,
}

/// What a trial may do through its bridge.
#[derive(Debug, Clone)]
pub struct TrialGrant {
    /// The trial's name (Harbor's `trial_name`); shown in errors and refusals.
    pub trial_name: String,
    /// Declared models, `provider/model` or bare (see [`crate::policy::ModelPolicy`]).
    pub allowed_models: Vec<String>,
    /// The trial's own budget.
    pub budget: Budget,
    /// The trial directory: calls are recorded under `<trial_dir>/llm/` (beside `agent/`,
    /// where the agent's own `/logs/agent` lands, so the agent cannot overwrite the record).
    pub trial_dir: PathBuf,
    /// The port the relay listens on inside the container; the agent's base URLs use it.
    pub relay_port: u16,
    /// The socket file's mode. 0600 lets the container's root (the relay's user) connect;
    /// use 0666 only if the relay must run as another user (the token still guards it).
    pub socket_mode: u32,
}

impl TrialGrant {
    /// A grant with no budget of its own, the default relay port and socket mode 0600.
    pub fn new(
        trial_name: impl Into<String>,
        allowed_models: Vec<String>,
        trial_dir: impl Into<PathBuf>,
    ) -> TrialGrant {
        TrialGrant {
            trial_name: trial_name.into(),
            allowed_models,
            budget: Budget::UNLIMITED,
            trial_dir: trial_dir.into(),
            relay_port: DEFAULT_RELAY_PORT,
            socket_mode: 0o600,
        }
    }
}

fn load_key(provider: &ProviderConfig) -> Result<Option<ProviderKey>, BridgeError> {
    let source_desc = provider.key.to_string();
    let key = match &provider.key {
        KeySource::Env(name) => match std::env::var(name) {
            Ok(value) => value,
            Err(_) => return Ok(None),
        },
        KeySource::File(path) => {
            std::fs::read_to_string(path).map_err(|error| BridgeError::KeyFile {
                provider: provider.name.clone(),
                source_desc: source_desc.clone(),
                error,
            })?
        }
    };
    let key = key.trim().to_owned();
    if key.is_empty() {
        return Err(BridgeError::EmptyKey {
            provider: provider.name.clone(),
            source_desc,
        });
    }
    Ok(Some(ProviderKey(key)))
}

fn set_mode(path: &Path, mode: u32) -> Result<(), BridgeError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io_error(
        format!("cannot set mode {mode:o} on {}", path.display()),
    ))
}

impl Bridge {
    /// Reads the upstream keys, sets up the upstream client and makes the runner-owned socket
    /// directory (mode 0711: the docker daemon and container root traverse it, nobody lists
    /// it). Keys named by environment variables that are unset are simply absent; a trial
    /// declaring a model of such a provider is refused at [`Bridge::start_trial`].
    pub fn new(config: BridgeConfig) -> Result<Bridge, BridgeError> {
        // One process-wide TLS provider; a second install (another bridge) is a no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        for (i, provider) in config.providers.iter().enumerate() {
            if config.providers[..i]
                .iter()
                .any(|p| p.name == provider.name)
            {
                return Err(BridgeError::DuplicateProvider(provider.name.clone()));
            }
        }
        let keys = config
            .providers
            .iter()
            .map(load_key)
            .collect::<Result<Vec<_>, _>>()?;
        let key_secrets = Arc::new(Secrets::new(keys.iter().flatten().map(|k| k.0.clone())));
        let client = reqwest::Client::builder()
            .connect_timeout(config.upstream_connect_timeout)
            .read_timeout(config.upstream_read_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .map_err(|e| BridgeError::Client(e.to_string()))?;
        let parent = config
            .socket_parent
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let socket_root = tempfile::Builder::new()
            .prefix("runner-llm-")
            .tempdir_in(&parent)
            .map_err(io_error(format!(
                "cannot make the bridge socket directory in {}",
                parent.display()
            )))?;
        set_mode(socket_root.path(), 0o711)?;
        let relay_path = socket_root.path().join(RELAY_FILE_NAME);
        write_relay(&relay_path).map_err(io_error(format!(
            "cannot write the relay to {}",
            relay_path.display()
        )))?;
        Ok(Bridge {
            job: Arc::new(JobState {
                providers: config.providers,
                keys,
                key_secrets,
                prices: config.prices,
                job_budget: config.job_budget,
                totals: Mutex::new(JobUsage::default()),
                held: Mutex::new(Spend::default()),
                allow_network_tools: config.allow_network_tools,
                client,
                caps: Caps {
                    max_request_bytes: config.max_request_bytes,
                    max_concurrent_calls: config.max_concurrent_calls_per_trial.max(1),
                    max_recorded_body_bytes: config.max_recorded_body_bytes,
                    max_usage_json_bytes: config.max_usage_json_bytes,
                    max_recorded_bytes_per_trial: config.max_recorded_bytes_per_trial,
                    default_max_output_tokens: config.default_max_output_tokens,
                },
                close_grace: config.close_grace,
                socket_root,
                relay_path,
                next_trial: AtomicU64::new(1),
            }),
        })
    }

    /// True once the job's spending has reached its budget: the scheduler should start no
    /// more trials (and record the rest as not run). Calls of running trials are refused too.
    pub fn job_budget_exhausted(&self) -> bool {
        self.job.budget_refusal().is_some()
    }

    /// Why the job budget is exhausted, for the job summary; `None` while it is not.
    pub fn job_budget_reason(&self) -> Option<String> {
        self.job.budget_refusal()
    }

    /// The job's totals so far, over every trial started on this bridge.
    pub fn job_usage(&self) -> JobUsage {
        let mut usage = self
            .job
            .totals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if usage.budget_exhausted.is_none() {
            usage.budget_exhausted = self.job.budget_refusal();
        }
        usage
    }

    /// The runner-owned directory holding every trial's socket directory.
    pub fn socket_root(&self) -> &Path {
        self.job.socket_root.path()
    }

    /// Starts a trial's bridge: a fresh token, a socket directory with the socket and the
    /// relay, the record directory, and a server task. Must run inside a tokio runtime.
    pub async fn start_trial(&self, grant: TrialGrant) -> Result<TrialBridge, BridgeError> {
        let trial = grant.trial_name.clone();
        let bad = |reason: String| BridgeError::BadGrant {
            trial: trial.clone(),
            reason,
        };
        if grant.trial_name.trim().is_empty() {
            return Err(bad("the trial name is empty".into()));
        }
        if grant.allowed_models.is_empty() {
            return Err(bad(
                "no models are declared; declare the models the agent may call (--model)".into(),
            ));
        }
        if grant.relay_port == 0 {
            return Err(bad("the relay port must not be 0".into()));
        }
        self.check_keys(&grant)?;
        self.check_prices(&grant.allowed_models, &grant.budget, "trial")
            .map_err(|e| bad(e.to_string()))?;
        let token = TrialToken::generate()
            .map_err(|e| bad(format!("no randomness for the trial token: {e}")))?;

        let number = self.job.next_trial.fetch_add(1, Ordering::Relaxed);
        let socket_dir = self.job.socket_root.path().join(format!("t{number:05}"));
        std::fs::create_dir(&socket_dir)
            .map_err(io_error(format!("cannot make {}", socket_dir.display())))?;
        set_mode(&socket_dir, 0o711)?;
        let relay = socket_dir.join(RELAY_FILE_NAME);
        if std::fs::hard_link(&self.job.relay_path, &relay).is_err() {
            std::fs::copy(&self.job.relay_path, &relay).map_err(io_error(format!(
                "cannot copy the relay to {}",
                relay.display()
            )))?;
        }
        let socket_path = socket_dir.join(SOCKET_FILE_NAME);
        let listener = tokio::net::UnixListener::bind(&socket_path).map_err(io_error(format!(
            "cannot listen on {} ({} bytes; unix socket paths allow 107, so keep socket_parent short)",
            socket_path.display(),
            socket_path.as_os_str().len()
        )))?;
        set_mode(&socket_path, grant.socket_mode)?;

        let record_secrets = Arc::new(Secrets::new(
            self.job
                .keys
                .iter()
                .flatten()
                .map(|k| k.0.clone())
                .chain([token.as_str().to_owned()]),
        ));
        let llm_dir = grant.trial_dir.join("llm");
        let recorder = TrialRecorder::create(
            &llm_dir,
            record_secrets,
            self.job.caps.max_recorded_body_bytes,
            self.job.caps.max_recorded_bytes_per_trial,
        )
        .map_err(io_error(format!(
            "cannot make the call record in {}",
            llm_dir.display()
        )))?;
        let state = Arc::new(TrialState {
            job: self.job.clone(),
            name: grant.trial_name.clone(),
            token,
            open: AtomicBool::new(true),
            serving: AtomicBool::new(true),
            policy: ModelPolicy::new(&grant.allowed_models, &self.job.providers),
            budget: grant.budget,
            usage: Mutex::new(TrialUsage::default()),
            held: Mutex::new(Spend::default()),
            recorder,
            next_call: AtomicU64::new(1),
            call_slots: Arc::new(tokio::sync::Semaphore::new(
                self.job.caps.max_concurrent_calls,
            )),
        });
        self.job
            .totals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .n_trials += 1;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let server = tokio::spawn(crate::server::serve(
            listener,
            crate::server::router(state.clone()),
            shutdown_rx,
            self.job.close_grace,
        ));
        Ok(TrialBridge {
            state,
            socket_dir,
            socket_path,
            relay_port: grant.relay_port,
            shutdown,
            server: Some(server),
        })
    }

    /// Checks that a dollar budget (`scope`: "trial" or "job") can price every one of
    /// `models`: a call to a model missing from the price table could not be counted against
    /// it. Token budgets count every model.
    pub fn check_prices(
        &self,
        models: &[String],
        budget: &Budget,
        scope: &'static str,
    ) -> Result<(), ModelKeyError> {
        if budget.max_cost_usd.is_none() {
            return Ok(());
        }
        let providers = &self.job.providers;
        for model in models {
            // The name the agent sends: a configured provider's prefix is not part of it.
            let bare = model
                .split_once('/')
                .filter(|(prefix, _)| providers.iter().any(|p| p.name == *prefix))
                .map_or(model.as_str(), |(_, name)| name);
            if self.job.prices.price_for(model, bare).is_none() {
                return Err(ModelKeyError::Unpriced {
                    model: model.clone(),
                    scope,
                });
            }
        }
        Ok(())
    }

    /// Checks that every one of `models` has a provider the runner holds a key for (a
    /// qualified name's own provider; a bare or foreign-prefixed name the first provider of
    /// either API), and a price when the job has a dollar budget. `runner run` calls it
    /// before planning, so a missing key is one clear error rather than a failure per trial;
    /// [`Bridge::start_trial`] checks again. A trial's own dollar budget is checked with
    /// [`Bridge::check_prices`].
    pub fn check_models(&self, models: &[String]) -> Result<(), ModelKeyError> {
        self.check_prices(models, &self.job.job_budget, "job")?;
        let providers = &self.job.providers;
        for model in models {
            let qualified = model
                .split_once('/')
                .and_then(|(prefix, _)| providers.iter().position(|p| p.name == prefix));
            let candidates: Vec<usize> = match qualified {
                Some(index) => vec![index],
                // A bare name is served by the first provider of whichever API is called.
                None => [ApiKind::OpenAi, ApiKind::Anthropic]
                    .iter()
                    .filter_map(|api| providers.iter().position(|p| p.api == *api))
                    .collect(),
            };
            let Some(&first) = candidates.first() else {
                return Err(ModelKeyError::NoProvider {
                    model: model.clone(),
                });
            };
            if candidates.iter().all(|&i| self.job.keys[i].is_none()) {
                return Err(ModelKeyError::MissingKey {
                    model: model.clone(),
                    provider: providers[first].name.clone(),
                    key: providers[first].key.clone(),
                });
            }
        }
        Ok(())
    }

    /// Refuses a grant whose declared models need a provider the runner has no key for.
    fn check_keys(&self, grant: &TrialGrant) -> Result<(), BridgeError> {
        let trial = grant.trial_name.clone();
        self.check_models(&grant.allowed_models)
            .map_err(|missing| match missing {
                ModelKeyError::NoProvider { .. } | ModelKeyError::Unpriced { .. } => {
                    BridgeError::BadGrant {
                        trial,
                        reason: missing.to_string(),
                    }
                }
                ModelKeyError::MissingKey {
                    model,
                    provider,
                    key,
                } => BridgeError::MissingKey {
                    trial,
                    model,
                    provider,
                    source_desc: key.to_string(),
                },
            })
    }
}
