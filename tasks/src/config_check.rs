//! The semantic checks of a parsed `task.toml`: Harbor 0.13.1's own model validators (package
//! name, legacy sizes, network policies, allowed hosts, MCP servers, TPU topology, verifier mode),
//! Harbor 0.26's for the schema 1.4 fields (package version, collect hooks, artifact services,
//! MCP headers) and the runner's ranges for every duration, count and size ([`crate::limits`]). Each error
//! names the file, the dotted field and the limit or the fix.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use crate::collect::{MAIN_SERVICE, check_service_name};
use crate::config::{
    AgentSection, Artifact, EnvironmentSection, Healthcheck, McpTransport, MinReward, NetworkMode,
    StepConfig, TaskConfig, VerifierEnvironmentMode, VerifierSection, parse_size_mb,
};
use crate::error::TaskError;
use crate::limits::{self, Range};

/// Harbor's `ORG_NAME_PATTERN` for `[task].name`.
static ORG_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")
        .expect("org/name pattern compiles")
});
/// One DNS label, as Harbor's `_NETWORK_HOST_LABEL_PATTERN`.
static HOST_LABEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$").expect("host label pattern compiles")
});
/// Harbor's TPU topology pattern.
static TOPOLOGY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[1-9]\d*(x[1-9]\d*)+$").expect("topology pattern compiles"));

/// Checks (and normalises, as Harbor's validators do) a parsed config.
pub(crate) fn check(path: &Path, config: &mut TaskConfig) -> Result<(), TaskError> {
    let fail = |field: &str, problem: String| TaskError::invalid(path, field, problem);
    if let Some(task) = &config.task
        && (!ORG_NAME.is_match(&task.name) || task.name.contains(".."))
    {
        return Err(fail(
            "task.name",
            format!(
                "{:?} must be \"org/name\": letters, digits, . _ -, each part starting with a letter or digit, no \"..\"",
                task.name
            ),
        ));
    }
    if let Some(version) = config.task.as_ref().and_then(|t| t.version.as_deref())
        && version.is_empty()
    {
        return Err(fail(
            "task.version",
            "must not be empty: any non-empty string (usually semantic, \"1.0.0\"), or leave it out".into(),
        ));
    }
    artifacts(&mut config.artifacts, "artifacts").map_err(|(f, p)| fail(&f, p))?;
    environment(&mut config.environment, "environment").map_err(|(f, p)| fail(&f, p))?;
    agent(&mut config.agent, "agent").map_err(|(f, p)| fail(&f, p))?;
    verifier(&mut config.verifier, "verifier").map_err(|(f, p)| fail(&f, p))?;
    let mut seen = std::collections::BTreeSet::new();
    for (i, step) in config.steps.iter_mut().enumerate() {
        let prefix = format!("steps[{i}]");
        self::step(step, &prefix).map_err(|(f, p)| fail(&f, p))?;
        if !seen.insert(step.name.clone()) {
            return Err(fail(
                &format!("{prefix}.name"),
                format!(
                    "{:?} names two steps; each step needs its own steps/<name>/ directory",
                    step.name
                ),
            ));
        }
    }
    Ok(())
}

/// A failed check: the dotted field and what is wrong.
type Problem = (String, String);

fn at(prefix: &str, field: &str) -> String {
    format!("{prefix}.{field}")
}

fn range(prefix: &str, field: &str, value: f64, allowed: Range) -> Result<(), Problem> {
    allowed
        .check(value)
        .map_err(|p| (at(prefix, field), p.to_string()))
}

fn step(step: &mut StepConfig, prefix: &str) -> Result<(), Problem> {
    let name = &step.name;
    // Harbor joins the name onto steps/ unchecked; anything but one plain component escapes it.
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.contains('/')
        || name.contains('\\')
        || name.contains('\0')
    {
        return Err((
            at(prefix, "name"),
            format!("{name:?} must be a plain directory name under steps/"),
        ));
    }
    agent(&mut step.agent, &at(prefix, "agent"))?;
    verifier(&mut step.verifier, &at(prefix, "verifier"))?;
    artifacts(&mut step.artifacts, &at(prefix, "artifacts"))?;
    if let Some(check) = &step.healthcheck {
        healthcheck(check, &at(prefix, "healthcheck"))?;
    }
    let gates: Vec<f64> = match &step.min_reward {
        Some(MinReward::Threshold(v)) => vec![*v],
        Some(MinReward::PerKey(map)) => map.values().copied().collect(),
        None => Vec::new(),
    };
    if gates.iter().any(|v| !v.is_finite()) {
        return Err((
            at(prefix, "min_reward"),
            "must be a finite number (or a table of finite numbers)".into(),
        ));
    }
    Ok(())
}

