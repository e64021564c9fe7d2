//! `runner run -c FILE`: a job config in TOML, JSON or YAML with Harbor's `JobConfig` field
//! names (`harbor.models.job.config`), runner's own `<job>/config.json` included, so any job
//! can be run again as it was. Flags on the command line (and `RUNNER_*` variables) win over
//! the file.
//!
//! The file is read as a JSON value and walked field by field: a field runner has a flag for
//! sets that flag; a Harbor field runner does not support must keep Harbor's default (the
//! value a runner job records), else it is refused by name; an unknown field is refused by
//! name. Nothing is silently ignored, so a config never half-runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

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
    /// `environment.force_build`.
    pub force_build: Option<bool>,
    /// `agents[0].name`.
    pub agent: Option<String>,
    /// Runner-only `agent_config`: the installed agent's TOML, relative to the file.
    pub agent_config: Option<PathBuf>,
    /// `datasets[0].path` or `tasks[0].path`.
    pub path: Option<PathBuf>,
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

/// One object being read: its path in the document, and the fields not yet read.
struct Section {
    path: String,
    fields: Map<String, Value>,
}

impl Section {
    fn new(path: &str, value: &Value) -> Result<Section, String> {
        match value {
            Value::Object(map) => Ok(Section {
                path: path.to_owned(),
                fields: map.clone(),
            }),
            _ => Err(format!("{}: expected a table of fields", label(path))),
        }
    }

    fn name(&self, field: &str) -> String {
        if self.path.is_empty() {
            field.to_owned()
        } else {
            format!("{}.{field}", self.path)
        }
    }

    /// Takes a field; `null` counts as absent (Harbor writes unset options as null).
    fn take(&mut self, field: &str) -> Option<Value> {
        self.fields.remove(field).filter(|v| !v.is_null())
    }

    fn typed<T: serde::de::DeserializeOwned>(
        &mut self,
        field: &str,
        what: &str,
    ) -> Result<Option<T>, String> {
        let name = self.name(field);
        self.take(field)
            .map(|v| serde_json::from_value(v).map_err(|_| format!("{name}: expected {what}")))
            .transpose()
    }

    /// A field runner does not support: absent, or one of the values meaning "unused".
    fn default_only(&mut self, field: &str, allowed: &[Value]) -> Result<(), String> {
        match self.take(field) {
            None => Ok(()),
            Some(v) if is_empty(&v) || allowed.contains(&v) => Ok(()),
            Some(v) => Err(format!(
                "{}: {} is not supported by runner (leave it unset)",
                self.name(field),
                short(&v)
            )),
        }
    }

    /// Every field left is unknown.
    fn finish(self) -> Result<(), String> {
        match self.fields.keys().next() {
            None => Ok(()),
            Some(field) => Err(format!(
                "{}: unknown field (Harbor's JobConfig has no such field, and runner adds only agent_config, allow_container_secrets, instruction_suffix, pids_limit, max_download_mb, max_trial_log_mb, task_env_from, shard and n_shards)",
                self.name(field)
            )),
        }
    }
}

