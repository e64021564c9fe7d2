//! Task artifacts (`artifacts = [...]` in `task.toml`, and a step's own): what the agent left
//! at declared container paths is collected after the agent phase into `<trial>/artifacts/`
//! (a step's into `<trial>/steps/<name>/artifacts/`) with `manifest.json`, as Harbor 0.13.1's
//! `ArtifactHandler` does. The convention directory `/logs/artifacts` is always an entry.
//!
//! Every download goes through the sandbox's per-trial download budget (`--max-download-mb`),
//! so a file past it is cut with a marker and listed in `truncated_outputs`. A single file or
//! a directory with `exclude` patterns is first staged inside the container (as root, in a
//! fresh directory whose random name the runner picks and `mkdir -m 700` makes, failing if
//! anything is there), copying at most the budget's bytes, then downloaded and removed.
//!
//! What lands on the host is the runner's choice alone: every destination resolves inside the
//! artifacts directory (`..` is refused; `.` and `/` name the directory itself, where a
//! directory's contents go and a file keeps its source's name, as `docker cp` into a
//! directory does), and the staging directory downloaded is the path the runner picked, never
//! one the container printed (a root agent can replace `mktemp` and the shell's output).
//!
//! [`upload_artifacts`] is the way back, for a separate verifier's container: each collected
//! artifact goes from the host to its declared source path there. This is the only way
//! artifacts reach a verifier; nothing is copied container to container.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tasks::config::Artifact;
use tasks::{ExecRequest, Sandbox, SandboxError, shell_quote};

use super::Trial;
use crate::backend::Backend;
use crate::failure::TrialFailure;

/// Harbor's convention directory, collected for every trial.
pub const CONVENTION_DIR: &str = "/logs/artifacts";
/// The manifest's file name inside the artifacts directory.
pub const MANIFEST: &str = "manifest.json";
/// The longest one artifact's staging or download may take.
const ARTIFACT_TIMEOUT: Duration = Duration::from_secs(300);

/// One artifact to collect: Harbor's `ArtifactConfig`, a plain path being `{source}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactSpec {
    /// The path in the container.
    pub source: String,
    /// Where it goes under the artifacts directory; by default the source's file name.
    pub destination: Option<String>,
    /// tar `--exclude` patterns, for a directory.
    pub exclude: Vec<String>,
    /// The compose sidecar it is collected from; `None` for the main service (the agent's).
    pub service: Option<String>,
}

impl ArtifactSpec {
    /// The sidecar this artifact comes from, `None` for the main service (`service` unset or
    /// `main`, as in Harbor).
    pub fn sidecar(&self) -> Option<&str> {
        self.service
            .as_deref()
            .filter(|s| *s != tasks::collect::MAIN_SERVICE)
    }
}

/// One entry of `manifest.json` (Harbor's `ArtifactManifestEntry`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// The container path.
    pub source: String,
    /// `artifacts` or `artifacts/<relative path>`.
    pub destination: String,
    /// `file` or `directory`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `ok`, `failed` or `empty`.
    pub status: String,
}

/// The artifacts of a trial or step in Harbor's order: the convention directory first (unless
/// declared), then the task's, then `extra` (a step's own).
pub fn normalized(task: &[Artifact], extra: &[Artifact]) -> Vec<ArtifactSpec> {
    let mut specs: Vec<ArtifactSpec> = task
        .iter()
        .chain(extra)
        .map(|artifact| match artifact {
            Artifact::Path(source) => ArtifactSpec {
                source: source.clone(),
                destination: None,
                exclude: Vec::new(),
                service: None,
            },
            Artifact::Spec {
                source,
                destination,
                exclude,
                service,
            } => ArtifactSpec {
                source: source.clone(),
                destination: destination.clone(),
                exclude: exclude.clone(),
                service: service.clone(),
            },
        })
        .collect();
    if !specs.iter().any(|s| is_convention(&s.source)) {
        specs.insert(
            0,
            ArtifactSpec {
                source: CONVENTION_DIR.into(),
                destination: Some(CONVENTION_DIR.into()),
                exclude: Vec::new(),
                service: None,
            },
        );
    }
    specs
}

