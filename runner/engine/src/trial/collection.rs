//! What is collected after an agent phase, in Harbor 0.26's order
//! (`Trial._collect_artifacts_phased`): the `[[verifier.collect]]` hooks on `main` (the task's,
//! then the step's), then the main service's artifacts; then, when a hook or an artifact names
//! a compose sidecar, the sidecars' hooks and artifacts. One `manifest.json` holds both passes.
//! [`PhasedCollection`] is the whole of it, for a trial and for a `runner serve` episode alike.
//!
//! Hooks are best effort, as in Harbor: a hook that fails, times out or names a service that is
//! not running is a `trial.log` line (its output is streamed there too) and a warning, never
//! the trial's failure; the verifier decides what a missing snapshot means.
//!
//! Integrity: the LLM bridge is closed before this runs, but the agent's leftover processes
//! are not killed in the main service (a shared verifier's tests may query the servers the
//! agent started; see ARCHITECTURE.md, "Containment"), so the main service's hooks and
//! artifacts are what the agent left, as any artifact of `main` is. A sidecar's state is not
//! the agent's to write: before the sidecar pass the main container is frozen (the engine's
//! cgroup freezer), so no leftover can talk to a sidecar while it snapshots itself, and it is
//! thawed afterwards. (Harbor stops the main service instead, and only when a separate verifier
//! makes it the last use; freezing covers the shared mode too.) A main service that cannot
//! be frozen (it has already stopped, or the backend cannot) is logged and the pass goes on;
//! one that cannot be thawed ends the trial with an `EnvironmentError`, since the verifier
//! could not run in it.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use tasks::collect::CollectHook;
use tasks::config::Artifact;
use tasks::{ExceptionType, ExecRequest, Sandbox};

use super::Trial;
use super::artifacts::{
    ArtifactSpec, Collection, Convention, ManifestEntry, collect_entries, failed_entry, normalized,
    write_manifest,
};
use crate::backend::{Backend, Environment};
use crate::failure::TrialFailure;

/// The deadline of one hook: Harbor passes the whole seconds of `timeout_sec` to its exec.
fn hook_timeout(hook: &CollectHook) -> Duration {
    Duration::from_secs(hook.timeout_sec.trunc().max(1.0) as u64)
}

/// One collection after an agent phase, in Harbor's two passes (see the module docs): the
/// hooks to run, the artifacts to collect, where they go and where its lines go. A trial
/// makes one from its plan; `runner serve` from an episode, so an episode's hooks and
/// sidecar artifacts are collected exactly as a trial's are.
pub struct PhasedCollection<'a> {
    /// The `[[verifier.collect]]` hooks in order: the task's, then the step's.
    pub hooks: Vec<&'a CollectHook>,
    /// The artifacts, [`normalized`] (the task's, then the step's).
    pub specs: Vec<ArtifactSpec>,
    /// Where the artifacts and `manifest.json` go; its `log` takes every progress line.
    pub pass: Collection<'a>,
    /// Where a warning goes: a hook that failed, timed out or names no running service, a
    /// main service that could not be frozen.
    pub warn: &'a (dyn Fn(&str) + Sync),
}

impl<'a> PhasedCollection<'a> {
    /// The collection of `task`'s hooks and artifacts followed by a step's own
    /// (`step_hooks`, `step_artifacts`; empty for a single-step task).
    pub fn of_task(
        task: &'a tasks::config::TaskConfig,
        step_hooks: &'a [CollectHook],
        step_artifacts: &[Artifact],
        pass: Collection<'a>,
        warn: &'a (dyn Fn(&str) + Sync),
    ) -> Self {
        Self {
            hooks: task.verifier.collect.iter().chain(step_hooks).collect(),
            specs: normalized(&task.artifacts, step_artifacts),
            pass,
            warn,
        }
    }

