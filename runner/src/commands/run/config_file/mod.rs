//! `runner run -c FILE`: a job config in TOML, JSON or YAML with Harbor's `JobConfig` field
//! names (`harbor.models.job.config`, every field of Harbor 0.13 and 0.26), runner's own
//! `<job>/config.json` included, so any job can be run again as it was. Flags on the command line (and `RUNNER_*` variables) win over
//! the file.
//!
//! The file is read as a JSON value and walked field by field: a field runner has a flag for
//! sets that flag; a Harbor field runner does not support must keep Harbor's default (the
//! value a runner job records), else it is refused by name; an unknown field is refused by
//! name. Nothing is silently ignored, so a config never half-runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod section;

use section::Section;

/// What a config file sets, in the terms of `runner run`'s flags.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileSettings {
    /// `job_name` (--job-name).
    pub job_name: Option<String>,
    /// `jobs_dir` (--jobs-dir).
    pub jobs_dir: Option<PathBuf>,
    /// `n_attempts` (--k).
    pub k: Option<u32>,
    /// The timeout multipliers the file sets, by Harbor's field name (one of
    /// [`tasks::Multipliers::FIELDS`]).
    pub multipliers: BTreeMap<&'static str, f64>,
    /// `n_concurrent_trials` (--n-concurrent).
    pub n_concurrent: Option<u32>,
    /// `quiet` (--quiet).
    pub quiet: Option<bool>,
    /// `retry.max_retries`.
    pub max_retries: Option<u32>,
    /// `retry.include_exceptions`.
    pub retry_include: Option<Vec<String>>,
    /// `retry.exclude_exceptions`.
    pub retry_exclude: Option<Vec<String>>,
    /// Harbor 0.26's `override_error_policy` (no flag: Harbor has none either).
    pub override_error_policy: Option<tasks::error_policy::ErrorPolicyOverrides>,
    /// `environment.force_build`.
    pub force_build: Option<bool>,
    /// `agents[0].name`.
    pub agent: Option<String>,
    /// `agents[0].model_name` of a catalogue agent (-m).
    pub agent_model: Option<String>,
    /// `agents[0].kwargs` of a catalogue agent, as `--ak KEY=JSON` pairs.
    pub agent_kwargs: Vec<String>,
    /// `agents[0].env` of a catalogue agent, as `--agent-env NAME=VALUE` pairs.
    pub agent_env: Vec<String>,
    /// Runner-only `agent_config`: the installed agent's TOML, relative to the file.
    pub agent_config: Option<PathBuf>,
    /// `datasets[0].path` or `tasks[0].path`.
    pub path: Option<PathBuf>,
    /// `datasets[0].name` with `version` (`NAME[@VERSION]`, as -d): a registry dataset.
    pub dataset: Option<String>,
    /// `datasets[0].registry_url` (or 0.13's nested `registry.url`).
    pub registry_url: Option<String>,
    /// `datasets[0].registry_path` (or `registry.path`), relative to the file.
    pub registry_path: Option<PathBuf>,
    /// `datasets[0].task_names`.
    pub include: Option<Vec<String>>,
    /// `datasets[0].exclude_task_names`.
    pub exclude: Option<Vec<String>>,
    /// `datasets[0].n_tasks`.
    pub n_tasks: Option<u32>,
    /// Runner-only `allow_container_secrets`.
    pub allow_container_secrets: Option<bool>,
    /// Runner-only `pids_limit`.
    pub pids_limit: Option<u32>,
    /// Runner-only `max_download_mb`.
    pub max_download_mb: Option<u64>,
    /// Runner-only `max_trial_log_mb`.
    pub max_trial_log_mb: Option<u64>,
    /// Runner-only `verifier.agent_toolchain`.
    pub agent_toolchain: Option<bool>,
    /// Runner-only `shard` and `n_shards` (a shard's config.json runs that shard again).
    pub shard: Option<engine::job::Shard>,
    /// Runner-only `task_env_from` (--task-env-from).
    pub task_env_from: Option<Vec<String>>,
}

/// A config file runner cannot use, naming the file and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct ConfigFileError {
    /// The file as given.
    pub file: String,
    /// What is wrong, starting with the field when there is one.
    pub problem: String,
}

