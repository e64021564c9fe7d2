//! One compose service, as far as runner runs it: `build` (a context directory, its
//! Dockerfile, build arguments and target stage), `image`, `command`, `entrypoint`,
//! `environment`, `depends_on` (with conditions), `healthcheck`, named `volumes`,
//! `working_dir`, `user`; `expose` and `restart` are read and have no effect (services share
//! the trial network, and a trial is too short for restarts to matter). Any other key is
//! refused by serde, by name.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use bollard::models::HealthConfig;
use serde::Deserialize;
use serde_json::Value;

use super::file::ComposeError;
use crate::image::build_spec::{BuildSpec, DOCKERFILE};

/// A service definition.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceDef {
    /// Build context (relative to `environment/`).
    pub build: Option<Build>,
    /// Image to run when there is no build.
    pub image: Option<String>,
    /// The command (exec form, or a string split like a shell would).
    pub command: Option<Command>,
    /// The entrypoint.
    pub entrypoint: Option<Command>,
    /// Container environment.
    #[serde(default)]
    pub environment: Option<Environment>,
    /// Services to start first, with the condition to wait for.
    pub depends_on: Option<DependsOn>,
    /// The engine's healthcheck.
    pub healthcheck: Option<Healthcheck>,
    /// `volume:/path[:ro]` mounts of top-level named volumes.
    #[serde(default)]
    pub volumes: Vec<String>,
    /// Working directory.
    pub working_dir: Option<String>,
    /// User of the container's process.
    pub user: Option<StringOrInt>,
    /// Ports offered to other services (documentation only on one network).
    #[serde(default)]
    pub expose: Vec<Value>,
    /// Restart policy (no effect within a trial).
    pub restart: Option<String>,
}

/// `build: ./dir` or `build: {context: ./dir, dockerfile: Dockerfile, args: {…}, target: t}`;
/// any other key of the long form is refused by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Build {
    /// The context directory, relative to `environment/` (or absolute, as `${CONTEXT_DIR}`
    /// gives it); `environment/` itself when unset.
    pub context: Option<String>,
    /// The Dockerfile's path relative to the context; `Dockerfile` when unset.
    pub dockerfile: Option<String>,
    /// Build arguments (a key without a value is left out: it would come from the host).
    pub args: BTreeMap<String, String>,
    /// The stage to build.
    pub target: Option<String>,
}

/// The long form of `build:`, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BuildMap {
    context: Option<String>,
    dockerfile: Option<String>,
    args: Option<Environment>,
    target: Option<String>,
}

impl<'de> Deserialize<'de> for Build {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match Value::deserialize(deserializer)? {
            Value::String(context) => Ok(Build {
                context: Some(context),
                ..Build::default()
            }),
            map @ Value::Object(_) => {
                let map: BuildMap = serde_json::from_value(map)
                    .map_err(|e| D::Error::custom(format!("build: {e}")))?;
                Ok(Build {
                    context: map.context,
                    dockerfile: map.dockerfile,
                    args: map
                        .args
                        .map(|a| a.pairs())
                        .unwrap_or_default()
                        .into_iter()
                        .collect(),
                    target: map.target,
                })
            }
            _ => Err(D::Error::custom(
                "build: expected a context path or a mapping with context, dockerfile, args, target",
            )),
        }
    }
}

/// A service's `build` that cannot be built from the task's files; the caller prefixes the
/// service (`services.main.`, `compose service x: `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildSectionError {
    /// `build.context` is not a directory inside `environment/` (missing, or escaping it).
    #[error("build.context {0:?} must be a directory inside environment/")]
    Context(String),
    /// `build.dockerfile` is not a file inside the build context.
    #[error("build.dockerfile {dockerfile:?} must be a file inside the build context {context:?}")]
    Dockerfile {
        /// The Dockerfile as written.
        dockerfile: String,
        /// The context as written.
        context: String,
    },
}

/// A service's `healthcheck` the engine cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HealthcheckError {
    /// A `test` list whose first word is not `CMD`, `CMD-SHELL` or `NONE`.
    #[error("test must start with CMD, CMD-SHELL or NONE")]
    Test,
    /// A duration field that is not a compose duration.
    #[error("{field}: {text:?} is not a duration like 5s or 1m30s")]
    Duration {
        /// `interval`, `timeout`, `start_period` or `start_interval`.
        field: &'static str,
        /// The text given.
        text: String,
    },
}

impl Build {
    /// The context directory as written, relative to `environment/` (`.` when unset).
    pub fn context(&self) -> &str {
        self.context.as_deref().unwrap_or(".")
    }