fn is_convention(path: &str) -> bool {
    path.trim_end_matches('/') == CONVENTION_DIR
}

/// Where `spec` lands under `artifacts_dir` (Harbor's `_host_path`): the convention directory
/// is the artifacts directory itself, anything else its destination (or the source's file
/// name) relative to it. `None` for a destination that would leave the directory (`..`).
pub fn host_path(artifacts_dir: &Path, spec: &ArtifactSpec) -> Option<PathBuf> {
    if is_convention(&spec.source) {
        let destination = spec.destination.as_deref().unwrap_or(&spec.source);
        if is_convention(destination) || destination == "." {
            return Some(artifacts_dir.to_path_buf());
        }
    }
    let destination = spec.destination.clone().unwrap_or_else(|| {
        Path::new(&spec.source)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let mut relative = PathBuf::new();
    for component in Path::new(&destination).components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(artifacts_dir.join(relative))
}

/// `artifacts` or `artifacts/<relative>`, as the manifest records a host path.
fn manifest_destination(artifacts_dir: &Path, target: &Path) -> String {
    match target.strip_prefix(artifacts_dir) {
        Ok(rel) if rel.as_os_str().is_empty() => "artifacts".into(),
        Ok(rel) => format!("artifacts/{}", rel.display()),
        Err(_) => "artifacts".into(),
    }
}

/// How the convention directory is handled by [`collect_entries`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Convention {
    /// Downloaded with the other artifacts (a step's, since the next step empties it).
    Download,
    /// Only looked at, for its manifest entry: a single-step trial downloads
    /// `/logs/artifacts` once, after verification, so what the tests write there is kept too
    /// (as Harbor's bind-mounted directory keeps it).
    Probe,
    /// As `Probe`, for a trial whose only artifact is the convention directory: its entry says
    /// what the host directory holds when the manifest is written (`empty` until then) and
    /// [`settle_convention`] updates it after that download, so no command inside the
    /// container is spent on it. (With other artifacts in the same host directory, only the
    /// probe can tell what came from `/logs/artifacts`.)
    Deferred,
}

/// Where and how one collection pass puts what it collects.
#[derive(Clone, Copy)]
pub struct Collection<'a> {
    /// The host directory the artifacts and `manifest.json` go into.
    pub artifacts_dir: &'a Path,
    /// How the convention directory is handled.
    pub convention: Convention,
    /// The most one staged copy may take inside the container.
    pub copy_cap: u64,
    /// Where a line about an artifact not collected goes.
    pub log: &'a (dyn Fn(&str) + Sync),
}

/// Writes `manifest.json` of `artifacts_dir` (durably); a failure is logged.
pub fn write_manifest(
    artifacts_dir: &Path,
    entries: &[ManifestEntry],
    log: &(dyn Fn(&str) + Sync),
) {
    if let Err(e) = tasks::atomic::write_json_atomic(&artifacts_dir.join(MANIFEST), &entries) {
        log(&format!("cannot write artifacts/{MANIFEST}: {e}"));
    }
}

/// A failed entry for `spec`, which could not be collected at all.
pub fn failed_entry(spec: &ArtifactSpec) -> ManifestEntry {
    ManifestEntry {
        source: spec.source.clone(),
        destination: "artifacts".into(),
        kind: "file".into(),
        status: "failed".into(),
    }
}

