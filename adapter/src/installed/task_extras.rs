//! What a task offers an installed agent besides its instruction, passed as Harbor 0.13.1
//! passes it to its installed agents: the task's skills (`[environment] skills_dir`, a
//! directory in the container whose contents the agent copies into its own skills directory)
//! and its MCP servers (`[[environment.mcp_servers]]`).
//!
//! The agent config's `[skills]` and `[mcp]` sections say where they go; the defaults follow
//! Harbor's agents: skills are copied into `$HOME/.agents/skills` (Harbor's Codex and Pi
//! agents, the shared Agent Skills location), and the servers reach the agent's server as
//! `MCP_SERVERS_JSON` (Harbor's OpenHands SDK agent: a JSON list of `{name, transport, url}`
//! or `{name, transport, command, args}`) and in the submission's metadata. With
//! `[mcp] config_file`, they are also written there as `{"mcpServers": {...}}`, the shape
//! Harbor writes for Claude Code, Cursor, Cline and others.
//!
//! MCP `headers` (schema 1.4) go as Harbor 0.26 passes them to its Claude Code, Codex and
//! OpenCode agents: each value is resolved (its `${VAR}` templates from the agent's env: the
//! config's `[env]` and `--agent-env`) into a generated variable `MCP_AUTH_<hex>_<i>_<j>` of
//! the agent server's environment, and the config file's `headers` reference that variable
//! (`"${MCP_AUTH_…}"`), so the value is in no file. `MCP_SERVERS_JSON` carries no headers, as
//! in Harbor's OpenHands SDK agent. Unlike Harbor, the host's environment is not consulted: a
//! host variable would carry a credential past the container secret check.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tasks::config::{McpServer, McpTransport};
use tasks::mcp_headers::{self, HeaderEnv};
use tasks::{ExecRequest, Sandbox, Task, shell_quote};

use crate::agent::{AgentError, AgentErrorKind};

/// Harbor's default skills location for agents that follow the shared convention.
pub const DEFAULT_SKILLS_DIR: &str = "$HOME/.agents/skills";
/// The server env variable holding the task's MCP servers (Harbor's OpenHands SDK agent).
pub const MCP_SERVERS_ENV: &str = "MCP_SERVERS_JSON";

/// `[skills]` of the agent config.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SkillsSection {
    /// Where the task's skills are copied, in the container (`$HOME` is the agent user's);
    /// default [`DEFAULT_SKILLS_DIR`].
    #[serde(default)]
    pub dir: Option<String>,
}

/// `[mcp]` of the agent config.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// A file in the container to write the task's servers to as `{"mcpServers": {...}}`
    /// (`$HOME` is the agent user's); none by default.
    #[serde(default)]
    pub config_file: Option<String>,
}

impl SkillsSection {
    /// The directory skills are copied into.
    pub fn target(&self) -> &str {
        self.dir.as_deref().unwrap_or(DEFAULT_SKILLS_DIR)
    }
}

/// The servers as Harbor's OpenHands SDK agent receives them (`MCP_SERVERS_JSON`).
pub fn servers_list(servers: &[McpServer]) -> Value {
    Value::Array(
        servers
            .iter()
            .map(|server| {
                let mut entry = json!({
                    "name": server.name,
                    "transport": transport_name(server.transport),
                });
                if server.transport == McpTransport::Stdio {
                    if let Some(command) = &server.command {
                        entry["command"] = json!(command);
                    }
                    if !server.args.is_empty() {
                        entry["args"] = json!(server.args);
                    }
                } else if let Some(url) = &server.url {
                    entry["url"] = json!(url);
                }
                entry
            })
            .collect(),
    )
}

/// The servers as Harbor writes them for Claude Code and others: `{"mcpServers": {name:
/// {"type": "stdio", command, args} | {"type": "sse" | "http", url, headers?}}}`, each header
/// a `${VAR}` reference to its generated variable in `headers`.
pub fn mcp_servers_file(servers: &[McpServer], headers: &HeaderEnv) -> Value {
    let table: serde_json::Map<String, Value> = servers
        .iter()
        .map(|server| {
            let entry = match server.transport {
                McpTransport::Stdio => json!({
                    "type": "stdio",
                    "command": server.command,
                    "args": server.args,
                }),
                McpTransport::Sse => json!({"type": "sse", "url": server.url}),
                McpTransport::StreamableHttp => json!({"type": "http", "url": server.url}),
            };
            let mut entry = entry;
            if let Some(refs) = headers.refs.get(&server.name) {
                let refs: serde_json::Map<String, Value> = refs
                    .iter()
                    .map(|(name, variable)| (name.clone(), json!(format!("${{{variable}}}"))))
                    .collect();
                entry["headers"] = Value::Object(refs);
            }
            (server.name.clone(), entry)
        })
        .collect();
    json!({ "mcpServers": table })
}

fn transport_name(transport: McpTransport) -> &'static str {
    match transport {
        McpTransport::Stdio => "stdio",
        McpTransport::Sse => "sse",
        McpTransport::StreamableHttp => "streamable-http",
    }
}