fn agent(agent: &mut AgentSection, prefix: &str) -> Result<(), Problem> {
    if let Some(timeout) = agent.timeout_sec {
        range(prefix, "timeout_sec", timeout, limits::TIMEOUT)?;
    }
    phase_policy(agent.network_mode, &mut agent.allowed_hosts, prefix)
}

fn verifier(verifier: &mut VerifierSection, prefix: &str) -> Result<(), Problem> {
    range(prefix, "timeout_sec", verifier.timeout_sec, limits::TIMEOUT)?;
    phase_policy(verifier.network_mode, &mut verifier.allowed_hosts, prefix)?;
    if verifier.environment_mode == Some(VerifierEnvironmentMode::Shared)
        && verifier.environment.is_some()
    {
        return Err((
            at(prefix, "environment_mode"),
            format!(
                "\"shared\" is incompatible with [{prefix}.environment]; either omit the environment or set environment_mode = \"separate\""
            ),
        ));
    }
    if let Some(env) = &mut verifier.environment {
        environment(env, &at(prefix, "environment"))?;
    }
    for (i, hook) in verifier.collect.iter_mut().enumerate() {
        let field = format!("{prefix}.collect[{i}]");
        hook.service = check_service_name(&hook.service).map_err(|p| {
            (
                at(&field, "service"),
                format!("{p} (\"main\" is the agent's container)"),
            )
        })?;
        range(&field, "timeout_sec", hook.timeout_sec, limits::TIMEOUT)?;
        if hook.command.trim().is_empty() {
            return Err((at(&field, "command"), "must not be empty".into()));
        }
    }
    Ok(())
}