/// The entries of one collection pass of `specs` from `sandbox` (a trial's main service, or
/// one sidecar), for a manifest written once all passes are done
/// ([`super::PhasedCollection`]). Best effort, as in Harbor: a failed artifact is a `failed`
/// entry and a `log` line, never a trial failure.
pub async fn collect_entries<S: Sandbox>(
    sandbox: &S,
    specs: &[ArtifactSpec],
    pass: &Collection<'_>,
) -> Vec<ManifestEntry> {
    let Collection {
        artifacts_dir, log, ..
    } = *pass;
    let _ = std::fs::create_dir_all(artifacts_dir);
    let mut entries = Vec::new();
    for spec in specs {
        let Some(target) = host_path(artifacts_dir, spec) else {
            log(&format!(
                "artifact {}: destination {:?} leaves the artifacts directory; not collected",
                spec.source,
                spec.destination.as_deref().unwrap_or_default()
            ));
            entries.push(failed_entry(spec));
            continue;
        };
        let entry = collect_one(sandbox, spec, &target, pass).await;
        let destination = match &entry {
            Ok((_, _, landed)) => manifest_destination(artifacts_dir, landed),
            Err(_) => manifest_destination(artifacts_dir, &target),
        };
        let (kind, status) = match entry {
            Ok((kind, status, _)) => (kind, status),
            Err((kind, why)) => {
                log(&format!("artifact {} not collected: {why}", spec.source));
                (kind, "failed")
            }
        };
        entries.push(ManifestEntry {
            source: spec.source.clone(),
            destination,
            kind: kind.into(),
            status: status.into(),
        });
    }
    entries
}

/// `(type, status, where it landed on the host)`, or `(type, why it failed)`.
type Collected = Result<(&'static str, &'static str, PathBuf), (&'static str, String)>;

async fn collect_one<S: Sandbox>(
    sandbox: &S,
    spec: &ArtifactSpec,
    target: &Path,
    pass: &Collection<'_>,
) -> Collected {
    let landed = target.to_path_buf();
    let source = spec.source.trim_end_matches('/');
    let source = if source.is_empty() { "/" } else { source };
    if is_convention(source) && spec.exclude.is_empty() && pass.convention == Convention::Deferred {
        return Ok(("directory", convention_status(target), landed));
    }
    if is_convention(source) && spec.exclude.is_empty() && pass.convention == Convention::Probe {
        let probe = format!(
            "[ -n \"$(find {} -mindepth 1 -maxdepth 1 2>/dev/null | head -n 1)\" ]",
            shell_quote(source)
        );
        let out = sandbox
            .exec(ExecRequest::runner_own(probe).timeout(Duration::from_secs(30)))
            .await
            .map_err(|e| ("directory", e.to_string()))?;
        return Ok((
            "directory",
            if out.success() { "ok" } else { "empty" },
            landed,
        ));
    }
    if is_convention(source) && spec.exclude.is_empty() {
        download(sandbox, source, target)
            .await
            .map_err(|why| ("directory", why.to_string()))?;
        return Ok(("directory", convention_status(target), landed));
    }
    let probe = ExecRequest::runner_own(format!("test -d {}", shell_quote(source)))
        .timeout(Duration::from_secs(30));
    let is_dir = match sandbox.exec(probe).await {
        Ok(out) => out.success(),
        // Harbor's guess when it cannot ask: a path without an extension is a directory.
        Err(_) => Path::new(source).extension().is_none(),
    };
    let kind = if is_dir { "directory" } else { "file" };
    let fail = |why: String| (kind, why);
    // A file whose destination names the artifacts directory itself (`.`, `/`) keeps its
    // source's name there, as `docker cp` into a directory does.
    let target = if !is_dir && target == pass.artifacts_dir {
        match Path::new(source).file_name() {
            Some(name) => pass.artifacts_dir.join(name),
            None => return Err(fail("a file artifact needs a name".into())),
        }
    } else {
        target.to_path_buf()
    };
    // What is downloaded goes into `into`, which must be inside the artifacts directory
    // (host_path guarantees it; checked again because the alternative is writing the
    // trial's own records).
    let into = if is_dir {
        target.clone()
    } else {
        target.parent().unwrap_or(&target).to_path_buf()
    };
    if !into.starts_with(pass.artifacts_dir) {
        return Err(fail(format!(
            "its destination {} is outside the artifacts directory",
            into.display()
        )));
    }
    if is_dir && spec.exclude.is_empty() {
        std::fs::create_dir_all(&target).map_err(|e| fail(e.to_string()))?;
        download(sandbox, source, &target)
            .await
            .map_err(|e| fail(e.to_string()))?;
        return Ok((kind, "ok", target));
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "artifact".into());
    // The runner's own name: nothing the container prints decides what is downloaded.
    let staged = format!("{STAGING_PREFIX}{}", uuid::Uuid::new_v4().simple());
    let stage = if is_dir {
        stage_dir_script(source, &staged, &spec.exclude, pass.copy_cap)
    } else {
        stage_file_script(source, &staged, &name, pass.copy_cap)
    };
    let out = sandbox
        .exec(ExecRequest::runner_own(stage).timeout(ARTIFACT_TIMEOUT))
        .await
        .map_err(|e| fail(e.to_string()))?;
    let cleanup = ExecRequest::runner_own(format!("rm -rf {}", shell_quote(&staged)))
        .timeout(Duration::from_secs(60));
    if !out.success() {
        let _ = sandbox.exec(cleanup).await;
        return Err(fail(format!(
            "staging it failed (exit {:?}): {}",
            out.exit_code,
            out.stderr.trim()
        )));
    }
    let downloaded = match std::fs::create_dir_all(&into) {
        Ok(()) => download(sandbox, &staged, &into)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let _ = sandbox.exec(cleanup).await;
    downloaded.map_err(fail)?;
    Ok((kind, "ok", target))
}

/// `ok` when the host directory `dir` holds anything besides the manifest, else `empty`.
fn convention_status(dir: &Path) -> &'static str {
    let has_contents = std::fs::read_dir(dir)
        .map(|mut entries| entries.any(|e| e.is_ok_and(|e| e.file_name() != MANIFEST)))
        .unwrap_or(false);
    if has_contents { "ok" } else { "empty" }
}

/// After the deferred download of the convention directory into `artifacts_dir` (a trial
/// collected with [`Convention::Deferred`], so nothing else is there): its entry in
/// `entries` says what arrived, and the manifest is written again.
pub fn settle_convention(
    entries: &mut [ManifestEntry],
    artifacts_dir: &Path,
    log: &(dyn Fn(&str) + Sync),
) {
    let Some(entry) = entries
        .iter_mut()
        .find(|e| is_convention(&e.source) && e.destination == "artifacts")
    else {
        return;
    };
    entry.status = convention_status(artifacts_dir).into();
    write_manifest(artifacts_dir, entries, log);
}

/// Why copying an artifact out of the container failed.
#[derive(Debug, thiserror::Error)]
enum DownloadError {
    /// The sandbox could not copy it.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The copy took longer than [`ARTIFACT_TIMEOUT`].
    #[error("the download took longer than {} s", ARTIFACT_TIMEOUT.as_secs())]
    TimedOut,
}

async fn download<S: Sandbox>(
    sandbox: &S,
    source: &str,
    target: &Path,
) -> Result<(), DownloadError> {
    match tokio::time::timeout(ARTIFACT_TIMEOUT, sandbox.download_dir(source, target)).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(DownloadError::TimedOut),
    }
}