/// The env the agent's server gets for `task`: `MCP_SERVERS_JSON` when it has servers, and
/// the resolved header variables of `headers`.
pub fn server_env(task: &Task, headers: &HeaderEnv) -> BTreeMap<String, String> {
    let servers = &task.config.environment.mcp_servers;
    if servers.is_empty() {
        return BTreeMap::new();
    }
    let mut env = headers.env.clone();
    env.insert(
        MCP_SERVERS_ENV.to_owned(),
        servers_list(servers).to_string(),
    );
    env
}

/// Resolves the headers of `task`'s MCP servers from the agent's env `agent_env` into
/// generated variables (see the module docs); an unset variable fails setup, naming the task,
/// server, header and variable (Harbor fails the trial before the agent runs, too).
pub fn resolve_headers(
    task: &Task,
    agent_env: &BTreeMap<String, String>,
) -> Result<HeaderEnv, AgentError> {
    // AUTH in the name, as Harbor's, marks the variables as credentials to every redactor.
    let prefix = format!(
        "MCP_AUTH_{}",
        uuid::Uuid::new_v4().simple().to_string().to_uppercase()
    );
    let lookup = |name: &str| agent_env.get(name).cloned();
    mcp_headers::resolve(&task.config.environment.mcp_servers, &prefix, &lookup).map_err(|e| {
        AgentError::new(
            AgentErrorKind::SetupFailed,
            format!("task {}: {e}", task.name),
        )
    })
}

/// What the submission's metadata says about them: `skills_dir` (where the agent finds the
/// task's skills) and `mcp_servers` (the list), each only when the task has any.
pub fn submission_metadata(task: &Task, skills: &SkillsSection) -> serde_json::Map<String, Value> {
    let mut metadata = serde_json::Map::new();
    if task.config.environment.skills_dir.is_some() {
        metadata.insert("skills_dir".into(), json!(skills.target()));
    }
    let servers = &task.config.environment.mcp_servers;
    if !servers.is_empty() {
        metadata.insert("mcp_servers".into(), servers_list(servers));
    }
    metadata
}

/// The shell script that copies the task's skills and writes the MCP file, as the agent's
/// user; `None` when the task has neither. Copying skills is best effort, as in Harbor (`cp
/// -r <skills_dir>/* <target>/ 2>/dev/null || true`): a task whose image lacks the directory
/// still runs.
pub fn register_script(
    task: &Task,
    skills: &SkillsSection,
    mcp: &McpSection,
    headers: &HeaderEnv,
) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(source) = &task.config.environment.skills_dir {
        // `$HOME` expands in the target; the source is the task's literal path.
        let target = skills.target();
        parts.push(format!(
            "mkdir -p \"{target}\" && (cp -r {source}/* \"{target}/\" 2>/dev/null || true)",
            source = shell_quote(source.trim_end_matches('/')),
        ));
    }
    let servers = &task.config.environment.mcp_servers;
    if let (Some(file), false) = (&mcp.config_file, servers.is_empty()) {
        let text =
            serde_json::to_string_pretty(&mcp_servers_file(servers, headers)).unwrap_or_default();
        parts.push(format!(
            "mkdir -p \"$(dirname \"{file}\")\" && printf '%s\\n' {} > \"{file}\"",
            shell_quote(&text)
        ));
    }
    (!parts.is_empty()).then(|| parts.join(" && "))
}

