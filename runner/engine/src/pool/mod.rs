//! A pool of engines behind one [`Backend`]: each environment starts on the healthy engine
//! with the most room for it ([`placement`]), its task's image made ready there first (once
//! per engine per task), and each environment names its engine for the trial's record.
//!
//! Engines that stop answering are drained: a health probe ([`health`]) pings each one
//! every second; a drained engine takes no new trial, and the trials running on it fail
//! through their own calls (infrastructure errors the job's retry policy runs again on the
//! others). It takes trials again once it answers. A start that fails on an engine that then
//! does not answer its ping moves to the next engine before the trial hears of it.

mod environment;
mod health;
pub mod placement;

pub use environment::PoolEnvironment;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tasks::Task;

use crate::backend::{
    Backend, BackendError, BackendErrorKind, EngineCapacity, EnvironmentSpec, ImageInfo,
    OutputSink, VerifierImage,
};
use crate::images::ImageRequest;
use placement::{Demand, Load, Slot};

/// One engine of a pool, as the user named it.
pub struct PoolMember<B> {
    /// How records and notes name it: `unix:///run/docker-b.sock`, `tcp://10.0.0.5:2375`
    /// (the host part only, never credentials).
    pub name: String,
    /// Its backend.
    pub backend: B,
    /// The user's cap on its trials at once (`URL#n=8`).
    pub max_trials: Option<usize>,
}

/// Engines that together run one job's trials. Clones share the pool.
pub struct EnginePool<B: Backend> {
    inner: Arc<Inner<B>>,
}

impl<B: Backend> Clone for EnginePool<B> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

/// Told when an engine is drained or taken back (the CLI prints it).
pub type PoolNotice = Arc<dyn Fn(&str) + Send + Sync>;

struct Inner<B: Backend> {
    engines: Vec<Engine<B>>,
    state: Mutex<State>,
    notice: PoolNotice,
}

struct Engine<B> {
    name: String,
    backend: B,
}

#[derive(Default)]
struct State {
    slots: Vec<Slot>,
    /// The tasks whose images were asked for, to prepare them on other engines later.
    tasks: HashMap<String, (Arc<Task>, ImageRequest)>,
    /// Each engine's image of each task, made once (`(engine, task name)`).
    images: HashMap<(usize, String), Arc<tokio::sync::OnceCell<ImageInfo>>>,
}

impl<B: Backend + Clone> EnginePool<B> {
    /// A pool of `members`, each asked for its capacity now: an engine that does not answer
    /// is refused by name (a job never starts on a pool it cannot see). The health probe
    /// runs for as long as a clone of the pool lives.
    pub async fn connect(
        members: Vec<PoolMember<B>>,
        notice: PoolNotice,
    ) -> Result<EnginePool<B>, BackendError> {
        if members.is_empty() {
            return Err(BackendError::new(
                BackendErrorKind::Unreachable,
                "a pool needs at least one engine",
            ));
        }
        let mut slots = Vec::new();
        let mut engines = Vec::new();
        for mut member in members {
            // The name goes into every record and notice of the engine's trials: whatever
            // the caller passed, no URL's user-info reaches them.
            member.name = secrets::redact_url_credentials(&member.name);
            let capacity = member.backend.capacity().await.map_err(|e| {
                BackendError::new(e.kind, format!("engine {}: {}", member.name, e.message))
            })?;
            slots.push(Slot {
                healthy: true,
                capacity,
                max_trials: member.max_trials,
                load: Load::default(),
            });
            engines.push(Engine {
                name: member.name,
                backend: member.backend,
            });
        }
        let inner = Arc::new(Inner {
            engines,
            state: Mutex::new(State {
                slots,
                ..State::default()
            }),
            notice,
        });
        health::spawn_probe(Arc::downgrade(&inner));
        Ok(EnginePool { inner })
    }

    /// Each engine's name and capacity, for the start of job note.
    pub fn describe(&self) -> Vec<(String, EngineCapacity, Option<usize>)> {
        let state = self.inner.state.lock().unwrap();
        self.inner
            .engines
            .iter()
            .zip(&state.slots)
            .map(|(engine, slot)| (engine.name.clone(), slot.capacity, slot.max_trials))
            .collect()
    }

    /// Reserves room on the best engine for `demand`; `None` when every engine is drained.
    fn place(&self, demand: Demand, skip: &[usize]) -> Option<usize> {
        let mut state = self.inner.state.lock().unwrap();
        let mut slots = state.slots.clone();
        for &i in skip {
            slots[i].healthy = false;
        }
        let chosen = placement::choose(&slots, demand)?;
        let slot = &mut state.slots[chosen];
        slot.load = slot.load.plus(demand);
        Some(chosen)
    }

    /// The image of the task `spec` starts from, made ready on `engine` (once per engine per
    /// task; the task's first engine made it in `prepare_image`).
    async fn image_on(
        &self,
        engine: usize,
        task_name: &str,
    ) -> Result<Option<ImageInfo>, BackendError> {
        let (known, cell) = {
            let mut state = self.inner.state.lock().unwrap();
            let known = state.tasks.get(task_name).cloned();
            let cell = state
                .images
                .entry((engine, task_name.to_owned()))
                .or_default()
                .clone();
            (known, cell)
        };
        let Some((task, image)) = known else {
            return Ok(None);
        };
        let quiet: OutputSink = Arc::new(|_: &str, _: &[u8]| {});
        let backend = &self.inner.engines[engine].backend;
        cell.get_or_try_init(|| backend.prepare_image(&task, &image, &quiet))
            .await
            .cloned()
            .map(Some)
    }