/// Where artifacts are staged inside the container: this prefix and a random name the runner
/// picks (root-owned, mode 0700, made fresh: `mkdir` fails if anything is at the path).
const STAGING_PREFIX: &str = "/tmp/runner-artifact.";

/// Makes the directory `staged` (fresh, 0700) and copies at most `cap + 1` bytes of the file
/// `source` to `staged/<name>` (one byte over the cap lets the download budget see and mark
/// the cut).
fn stage_file_script(source: &str, staged: &str, name: &str, cap: u64) -> String {
    format!(
        "set -e; [ -f {src} ] || {{ echo 'no such file' >&2; exit 1; }}; \
         mkdir -m 700 {d}; head -c {limit} {src} > {d}/{name}",
        src = shell_quote(source),
        d = shell_quote(staged),
        name = shell_quote(name),
        limit = cap.saturating_add(1),
    )
}

/// Makes the directory `staged` (fresh, 0700) and copies the directory `source` into it
/// without the `exclude` patterns (tar `--exclude`), reading at most `cap` bytes of the
/// archive.
fn stage_dir_script(source: &str, staged: &str, exclude: &[String], cap: u64) -> String {
    let excludes: String = exclude
        .iter()
        .map(|pattern| format!(" --exclude={}", shell_quote(pattern)))
        .collect();
    format!(
        "mkdir -m 700 {d} || exit 1; \
         tar -C {src}{excludes} -cf - . | head -c {cap} | tar -C {d} -xf - 2>/dev/null; exit 0",
        src = shell_quote(source),
        d = shell_quote(staged),
    )
}