/// Runs [`register_script`] in the sandbox as `user`; a failure fails setup, naming the step.
pub async fn register<S: Sandbox>(
    sandbox: &S,
    task: &Task,
    skills: &SkillsSection,
    mcp: &McpSection,
    headers: &HeaderEnv,
    user: Option<&str>,
) -> Result<(), AgentError> {
    let Some(script) = register_script(task, skills, mcp, headers) else {
        return Ok(());
    };
    let request = ExecRequest::new(script)
        .maybe_user(user)
        .timeout(Duration::from_secs(60));
    let out = sandbox.exec(request).await?;
    if out.success() {
        return Ok(());
    }
    Err(AgentError::new(
        AgentErrorKind::SetupFailed,
        format!(
            "task {}: giving the agent the task's skills and MCP servers failed (exit {:?}): {}",
            task.name,
            out.exit_code,
            out.stderr.trim()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, transport: McpTransport) -> McpServer {
        McpServer {
            name: name.into(),
            transport,
            url: (transport != McpTransport::Stdio).then(|| format!("http://{name}:8000/mcp")),
            command: (transport == McpTransport::Stdio).then(|| "mcp-tool".into()),
            args: if transport == McpTransport::Stdio {
                vec!["--stdio".into()]
            } else {
                Vec::new()
            },
            headers: BTreeMap::new(),
        }
    }

    #[test]
    fn servers_take_harbors_two_shapes() {
        let servers = [
            server("web", McpTransport::StreamableHttp),
            server("events", McpTransport::Sse),
            server("local", McpTransport::Stdio),
        ];
        assert_eq!(
            servers_list(&servers),
            json!([
                {"name": "web", "transport": "streamable-http", "url": "http://web:8000/mcp"},
                {"name": "events", "transport": "sse", "url": "http://events:8000/mcp"},
                {"name": "local", "transport": "stdio", "command": "mcp-tool", "args": ["--stdio"]},
            ])
        );
        assert_eq!(
            mcp_servers_file(&servers, &HeaderEnv::default()),
            json!({"mcpServers": {
                "web": {"type": "http", "url": "http://web:8000/mcp"},
                "events": {"type": "sse", "url": "http://events:8000/mcp"},
                "local": {"type": "stdio", "command": "mcp-tool", "args": ["--stdio"]},
            }})
        );
    }

    #[tokio::test]
    async fn skills_are_copied_and_servers_written_where_the_config_says() {
        let root = tempfile::tempdir().unwrap();
        let toml = "[environment]\nskills_dir = \"/workspace/task-skills\"\n\
                    [[environment.mcp_servers]]\nname = \"notes\"\ntransport = \"streamable-http\"\n\
                    url = \"http://notes:8000/mcp\"\n";
        let task = testkit::TaskFixture::new("org/extras")
            .toml(toml)
            .write(&root.path().join("task"));
        let sandbox = testkit::FakeSandbox::new();
        let skill = sandbox.path("/workspace/task-skills/greet/SKILL.md");
        std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
        std::fs::write(&skill, "# greet\n").unwrap();
        let skills = SkillsSection {
            dir: Some("/workspace/agent/skills".into()),
        };
        let mcp = McpSection {
            config_file: Some("/workspace/agent/mcp.json".into()),
        };
        register(&sandbox, &task, &skills, &mcp, &HeaderEnv::default(), None)
            .await
            .unwrap();
        let copied = sandbox.path("/workspace/agent/skills/greet/SKILL.md");
        assert_eq!(std::fs::read_to_string(copied).unwrap(), "# greet\n");
        let written = std::fs::read_to_string(sandbox.path("/workspace/agent/mcp.json")).unwrap();
        let written: Value = serde_json::from_str(&written).unwrap();
        assert_eq!(
            written["mcpServers"]["notes"],
            json!({"type": "http", "url": "http://notes:8000/mcp"})
        );
        let env = server_env(&task, &HeaderEnv::default());
        let listed: Value = serde_json::from_str(&env[MCP_SERVERS_ENV]).unwrap();
        assert_eq!(listed[0]["name"], "notes");
        let metadata = submission_metadata(&task, &skills);
        assert_eq!(metadata["skills_dir"], "/workspace/agent/skills");
        assert_eq!(metadata["mcp_servers"], listed);
    }

    #[tokio::test]
    async fn a_task_without_skills_or_servers_changes_nothing_and_missing_skills_are_no_error() {
        let root = tempfile::tempdir().unwrap();
        let plain = testkit::TaskFixture::new("org/plain").write(&root.path().join("plain"));
        assert_eq!(
            register_script(
                &plain,
                &SkillsSection::default(),
                &McpSection::default(),
                &HeaderEnv::default()
            ),
            None
        );
        assert!(server_env(&plain, &HeaderEnv::default()).is_empty());
        assert!(submission_metadata(&plain, &SkillsSection::default()).is_empty());
        let missing = testkit::TaskFixture::new("org/missing")
            .toml("[environment]\nskills_dir = \"/workspace/none\"\n")
            .write(&root.path().join("missing"));
        let sandbox = testkit::FakeSandbox::new();
        let skills = SkillsSection {
            dir: Some("/workspace/agent/skills".into()),
        };
        let none = HeaderEnv::default();
        register(
            &sandbox,
            &missing,
            &skills,
            &McpSection::default(),
            &none,
            None,
        )
        .await
        .unwrap();
        assert!(sandbox.path("/workspace/agent/skills").is_dir());
    }

    #[test]
    fn headers_reach_the_file_as_references_and_the_server_as_values() {
        let root = tempfile::tempdir().unwrap();
        let toml = "[[environment.mcp_servers]]\nname = \"notes\"\nurl = \"http://notes:8000/mcp\"\n\
                    headers = { Authorization = \"Bearer ${NOTES_TOKEN}\" }\n";
        let task = testkit::TaskFixture::new("org/headers")
            .toml(toml)
            .write(&root.path().join("task"));
        let env = BTreeMap::from([("NOTES_TOKEN".to_owned(), "tok-123456".to_owned())]);
        let headers = resolve_headers(&task, &env).unwrap();
        let file = mcp_servers_file(&task.config.environment.mcp_servers, &headers);
        let reference = file["mcpServers"]["notes"]["headers"]["Authorization"]
            .as_str()
            .unwrap()
            .to_owned();
        let variable = &headers.refs["notes"]["Authorization"];
        assert_eq!(reference, format!("${{{variable}}}"));
        assert!(variable.starts_with("MCP_AUTH_"), "{variable}");
        assert!(!file.to_string().contains("tok-123456"), "{file}");
        let server = server_env(&task, &headers);
        assert_eq!(server[variable], "Bearer tok-123456");
        assert!(!server[MCP_SERVERS_ENV].contains("tok-123456"));
        let unset = resolve_headers(&task, &BTreeMap::new()).unwrap_err();
        assert!(unset.to_string().contains("NOTES_TOKEN"), "{unset}");
    }
}