fn label(path: &str) -> &str {
    if path.is_empty() {
        "the document"
    } else {
        path
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
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
    root.default_only("debug", &[])?;
    for field in ["metrics", "artifacts", "extra_instruction_paths", "plugins"] {
        root.default_only(field, &[])?;
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
            if s.path.is_none() {
                return Err(
                    "datasets[0]: registry datasets (name/version) are not supported; give its local path".into(),
                );
            }
            s.include = d.typed("task_names", "a list of globs")?;
            s.exclude = d.typed("exclude_task_names", "a list of globs")?;
            s.n_tasks = d.typed("n_tasks", "a whole number")?;
            for field in [
                "name",
                "version",
                "ref",
                "registry_url",
                "registry_path",
                "overwrite",
                "download_dir",
                "registry",
            ] {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(ext: &str, text: &str) -> Result<FileSettings, String> {
        settings_of(&parse_text(Some(ext), text)?)
    }

    #[test]
    fn the_three_formats_read_the_same_settings() {
        let toml = r#"
            n_attempts = 3
            n_concurrent_trials = 2
            timeout_multiplier = 1.5
            [[agents]]
            name = "oracle"
            [[datasets]]
            path = "tasks/examples"
            task_names = ["hello-*"]
            n_tasks = 1
            [retry]
            max_retries = 2
            exclude_exceptions = ["AgentTimeoutError"]
        "#;
        let yaml = "n_attempts: 3\nn_concurrent_trials: 2\ntimeout_multiplier: 1.5\nagents:\n  - name: oracle\ndatasets:\n  - {path: tasks/examples, task_names: [hello-*], n_tasks: 1}\nretry:\n  max_retries: 2\n  exclude_exceptions: [AgentTimeoutError]\n";
        let json = r#"{"n_attempts": 3, "n_concurrent_trials": 2, "timeout_multiplier": 1.5,
            "agents": [{"name": "oracle", "model_name": null}],
            "datasets": [{"path": "tasks/examples", "task_names": ["hello-*"], "n_tasks": 1}],
            "retry": {"max_retries": 2, "exclude_exceptions": ["AgentTimeoutError"]}}"#;
        let expected = FileSettings {
            k: Some(3),
            n_concurrent: Some(2),
            multipliers: BTreeMap::from([("timeout_multiplier", 1.5)]),
            agent: Some("oracle".into()),
            path: Some("tasks/examples".into()),
            include: Some(vec!["hello-*".into()]),
            n_tasks: Some(1),
            max_retries: Some(2),
            retry_exclude: Some(vec!["AgentTimeoutError".into()]),
            ..FileSettings::default()
        };
        assert_eq!(settings("toml", toml), Ok(expected.clone()));
        assert_eq!(settings("yaml", yaml), Ok(expected.clone()));
        assert_eq!(settings("json", json), Ok(expected));
    }

    #[test]
    fn a_runner_job_config_reads_back() {
        let config = tasks::records::JobConfig {
            job_name: "j".into(),
            jobs_dir: "jobs".into(),
            n_attempts: 2,
            multipliers: tasks::Multipliers::default(),
            debug: false,
            n_concurrent_trials: 4,
            quiet: false,
            retry: engine::job::RetryPolicy::new(1, &[], None)
                .unwrap()
                .record(),
            environment: Default::default(),
            verifier: Default::default(),
            metrics: Vec::new(),
            agents: vec![tasks::records::AgentConfig {
                name: Some("nop".into()),
                ..Default::default()
            }],
            datasets: vec![tasks::records::DatasetRef {
                path: Some("/d".into()),
                task_names: Some(vec!["a*".into()]),
                ..Default::default()
            }],
            tasks: Vec::new(),
            artifacts: Vec::new(),
            extra_instruction_paths: Vec::new(),
            plugins: Vec::new(),
            allow_container_secrets: false,
            instruction_suffix: None,
            agent_config: Some("/agents/a.toml".into()),
            shard: Some(2),
            n_shards: Some(3),
            task_env_from: vec!["DATASET_VERSION".into()],
            merged_from: Vec::new(),
        };
        let s = settings_of(&serde_json::to_value(&config).unwrap()).unwrap();
        assert_eq!(
            (
                s.job_name.as_deref(),
                s.k,
                s.agent.as_deref(),
                s.max_retries
            ),
            (Some("j"), Some(2), Some("nop"), Some(1))
        );
        assert_eq!(s.task_env_from, Some(vec!["DATASET_VERSION".to_owned()]));
        assert_eq!(s.path, Some(PathBuf::from("/d")));
        assert_eq!(s.include, Some(vec!["a*".to_owned()]));
        assert_eq!(s.multipliers.get("timeout_multiplier"), Some(&1.0));
        assert_eq!(s.force_build, Some(false));
        assert_eq!(s.agent_config, Some(PathBuf::from("/agents/a.toml")));
        // A shard's config runs that shard again.
        assert_eq!(s.shard, Some(engine::job::Shard { index: 2, count: 3 }));
        for (doc, problem) in [
            (r#"{"shard": 2}"#, "give both"),
            (r#"{"shard": 4, "n_shards": 3}"#, "from 1 to N"),
        ] {
            let err = settings_of(&serde_json::from_str(doc).unwrap()).unwrap_err();
            assert!(
                err.starts_with("shard, n_shards: ") && err.contains(problem),
                "{err}"
            );
        }
    }

    #[test]
    fn unknown_and_unsupported_fields_are_named() {
        let cases = [
            (r#"{"n_atempts": 3}"#, "n_atempts: unknown field"),
            (
                r#"{"environment": {"override_cpus": 2}}"#,
                "environment.override_cpus: 2 is not supported",
            ),
            (
                r#"{"environment": {"type": "daytona"}}"#,
                "environment.type: \"daytona\" is not supported",
            ),
            (
                r#"{"datasets": [{"name": "terminal-bench", "version": "2.0"}]}"#,
                "datasets[0]: registry datasets",
            ),
            (
                r#"{"datasets": [{"path": "d", "colour": 1}]}"#,
                "datasets[0].colour: unknown field",
            ),
            (
                r#"{"agents": [{"name": "a"}, {"name": "b"}]}"#,
                "agents: 2 agents",
            ),
            (
                r#"{"n_attempts": "five"}"#,
                "n_attempts: expected a whole number",
            ),
            (r#"{"retry": {"max_wait_sec": 5}}"#, "retry.max_wait_sec: 5"),
            (r#"{"debug": true}"#, "debug: true is not supported"),
            (
                r#"{"agents": [{"name": "oracle", "model_name": "openai/gpt-5"}]}"#,
                "agents[0].model_name: \"openai/gpt-5\" is not supported",
            ),
            (r#"[1]"#, "the document: expected a table"),
        ];
        for (text, expected) in cases {
            let err = settings("json", text).unwrap_err();
            assert!(err.starts_with(expected), "{text}: {err}");
        }
        assert!(
            parse_text(Some("ini"), "")
                .unwrap_err()
                .contains(".toml, .json, .yaml")
        );
        assert!(
            settings("yaml", "n_attempts: [")
                .unwrap_err()
                .starts_with("not valid YAML")
        );
    }

    #[test]
    fn a_deeply_nested_config_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let deep = 300_000;
        for (name, text, says) in [
            (
                "job.yaml",
                format!("agents:\n{}x\n", "- ".repeat(deep)),
                "nested deeper than 128",
            ),
            (
                "job.json",
                format!("{{\"agents\": {}{}}}", "[".repeat(deep), "]".repeat(deep)),
                "recursion limit exceeded",
            ),
            (
                "job.toml",
                format!("agents = {}{}\n", "[".repeat(deep), "]".repeat(deep)),
                "not valid TOML",
            ),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let err = load(&path).unwrap_err().to_string();
            assert!(err.contains(name) && err.contains(says), "{name}: {err}");
        }
    }
}