/// Reads `path` (by its extension: `.toml`, `.json`, `.yaml`/`.yml`).
pub fn load(path: &Path) -> Result<FileSettings, ConfigFileError> {
    let error = |problem: String| ConfigFileError {
        file: path.display().to_string(),
        problem,
    };
    let bytes = tasks::bounded::read_capped(path, tasks::bounded::MAX_RECORD_BYTES, "job config")
        .map_err(|e| error(format!("cannot read it: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| error("not UTF-8 text".into()))?;
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let value = parse_text(extension.as_deref(), &text).map_err(error)?;
    let mut settings = settings_of(&value).map_err(error)?;
    // A path inside the file names a file next to it, wherever runner was started.
    if let Some(agent_config) = &mut settings.agent_config
        && agent_config.is_relative()
        && let Some(dir) = path.parent()
    {
        *agent_config = dir.join(&*agent_config);
    }
    if let Some(registry_path) = &mut settings.registry_path
        && registry_path.is_relative()
        && let Some(dir) = path.parent()
    {
        *registry_path = dir.join(&*registry_path);
    }
    Ok(settings)
}

/// The document as JSON.
pub fn parse_text(extension: Option<&str>, text: &str) -> Result<Value, String> {
    match extension {
        Some("json") => serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}")),
        Some("toml") => toml::from_str::<toml::Value>(text)
            .map_err(|e| format!("not valid TOML: {e}"))
            .and_then(|v| serde_json::to_value(v).map_err(|e| e.to_string())),
        Some("yaml" | "yml") => leaderboard::submission::yaml::parse(text)
            .map(|d| d.value)
            .map_err(|e| format!("not valid YAML: {e}")),
        _ => Err("a job config must end in .toml, .json, .yaml or .yml".into()),
    }
}

/// The settings of a parsed document.
pub fn settings_of(doc: &Value) -> Result<FileSettings, String> {
    let mut root = Section::new("", doc)?;
    let mut s = FileSettings {
        job_name: root.typed("job_name", "a string")?,
        jobs_dir: root.typed("jobs_dir", "a path")?,
        k: root.typed("n_attempts", "a whole number")?,
        multipliers: read_multipliers(&mut root)?,
        n_concurrent: root.typed("n_concurrent_trials", "a whole number")?,
        quiet: root.typed("quiet", "true or false")?,
        allow_container_secrets: root.typed("allow_container_secrets", "true or false")?,
        agent_config: root.typed("agent_config", "a path")?,
        pids_limit: root.typed("pids_limit", "a whole number")?,
        max_download_mb: root.typed("max_download_mb", "a whole number")?,
        max_trial_log_mb: root.typed("max_trial_log_mb", "a whole number")?,
        task_env_from: root.typed("task_env_from", "a list of variable names")?,
        ..FileSettings::default()
    };
    let shard: Option<u32> = root.typed("shard", "a whole number")?;
    let n_shards: Option<u32> = root.typed("n_shards", "a whole number")?;
    s.shard = match (shard, n_shards) {
        (None, None) => None,
        (Some(i), Some(n)) => Some(
            format!("{i}/{n}")
                .parse()
                .map_err(|e| format!("shard, n_shards: {e}"))?,
        ),
        _ => return Err("shard, n_shards: give both (shard I of n_shards N) or neither".into()),
    };
    // Recorded by runner from the agent config; the agent gives it again.
    let _: Option<String> = root.typed("instruction_suffix", "a string")?;
    // A merged job's parts: a run of its config is a new job of the same plan.
    let _: Option<Vec<String>> = root.typed("merged_from", "a list of job ids")?;
    // Harbor 0.26 writes schema 1 of its job config; 0.13 wrote none.
    root.default_only("schema_version", &[1.into()])?;
    root.default_only("debug", &[])?;
    // Harbor 0.26 fields with no runner counterpart yet: only their unused values pass.
    for field in [
        "metrics",
        "artifacts",
        "extra_instruction_paths",
        "extra_instructions",
        "plugins",
        "install_only",
        "skip_credential_checks",
        "user_agent",
        "source_jobs",
    ] {
        root.default_only(field, &[])?;
    }
    if let Some(overrides) = root.take("override_error_policy") {
        s.override_error_policy = Some(read_overrides(overrides)?);
    }
    if let Some(retry) = root.take("retry") {
        read_retry(&retry, &mut s)?;
    }
    if let Some(environment) = root.take("environment") {
        read_environment(&environment, &mut s)?;
    }
    if let Some(verifier) = root.take("verifier") {
        let mut v = Section::new("verifier", &verifier)?;
        for field in [
            "override_timeout_sec",
            "max_timeout_sec",
            "env",
            "import_path",
            "kwargs",
            "disable",
            "include_logs",
            "exclude_logs",
            "extra_allowed_hosts",
        ] {
            v.default_only(field, &[])?;
        }
        s.agent_toolchain = v.typed("agent_toolchain", "true or false")?;
        v.finish()?;
    }
    if let Some(agents) = root.take("agents") {
        read_agents(&agents, &mut s)?;
    }
    let datasets = root.take("datasets");
    let tasks = root.take("tasks");
    read_sources(datasets.as_ref(), tasks.as_ref(), &mut s)?;
    root.finish()?;
    Ok(s)
}

fn read_multipliers(root: &mut Section) -> Result<BTreeMap<&'static str, f64>, String> {
    let mut multipliers = BTreeMap::new();
    for field in tasks::Multipliers::FIELDS {
        if let Some(value) = root.typed(field.name, "a number")? {
            multipliers.insert(field.name, value);
        }
    }
    Ok(multipliers)
}

/// Harbor 0.26's `override_error_policy` (type name → `should_retry`, `should_grade`,
/// `has_valid_reward`, each true, false or null), refused with the entry named when its shape
/// is wrong or runner cannot honour it ([`engine::error_overrides::check`]).
fn read_overrides(value: Value) -> Result<tasks::error_policy::ErrorPolicyOverrides, String> {
    let overrides = serde_json::from_value(value).map_err(|e| {
        format!(
            "override_error_policy: expected a table of exception type → \
             {{should_retry, should_grade, has_valid_reward}} (each true, false or null): {e}"
        )
    })?;
    engine::error_overrides::check(&overrides).map_err(|e| e.to_string())?;
    Ok(overrides)
}

fn read_retry(retry: &Value, s: &mut FileSettings) -> Result<(), String> {
    let mut r = Section::new("retry", retry)?;
    s.max_retries = r.typed("max_retries", "a whole number")?;
    // Harbor writes these as sets: the order does not matter.
    s.retry_include = r.typed("include_exceptions", "a list of exception types")?;
    s.retry_exclude = r.typed("exclude_exceptions", "a list of exception types")?;
    // Runner's backoff is fixed (1 s doubling to 60 s); Harbor's defaults and runner's own
    // record are accepted, anything else would not be honoured.
    r.default_only("wait_multiplier", &[1.0.into(), 2.0.into()])?;
    r.default_only("min_wait_sec", &[1.0.into()])?;
    r.default_only("max_wait_sec", &[60.0.into()])?;
    r.finish()
}

fn read_environment(environment: &Value, s: &mut FileSettings) -> Result<(), String> {
    let mut e = Section::new("environment", environment)?;
    e.default_only("type", &["docker".into()])?;
    s.force_build = e.typed("force_build", "true or false")?;
    e.default_only("delete", &[true.into()])?;
    e.default_only("stream", &[])?;
    e.default_only("cpu_enforcement_policy", &["auto".into()])?;
    e.default_only("memory_enforcement_policy", &["auto".into()])?;
    for field in [
        "import_path",
        "override_cpus",
        "override_memory_mb",
        "override_storage_mb",
        "override_gpus",
        "override_tpu",
        "suppress_override_warnings",
        "mounts",
        "extra_docker_compose",
        "env",
        "kwargs",
        "extra_allowed_hosts",
    ] {
        e.default_only(field, &[])?;
    }
    e.finish()
}

fn read_agents(agents: &Value, s: &mut FileSettings) -> Result<(), String> {
    let list = agents.as_array().ok_or("agents: expected a list")?;
    match list.len() {
        0 => return Ok(()),
        1 => {}
        n => return Err(format!("agents: {n} agents; runner runs one agent per job")),
    }
    let mut a = Section::new("agents[0]", &list[0])?;
    s.agent = a.typed("name", "a string")?;
    a.default_only("import_path", &[])?;
    // An installed agent's config gives these (runner records them from it); a built-in
    // agent takes none, so a value there would not be honoured.
    let builtin = s
        .agent
        .as_deref()
        .is_some_and(|n| adapter::AnyAgent::builtin(n).is_some());
    let catalogued = s
        .agent
        .as_deref()
        .is_some_and(|n| adapter::catalogue::entry(n).is_some());
    if catalogued {
        // A catalogue agent (`claude-code`, `codex`…) takes them as Harbor's do: -m, --ak
        // and --agent-env.
        s.agent_model = a.typed("model_name", "a string")?;
        let kwargs: Option<serde_json::Map<String, Value>> = a.typed("kwargs", "a mapping")?;
        s.agent_kwargs = kwargs
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(text) => format!("{k}={text}"),
                other => format!("{k}={other}"),
            })
            .collect();
        let env: Option<BTreeMap<String, String>> = a.typed("env", "a mapping of strings")?;
        s.agent_env = env
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
    }
    for field in ["model_name", "kwargs", "env"] {
        if builtin {
            a.default_only(field, &[])?;
        } else {
            let _ = a.take(field);
        }
    }
    for field in [
        "skills",
        "override_timeout_sec",
        "override_setup_timeout_sec",
        "max_timeout_sec",
        "extra_allowed_hosts",
        "mcp_servers",
        // Harbor 0.26's agent fields.
        "base_url",
        "model_api_key_name",
        "model_api_format",
        "skip_model_parsing",
        "n_concurrent",
        "concurrency_group",
        "resume_trajectory",
        "load_trajectory",
        "include_logs",
        "exclude_logs",
    ] {
        a.default_only(field, &[])?;
    }
    a.finish()
}