/// Uploads the artifacts collected in `artifacts_dir` to `sandbox` (a separate verifier's
/// container), each to its declared source path there (Harbor's `upload_artifacts`); the
/// convention directory goes to `target_convention` (`/logs/artifacts` on Linux). A
/// directory replaces what is at its path; a file is written with its parent created.
/// Artifacts that were not collected are skipped. Only what [`collect_entries`] brought to
/// the host (regular files and directories, within the download budget) is uploaded, so no
/// link the agent made can point the upload anywhere. Returns the sources uploaded.
pub async fn upload_artifacts<S: Sandbox>(
    sandbox: &S,
    specs: &[ArtifactSpec],
    artifacts_dir: &Path,
    target_convention: &str,
) -> Result<Vec<String>, tasks::SandboxError> {
    let mut uploaded = Vec::new();
    for spec in specs {
        let Some(host) = host_path(artifacts_dir, spec) else {
            continue;
        };
        let target = if is_convention(&spec.source) {
            target_convention.to_owned()
        } else {
            spec.source.clone()
        };
        if host.is_dir() {
            let reset = format!(
                "rm -rf {t} && mkdir -p {t} && chmod 777 {t}",
                t = shell_quote(&target)
            );
            sandbox.exec(ExecRequest::runner_own(reset)).await?;
            sandbox.upload_dir(&host, &target).await?;
        } else if host.is_file() {
            // Staged alone in a directory so the upload streams the file from disk.
            let stage = tempfile::tempdir()
                .map_err(|e| tasks::SandboxError::new("stage an artifact for upload", e))?;
            let name = Path::new(&target)
                .file_name()
                .map(|n| n.to_owned())
                .unwrap_or_else(|| "artifact".into());
            std::fs::hard_link(&host, stage.path().join(&name))
                .or_else(|_| std::fs::copy(&host, stage.path().join(&name)).map(|_| ()))
                .map_err(|e| tasks::SandboxError::new("stage an artifact for upload", e))?;
            let parent = Path::new(&target)
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "/".into());
            sandbox.upload_dir(stage.path(), &parent).await?;
        } else {
            continue;
        }
        uploaded.push(spec.source.clone());
    }
    Ok(uploaded)
}

/// What a single-step trial's artifact collection leaves for the end of the trial.
#[derive(Default)]
pub(super) struct TrialArtifacts {
    /// The manifest collected with [`Convention::Deferred`], whose convention entry is settled
    /// once `/logs/artifacts` is downloaded at the end (empty otherwise).
    pub(super) deferred: Vec<ManifestEntry>,
    /// True when the verification brought `/logs/artifacts` back after the tests (the end of
    /// trial download is then done).
    pub(super) collected: bool,
}

impl<B: Backend> Trial<B> {
    /// After the agent phase of a single-step task: its artifacts into `<trial>/artifacts/`
    /// (`/logs/artifacts` too when a separate verifier needs it uploaded from there; else its
    /// entry is settled by [`Self::collection`] after the final download).
    pub(super) async fn collect_artifacts(&mut self) -> Result<(), TrialFailure> {
        let dir = self.dir.join("artifacts");
        let convention = if super::separate_verifier::is_separate(&self.plan.task, None) {
            Convention::Download
        } else if self.plan.task.config.artifacts.is_empty() {
            Convention::Deferred
        } else {
            Convention::Probe
        };
        let entries = self
            .collect_artifacts_into(&[], &[], &dir, convention)
            .await?;
        if convention == Convention::Deferred {
            self.artifacts.deferred = entries;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "artifacts_tests.rs"]
mod tests;