    /// The build, checked: the context is a directory inside `env_dir` (the compose file's
    /// directory, which the task carries whole) and the Dockerfile a file inside the context.
    pub fn spec(&self, env_dir: &Path) -> Result<BuildSpec, BuildSectionError> {
        let inside = |path: &Path, root: &Path| {
            path.canonicalize()
                .ok()
                .zip(root.canonicalize().ok())
                .filter(|(p, r)| p.starts_with(r))
                .map(|(p, _)| p)
        };
        let context = inside(&env_dir.join(self.context()), env_dir)
            .filter(|c| c.is_dir())
            .ok_or_else(|| BuildSectionError::Context(self.context().to_owned()))?;
        let dockerfile = self.dockerfile.as_deref().unwrap_or(DOCKERFILE);
        let file = inside(&context.join(dockerfile), &context)
            .filter(|f| f.is_file())
            .ok_or_else(|| BuildSectionError::Dockerfile {
                dockerfile: dockerfile.to_owned(),
                context: self.context().to_owned(),
            })?;
        let relative = file.strip_prefix(&context).unwrap_or(&file);
        let dockerfile = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        Ok(BuildSpec {
            context,
            dockerfile,
            args: self.args.clone(),
            target: self.target.clone(),
        })
    }
}

/// A command in exec form or as one string.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Command {
    /// `["python3", "-m", "http.server"]`.
    List(Vec<String>),
    /// `python3 -m http.server`, split on white space outside quotes, as compose does.
    Text(String),
}

impl Command {
    /// The argument vector.
    pub fn argv(&self) -> Vec<String> {
        match self {
            Command::List(items) => items.clone(),
            Command::Text(text) => split_words(text),
        }
    }
}

/// A user name or id.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum StringOrInt {
    /// A name (or `uid:gid`).
    Text(String),
    /// A numeric id.
    Int(i64),
}

impl StringOrInt {
    /// The value as the engine takes it.
    pub fn text(&self) -> String {
        match self {
            StringOrInt::Text(t) => t.clone(),
            StringOrInt::Int(i) => i.to_string(),
        }
    }
}

/// `environment:` as a mapping or a list of `KEY=VALUE`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Environment {
    /// `{KEY: value}`.
    Map(BTreeMap<String, Option<Value>>),
    /// `["KEY=value"]`.
    List(Vec<String>),
}

impl Environment {
    /// The `KEY=VALUE` pairs; a key without a value is left out.
    pub fn pairs(&self) -> Vec<(String, String)> {
        match self {
            Environment::Map(map) => map
                .iter()
                .filter_map(|(k, v)| {
                    let value = match v.as_ref()? {
                        Value::String(s) => s.clone(),
                        Value::Null => return None,
                        other => other.to_string(),
                    };
                    Some((k.clone(), value))
                })
                .collect(),
            Environment::List(items) => items
                .iter()
                .filter_map(|item| {
                    let (k, v) = item.split_once('=')?;
                    Some((k.to_owned(), v.to_owned()))
                })
                .collect(),
        }
    }
}

/// `depends_on:` as a list of names or a mapping with conditions.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum DependsOn {
    /// `[db, cache]`: wait for them to start.
    List(Vec<String>),
    /// `{db: {condition: service_healthy}}`.
    Map(BTreeMap<String, Dependency>),
}

/// One long-form dependency.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dependency {
    /// What to wait for.
    #[serde(default)]
    pub condition: Condition,
    /// Compose's `restart` and `required` flags have no effect here.
    #[serde(default)]
    pub restart: Option<bool>,
    /// Whether the dependency must exist (always true here).
    #[serde(default)]
    pub required: Option<bool>,
}

/// A `depends_on` condition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum Condition {
    /// Running.
    #[default]
    #[serde(rename = "service_started")]
    Started,
    /// Its healthcheck passed.
    #[serde(rename = "service_healthy")]
    Healthy,
    /// Exited with status 0.
    #[serde(rename = "service_completed_successfully")]
    CompletedSuccessfully,
}

impl std::fmt::Display for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Condition::Started => "service_started",
            Condition::Healthy => "service_healthy",
            Condition::CompletedSuccessfully => "service_completed_successfully",
        })
    }
}

/// `healthcheck:` (Docker's semantics; durations like `2s`, `1m30s`, `500ms`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Healthcheck {
    /// `["CMD", …]`, `["CMD-SHELL", "…"]`, `["NONE"]` or a shell string.
    pub test: Option<Command>,
    /// Between checks.
    pub interval: Option<String>,
    /// One check's deadline.
    pub timeout: Option<String>,
    /// Failures before unhealthy.
    pub retries: Option<i64>,
    /// Failures in this period do not count.
    pub start_period: Option<String>,
    /// Between checks during the start period.
    pub start_interval: Option<String>,
    /// `true` turns the image's healthcheck off.
    #[serde(default)]
    pub disable: bool,
}

/// A named-volume mount of a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeMount {
    /// The top-level volume's name.
    pub name: String,
    /// The path in the container.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
}