fn read_sources(
    datasets: Option<&Value>,
    tasks: Option<&Value>,
    s: &mut FileSettings,
) -> Result<(), String> {
    let datasets = match datasets {
        Some(v) => v.as_array().ok_or("datasets: expected a list")?.clone(),
        None => Vec::new(),
    };
    let tasks = match tasks {
        Some(v) => v.as_array().ok_or("tasks: expected a list")?.clone(),
        None => Vec::new(),
    };
    match (datasets.len(), tasks.len()) {
        (0, 0) => Ok(()),
        (1, 0) => {
            let mut d = Section::new("datasets[0]", &datasets[0])?;
            s.path = d.typed("path", "a path")?;
            read_registry_dataset(&mut d, s)?;
            s.include = d.typed("task_names", "a list of globs")?;
            s.exclude = d.typed("exclude_task_names", "a list of globs")?;
            s.n_tasks = d.typed("n_tasks", "a whole number")?;
            for field in ["ref", "overwrite", "download_dir", "repo"] {
                d.default_only(field, &[])?;
            }
            d.finish()
        }
        (0, 1) => {
            let mut t = Section::new("tasks[0]", &tasks[0])?;
            s.path = t.typed("path", "a path")?;
            if s.path.is_none() {
                return Err(
                    "tasks[0]: registry tasks (name/ref) are not supported; give its local path"
                        .into(),
                );
            }
            for field in [
                "git_url",
                "git_commit_id",
                "name",
                "ref",
                "overwrite",
                "download_dir",
                "source",
            ] {
                t.default_only(field, &[])?;
            }
            t.finish()
        }
        (d, t) => Err(format!(
            "{d} dataset(s) and {t} task(s): runner runs one dataset or one task per job"
        )),
    }
}