/// Harbor 0.26's `ArtifactConfig` validators: no `..` in a source, a valid compose service
/// name, and an absolute source for a service other than `main` (a sidecar has no agent's
/// working directory to be relative to).
fn artifacts(artifacts: &mut [Artifact], prefix: &str) -> Result<(), Problem> {
    for (i, artifact) in artifacts.iter_mut().enumerate() {
        let field = format!("{prefix}[{i}]");
        let (source, service) = match artifact {
            Artifact::Path(source) => (source, &mut None),
            Artifact::Spec {
                source, service, ..
            } => (source, service),
        };
        if source.split('/').any(|part| part == "..") {
            return Err((
                at(&field, "source"),
                format!("Artifact source must not contain '..' components, got: {source:?}"),
            ));
        }
        if let Some(name) = service {
            *name = check_service_name(name).map_err(|p| (at(&field, "service"), p))?;
            if name != MAIN_SERVICE && !source.starts_with('/') {
                return Err((
                    at(&field, "source"),
                    format!(
                        "Artifact source {source:?} collected from service {name:?} must be an absolute path."
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `[agent]`/`[verifier]` policies: `allowed_hosts` only with `network_mode = "allowlist"`,
/// which needs at least one host (Harbor's `_validate_network_policy_fields`).
fn phase_policy(
    mode: Option<NetworkMode>,
    hosts: &mut Option<Vec<String>>,
    prefix: &str,
) -> Result<(), Problem> {
    normalise_hosts(hosts, prefix)?;
    match mode {
        None if hosts.is_some() => Err((
            at(prefix, "allowed_hosts"),
            "allowed_hosts is only valid when network_mode = \"allowlist\"".into(),
        )),
        None => Ok(()),
        Some(mode) => policy(mode, hosts.as_deref().unwrap_or_default(), prefix),
    }
}

/// Harbor's `NetworkPolicy` validator.
fn policy(mode: NetworkMode, hosts: &[String], prefix: &str) -> Result<(), Problem> {
    match (mode, hosts.is_empty()) {
        (NetworkMode::Allowlist, true) => Err((
            at(prefix, "allowed_hosts"),
            "allowed_hosts must be non-empty when network_mode = \"allowlist\"".into(),
        )),
        (NetworkMode::Public | NetworkMode::NoNetwork, false) => Err((
            at(prefix, "allowed_hosts"),
            format!(
                "allowed_hosts is only valid when network_mode = \"allowlist\" (it is {:?})",
                mode.as_str()
            ),
        )),
        _ => Ok(()),
    }
}

/// Validates and normalises allowed hosts as Harbor's `_validate_allowed_host_names`: trimmed,
/// lower-cased, trailing dot removed; hostnames or `*.suffix`, never URLs, ports or paths.
fn normalise_hosts(hosts: &mut Option<Vec<String>>, prefix: &str) -> Result<(), Problem> {
    let Some(hosts) = hosts else { return Ok(()) };
    let field = at(prefix, "allowed_hosts");
    for host in hosts.iter_mut() {
        let normal = host.trim().to_lowercase();
        let normal = normal.trim_end_matches('.').to_owned();
        if normal.is_empty() {
            return Err((
                field,
                "allowed_hosts entries must be non-empty hostnames".into(),
            ));
        }
        if normal.contains("://") || normal.contains('/') || normal.contains(':') {
            return Err((
                field,
                format!(
                    "{host:?}: allowed_hosts entries must be hostnames, not URLs, ports, or paths"
                ),
            ));
        }
        let bare = match normal.strip_prefix("*.") {
            Some("") => {
                return Err((
                    field,
                    format!(
                        "{host:?}: allowed_hosts wildcard entries must include a hostname suffix"
                    ),
                ));
            }
            Some(suffix) => suffix,
            None if normal.contains('*') => {
                return Err((
                    field,
                    format!(
                        "{host:?}: allowed_hosts wildcard entries must use a leading '*.' prefix"
                    ),
                ));
            }
            None => normal.as_str(),
        };
        if !bare.split('.').all(|label| HOST_LABEL.is_match(label)) {
            return Err((
                field,
                format!(
                    "{host:?}: allowed_hosts entries must be valid hostnames or leading wildcard host patterns containing only letters, digits, hyphens, and dots"
                ),
            ));
        }
        *host = normal;
    }
    Ok(())
}

fn environment(env: &mut EnvironmentSection, prefix: &str) -> Result<(), Problem> {
    legacy_size(
        &env.memory,
        &mut env.memory_mb,
        prefix,
        ("memory", "memory_mb"),
    )?;
    legacy_size(
        &env.storage,
        &mut env.storage_mb,
        prefix,
        ("storage", "storage_mb"),
    )?;
    range(
        prefix,
        "build_timeout_sec",
        env.build_timeout_sec,
        limits::TIMEOUT,
    )?;
    if let Some(cpus) = env.cpus {
        range(prefix, "cpus", cpus, limits::CPUS)?;
    }
    if let Some(mb) = env.memory_mb {
        limits::check_positive_int(mb, limits::MAX_MEMORY_MB, " MB (4 TiB)")
            .map_err(|p| (at(prefix, "memory_mb"), p.to_string()))?;
    }
    if let Some(mb) = env.storage_mb {
        limits::check_positive_int(mb, limits::MAX_STORAGE_MB, " MB (1 PiB)")
            .map_err(|p| (at(prefix, "storage_mb"), p.to_string()))?;
    }
    if let Some(gpus) = env.gpus
        && gpus > limits::MAX_GPUS
    {
        return Err((
            at(prefix, "gpus"),
            format!(
                "{gpus} is out of range: it must be at most {}",
                limits::MAX_GPUS
            ),
        ));
    }
    if let Some(check) = &env.healthcheck {
        healthcheck(check, &at(prefix, "healthcheck"))?;
    }
    normalise_hosts(&mut env.allowed_hosts, prefix)?;
    policy(
        env.network_mode.unwrap_or(NetworkMode::Public),
        env.allowed_hosts.as_deref().unwrap_or_default(),
        prefix,
    )?;
    for (i, server) in env.mcp_servers.iter().enumerate() {
        let field = format!("{prefix}.mcp_servers[{i}]");
        let empty = |v: &Option<String>| v.as_deref().is_none_or(str::is_empty);
        match server.transport {
            McpTransport::Sse | McpTransport::StreamableHttp if empty(&server.url) => {
                let name = if server.transport == McpTransport::Sse {
                    "sse"
                } else {
                    "streamable-http"
                };
                return Err((
                    format!("{field}.url"),
                    format!("'url' is required for transport '{name}'"),
                ));
            }
            McpTransport::Stdio if empty(&server.command) => {
                return Err((
                    format!("{field}.command"),
                    "'command' is required for transport 'stdio'".into(),
                ));
            }
            McpTransport::Stdio if !server.headers.is_empty() => {
                return Err((
                    format!("{field}.headers"),
                    "'headers' is only supported for HTTP MCP transports".into(),
                ));
            }
            _ => {}
        }
        crate::mcp_headers::check_headers(&server.headers)
            .map_err(|e| (format!("{field}.headers"), e.to_string()))?;
    }
    if let Some(tpu) = &mut env.tpu {
        if tpu.kind.is_empty() {
            return Err((at(prefix, "tpu.type"), "must not be empty".into()));
        }
        let topology = tpu.topology.trim().to_owned();
        if !TOPOLOGY.is_match(&topology) {
            return Err((
                at(prefix, "tpu.topology"),
                format!(
                    "invalid TPU topology {:?}: expected dimensions separated by 'x' with each dimension a positive integer (e.g. '2x4', '2x2x1')",
                    tpu.topology
                ),
            ));
        }
        tpu.topology = topology;
    }
    Ok(())
}

/// The legacy `memory`/`storage` string: must parse, must agree with the `_mb` field when both
/// are given (Harbor: "Conflicting 'memory' and 'memory_mb' values"), and fills it otherwise.
fn legacy_size(
    legacy: &Option<String>,
    mb: &mut Option<u64>,
    prefix: &str,
    (name, mb_name): (&str, &str),
) -> Result<(), Problem> {
    let Some(text) = legacy else { return Ok(()) };
    let Some(parsed) = parse_size_mb(text) else {
        return Err((
            at(prefix, name),
            format!(
                "{text:?} is not a size like \"2G\", \"512M\" or \"1048576K\"; or write {mb_name} = <MB>"
            ),
        ));
    };
    match *mb {
        Some(given) if given != parsed => Err((
            at(prefix, name),
            format!(
                "Conflicting '{name}' and '{mb_name}' values: {name} = {text:?} ({parsed} MB) != {mb_name} = {given}; keep only {mb_name}"
            ),
        )),
        _ => {
            *mb = Some(parsed);
            Ok(())
        }
    }
}

fn healthcheck(check: &Healthcheck, prefix: &str) -> Result<(), Problem> {
    range(
        prefix,
        "timeout_sec",
        check.timeout_sec,
        limits::HEALTHCHECK_TIMEOUT,
    )?;
    range(
        prefix,
        "interval_sec",
        check.interval_sec,
        limits::HEALTHCHECK_INTERVAL,
    )?;
    range(
        prefix,
        "start_interval_sec",
        check.start_interval_sec,
        limits::HEALTHCHECK_INTERVAL,
    )?;
    range(
        prefix,
        "start_period_sec",
        check.start_period_sec,
        limits::HEALTHCHECK_START_PERIOD,
    )?;
    if check.retries > limits::MAX_HEALTHCHECK_RETRIES {
        return Err((
            at(prefix, "retries"),
            format!(
                "{} is out of range: it must be at most {}",
                check.retries,
                limits::MAX_HEALTHCHECK_RETRIES
            ),
        ));
    }
    let worst = check.worst_case_sec();
    if worst > limits::MAX_TIMEOUT_SEC {
        return Err((
            prefix.to_owned(),
            format!(
                "start_period_sec + retries × (timeout_sec + interval_sec) can take {worst:.0} seconds; it must be at most {} seconds (1 week)",
                limits::MAX_TIMEOUT_SEC
            ),
        ));
    }
    Ok(())
}