    /// Drains `engine` when it does not answer a ping; true when it was drained.
    async fn drain_if_gone(&self, engine: usize) -> bool {
        let alive = health::answers(&self.inner.engines[engine].backend).await;
        if !alive {
            health::set_health(&self.inner, engine, false);
        }
        !alive
    }

    fn all_drained(&self) -> BackendError {
        let names: Vec<&str> = self.inner.engines.iter().map(|e| e.name.as_str()).collect();
        BackendError::new(
            BackendErrorKind::Unreachable,
            format!(
                "no engine of the pool answers ({}); the trial was not run",
                names.join(", ")
            ),
        )
    }
}

fn demand_of(spec: &EnvironmentSpec) -> Demand {
    Demand {
        cpus: spec.main.cpus.unwrap_or(1.0),
        memory_mb: spec.main.memory_mb.unwrap_or(2048),
    }
}

impl<B: Backend + Clone> Backend for EnginePool<B> {
    type Environment = PoolEnvironment<B::Environment>;

    /// Made on the healthy engine with the fewest trials; the others make theirs when a
    /// trial of the task is first placed on them.
    async fn prepare_image(
        &self,
        task: &Task,
        image: &ImageRequest,
        log: &OutputSink,
    ) -> Result<ImageInfo, BackendError> {
        let engine = {
            let mut state = self.inner.state.lock().unwrap();
            state
                .tasks
                .insert(task.name.clone(), (Arc::new(task.clone()), image.clone()));
            let slots = state.slots.clone();
            placement::choose(
                &slots,
                Demand {
                    cpus: 0.0,
                    memory_mb: 0,
                },
            )
        };
        let Some(engine) = engine else {
            return Err(self.all_drained());
        };
        let backend = &self.inner.engines[engine].backend;
        let info = backend.prepare_image(task, image, log).await?;
        let cell = {
            let mut state = self.inner.state.lock().unwrap();
            state
                .images
                .entry((engine, task.name.clone()))
                .or_default()
                .clone()
        };
        let _ = cell.set(info.clone());
        Ok(info)
    }

    async fn start_environment(
        &self,
        spec: &EnvironmentSpec,
    ) -> Result<Self::Environment, BackendError> {
        let demand = demand_of(spec);
        let mut tried = Vec::new();
        loop {
            let Some(engine) = self.place(demand, &tried) else {
                return Err(self.all_drained());
            };
            let reservation = environment::Reservation::new(self.inner.clone(), engine, demand);
            let started = async {
                let mut spec = spec.clone();
                if let Some(image) = self.image_on(engine, &spec.task_name).await? {
                    spec.main.image = image.id;
                }
                self.inner.engines[engine]
                    .backend
                    .start_environment(&spec)
                    .await
            }
            .await;
            match started {
                Ok(inner) => {
                    let name = self.inner.engines[engine].name.clone();
                    return Ok(PoolEnvironment::new(inner, name, reservation));
                }
                Err(e) if self.drain_if_gone(engine).await => {
                    drop(reservation);
                    tried.push(engine);
                    let name = &self.inner.engines[engine].name;
                    (self.inner.notice)(&format!(
                        "trial {} could not start on engine {name} ({}); placing it on another",
                        spec.trial_name, e.message
                    ));
                }
                Err(e) => {
                    let name = &self.inner.engines[engine].name;
                    return Err(BackendError::new(
                        e.kind,
                        format!("engine {name}: {}", e.message),
                    ));
                }
            }
        }
    }

    async fn start_verifier_environment(
        &self,
        task: &Task,
        image: &VerifierImage,
        spec: &EnvironmentSpec,
        log: &OutputSink,
    ) -> Result<Self::Environment, BackendError> {
        let demand = demand_of(spec);
        let Some(engine) = self.place(demand, &[]) else {
            return Err(self.all_drained());
        };
        let reservation = environment::Reservation::new(self.inner.clone(), engine, demand);
        let inner = self.inner.engines[engine]
            .backend
            .start_verifier_environment(task, image, spec, log)
            .await?;
        let name = self.inner.engines[engine].name.clone();
        Ok(PoolEnvironment::new(inner, name, reservation))
    }

    /// Swept on every engine that answers; one that does not is swept by the next run that
    /// uses it (its owner is then gone).
    async fn remove_job(&self, job_id: &str) -> Result<usize, BackendError> {
        let mut removed = 0;
        for engine in &self.inner.engines {
            if let Ok(n) = engine.backend.remove_job(job_id).await {
                removed += n;
            }
        }
        Ok(removed)
    }

    fn images_by_engine(&self) -> Vec<(String, String, String)> {
        let state = self.inner.state.lock().unwrap();
        state
            .images
            .iter()
            .filter_map(|((engine, task), cell)| {
                let name = &self.inner.engines[*engine].name;
                cell.get()
                    .map(|image| (task.clone(), name.clone(), image.id.clone()))
            })
            .collect()
    }
}