/// `datasets[0]`'s registry fields: `name` and `version` (a dataset by name, as -d), and its
/// registry as Harbor 0.26 writes it (`registry_url`/`registry_path`) or as 0.13 and the
/// leaderboard's configs do (`registry: {url}` or `{path}`).
fn read_registry_dataset(d: &mut Section, s: &mut FileSettings) -> Result<(), String> {
    let name: Option<String> = d.typed("name", "a string")?;
    let version: Option<String> = d.typed("version", "a string (quote it: \"2.0\")")?;
    s.registry_url = d.typed("registry_url", "a URL")?;
    s.registry_path = d.typed("registry_path", "a path")?;
    if let Some(registry) = d.take("registry").filter(|v| !v.is_null()) {
        let mut r = Section::new("datasets[0].registry", &registry)?;
        let url: Option<String> = r.typed("url", "a URL")?;
        let path: Option<PathBuf> = r.typed("path", "a path")?;
        let _ = r.take("name");
        r.finish()?;
        s.registry_url = s.registry_url.take().or(url);
        s.registry_path = s.registry_path.take().or(path);
    }
    if s.registry_url.is_some() && s.registry_path.is_some() {
        return Err("datasets[0]: give one registry, a URL or a path, not both".into());
    }
    match (&s.path, name) {
        (Some(_), Some(_)) => Err(
            "datasets[0]: gives both path and name; a dataset is a local path or a registry name"
                .into(),
        ),
        (None, None) => Err(
            "datasets[0]: names no dataset; give its path, or its name (and version) in a registry"
                .into(),
        ),
        (Some(_), None) => {
            if version.is_some() || s.registry_url.is_some() || s.registry_path.is_some() {
                return Err(
                    "datasets[0]: version and registry go with a dataset name, not a path".into(),
                );
            }
            Ok(())
        }
        (None, Some(name)) => {
            s.dataset = Some(match version {
                Some(v) => format!("{name}@{v}"),
                None => name,
            });
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