    /// Runs the hooks and collects the artifacts of `environment` with their manifest.
    /// Returns the manifest's entries; fails only when the main service cannot be thawed
    /// after the sidecar pass.
    pub async fn run<E: Environment>(
        self,
        environment: &E,
    ) -> Result<Vec<ManifestEntry>, TrialFailure> {
        let Self {
            hooks,
            specs,
            pass,
            warn,
        } = self;
        let (log, main) = (pass.log, environment.main());
        let (main_specs, sidecar_specs): (Vec<_>, Vec<_>) =
            specs.into_iter().partition(|s| s.sidecar().is_none());

        for (i, hook) in hooks.iter().enumerate().filter(|(_, h)| h.on_main()) {
            run_hook(i, hook, Some(main.clone()), log, warn).await;
        }
        let mut entries = collect_entries(main, &main_specs, &pass).await;

        let sidecars: BTreeSet<&str> = sidecar_specs
            .iter()
            .filter_map(|s| s.sidecar())
            .chain(
                hooks
                    .iter()
                    .filter(|h| !h.on_main())
                    .map(|h| h.service.as_str()),
            )
            .collect();
        if !sidecars.is_empty() {
            let frozen = match environment.freeze_main(true).await {
                Ok(()) => {
                    log(&format!(
                        "main service frozen while sidecars {sidecars:?} are collected"
                    ));
                    true
                }
                Err(e) => {
                    warn(&format!(
                        "the main service could not be frozen before the sidecar collection ({e}); it goes on"
                    ));
                    false
                }
            };
            for (i, hook) in hooks.iter().enumerate().filter(|(_, h)| !h.on_main()) {
                run_hook(i, hook, environment.service(&hook.service), log, warn).await;
            }
            for spec in &sidecar_specs {
                let service = spec.sidecar().unwrap_or_default();
                match environment.service(service) {
                    Some(sandbox) => entries.extend(
                        collect_entries(
                            &sandbox,
                            std::slice::from_ref(spec),
                            &Collection {
                                convention: Convention::Download,
                                ..pass
                            },
                        )
                        .await,
                    ),
                    None => {
                        log(&format!(
                            "artifact {} not collected: the environment runs no service {service:?} (services come from environment/docker-compose.yaml)",
                            spec.source
                        ));
                        entries.push(failed_entry(spec));
                    }
                }
            }
            if frozen {
                environment.freeze_main(false).await.map_err(|e| {
                    TrialFailure::new(
                        ExceptionType::EnvironmentError,
                        format!(
                            "the main service could not be thawed after the sidecar collection: {e}"
                        ),
                    )
                })?;
                log("main service thawed");
            }
        }
        write_manifest(pass.artifacts_dir, &entries, log);
        let ok = entries.iter().filter(|e| e.status == "ok").count();
        log(&format!(
            "artifacts: {ok} of {} collected into {}",
            entries.len(),
            pass.artifacts_dir.display()
        ));
        Ok(entries)
    }
}

/// Runs collect hook number `index` in `sandbox` (its service's; `None` when the environment
/// runs no such service). Its output streams into `trial.log` (the sandbox's observer); how it
/// ended is a line in `log`, and a failure a warning too.
async fn run_hook<S: Sandbox>(
    index: usize,
    hook: &CollectHook,
    sandbox: Option<S>,
    log: &(dyn Fn(&str) + Sync),
    warn: &(dyn Fn(&str) + Sync),
) {
    let what = format!(
        "collect hook {index} in service {:?} ({:?})",
        hook.service, hook.command
    );
    let Some(sandbox) = sandbox else {
        warn(&format!(
            "{what} did not run: the environment runs no such service (services come from environment/docker-compose.yaml)"
        ));
        return;
    };
    log(&format!("{what}: started"));
    let user = hook.user.as_ref().map(|u| u.as_exec_user());
    let request = ExecRequest::new(hook.command.clone())
        .maybe_user(user.as_deref())
        .timeout(hook_timeout(hook));
    match sandbox.exec(request).await {
        Ok(out) if out.success() => log(&format!(
            "{what}: completed in {:.3}s",
            out.elapsed.as_secs_f64()
        )),
        Ok(out) if out.timed_out => warn(&format!(
            "{what} timed out after {} s; the trial goes on (as in Harbor)",
            hook_timeout(hook).as_secs()
        )),
        Ok(out) => warn(&format!(
            "{what} exited with code {:?}; the trial goes on (as in Harbor). stderr: {}",
            out.exit_code,
            out.stderr.trim()
        )),
        Err(e) => warn(&format!(
            "{what} failed: {e}; the trial goes on (as in Harbor)"
        )),
    }
}

impl<B: Backend> Trial<B> {
    /// Runs the collect hooks (the task's and `step_hooks`) and collects the task's artifacts
    /// and `extra` (a step's) into `artifacts_dir` with their manifest (see
    /// [`PhasedCollection`]). Returns the manifest's entries; fails only when the main service
    /// cannot be thawed after the sidecar pass.
    pub(super) async fn collect_artifacts_into(
        &self,
        step_hooks: &[CollectHook],
        extra: &[Artifact],
        artifacts_dir: &Path,
        convention: Convention,
    ) -> Result<Vec<ManifestEntry>, TrialFailure> {
        let Some(environment) = self.environment.as_ref() else {
            return Ok(Vec::new());
        };
        let log = |line: &str| self.log.line(line);
        let warn = |text: &str| self.warn(text);
        let pass = Collection {
            artifacts_dir,
            convention,
            copy_cap: self.limits.download_cap_bytes,
            log: &log,
        };
        PhasedCollection::of_task(&self.plan.task.config, step_hooks, extra, pass, &warn)
            .run(environment)
            .await
    }
}