impl ServiceDef {
    /// Checks what serde cannot: build or image present (for sidecars), durations, mounts.
    pub fn check(&self, name: &str) -> Result<(), ComposeError> {
        let at = |what: String| ComposeError::new(format!("services.{name}.{what}"));
        if name != super::file::MAIN_SERVICE && self.build.is_none() && self.image.is_none() {
            return Err(at("build: a sidecar needs `build` or `image`".into()));
        }
        if let Some(check) = &self.healthcheck {
            check
                .config()
                .map_err(|e| at(format!("healthcheck: {e}")))?;
        }
        self.named_volumes()
            .map_err(|e| at(format!("volumes: {}", e.0)))?;
        Ok(())
    }

    /// The services this one waits for, with their conditions.
    pub fn dependencies(&self) -> Vec<(&str, Condition)> {
        match &self.depends_on {
            None => Vec::new(),
            Some(DependsOn::List(names)) => names
                .iter()
                .map(|n| (n.as_str(), Condition::Started))
                .collect(),
            Some(DependsOn::Map(map)) => {
                map.iter().map(|(n, d)| (n.as_str(), d.condition)).collect()
            }
        }
    }

    /// `KEY=VALUE` pairs of `environment` (a key without a value is left out, as compose
    /// leaves it to the host, which runner never passes through).
    pub fn env(&self) -> Vec<(String, String)> {
        self.environment
            .as_ref()
            .map(Environment::pairs)
            .unwrap_or_default()
    }

    /// The service's volume mounts; host paths and anonymous volumes are refused.
    pub fn named_volumes(&self) -> Result<Vec<VolumeMount>, ComposeError> {
        self.volumes
            .iter()
            .map(|spec| {
                let parts: Vec<&str> = spec.split(':').collect();
                let (name, target, mode) = match parts.as_slice() {
                    [name, target] => (*name, *target, None),
                    [name, target, mode] => (*name, *target, Some(*mode)),
                    _ => {
                        return Err(ComposeError::new(format!(
                            "{spec:?}: use the short form `volume:/path[:ro]`"
                        )));
                    }
                };
                if name.starts_with(['.', '/', '~']) || name.is_empty() {
                    return Err(ComposeError::new(format!(
                        "{spec:?}: host bind mounts are not supported; declare a named volume under the top-level `volumes`"
                    )));
                }
                if !target.starts_with('/') {
                    return Err(ComposeError::new(format!(
                        "{spec:?}: the target must be an absolute path"
                    )));
                }
                let read_only = match mode {
                    None | Some("rw") => false,
                    Some("ro") => true,
                    Some(other) => {
                        return Err(ComposeError::new(format!(
                            "{spec:?}: mode {other:?} is not supported (ro or rw)"
                        )));
                    }
                };
                Ok(VolumeMount {
                    name: name.to_owned(),
                    target: target.to_owned(),
                    read_only,
                })
            })
            .collect()
    }
}

impl Healthcheck {
    /// The engine's form of the check.
    pub fn config(&self) -> Result<HealthConfig, HealthcheckError> {
        if self.disable {
            return Ok(HealthConfig {
                test: Some(vec!["NONE".into()]),
                ..Default::default()
            });
        }
        let test = match &self.test {
            None => None,
            Some(Command::Text(text)) => Some(vec!["CMD-SHELL".to_owned(), text.clone()]),
            Some(Command::List(items)) => {
                match items.first().map(String::as_str) {
                    Some("CMD" | "CMD-SHELL" | "NONE") => {}
                    _ => return Err(HealthcheckError::Test),
                }
                Some(items.clone())
            }
        };
        let nanos =
            |field: &Option<String>, name: &'static str| -> Result<Option<i64>, HealthcheckError> {
                field
                    .as_deref()
                    .map(|text| {
                        parse_duration(text)
                            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
                            .ok_or_else(|| HealthcheckError::Duration {
                                field: name,
                                text: text.to_owned(),
                            })
                    })
                    .transpose()
            };
        Ok(HealthConfig {
            test,
            interval: nanos(&self.interval, "interval")?,
            timeout: nanos(&self.timeout, "timeout")?,
            retries: self.retries,
            start_period: nanos(&self.start_period, "start_period")?,
            start_interval: nanos(&self.start_interval, "start_interval")?,
        })
    }
}

/// Compose durations: a sequence of `<number><unit>` with units `h`, `m`, `s`, `ms`, `us`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" => 1e-6,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit_len..];
    }
    (total.is_finite() && total < 1e9).then(|| Duration::from_secs_f64(total))
}

/// Splits `text` on white space outside single or double quotes.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (None, c) => word.push(c),
        }
    }
    if started || !word.is_empty() {
        words.push(word);
    }
    words
}
