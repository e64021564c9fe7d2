//! `runner agents list`: the agents `-a NAME` takes — the built-in ones and the catalogue of
//! Harbor's names (adapter/agents/<name>/agent.toml, built into the binary).

use adapter::command::CommandTrajectoryFormat;
use adapter::command::template;
use adapter::{AgentConfigFile, BUILTIN_AGENTS, catalogue};
use serde_json::{Value, json};

use super::view::TextFormat;
use crate::exit::{CliError, CommandOutcome};
use crate::say;

/// `runner agents …`.
#[derive(Debug, clap::Subcommand)]
pub enum AgentsCommand {
    /// List the agents `runner run -a NAME` takes: version pinned by default, where it
    /// installs from, which API it speaks, whether its trajectory becomes ATIF.
    List {
        /// Output format (`json`: `runner.agents/v1`).
        #[arg(long, value_enum, default_value_t = TextFormat::Text)]
        format: TextFormat,
    },
}

/// Runs `runner agents …`.
pub fn run(command: AgentsCommand) -> Result<CommandOutcome, CliError> {
    match command {
        AgentsCommand::List { format } => list(format),
    }
}

fn list(format: TextFormat) -> Result<CommandOutcome, CliError> {
    let mut rows = Vec::new();
    for name in BUILTIN_AGENTS {
        rows.push(
            json!({"name": name, "version": "built in", "source": "built into runner",
                         "api": "none", "atif": false}),
        );
    }
    for entry in catalogue::CATALOGUE {
        rows.push(row(entry)?);
    }
    match format {
        TextFormat::Json => {
            let document = json!({"schema": "runner.agents/v1", "agents": rows});
            say!(
                "{}",
                serde_json::to_string_pretty(&document).unwrap_or_default()
            );
        }
        TextFormat::Text => {
            say!(
                "{:<16} {:<30} {:<6} {:<34} SOURCE",
                "AGENT",
                "VERSION",
                "ATIF",
                "API"
            );
            for row in &rows {
                let text = |key: &str| row[key].as_str().unwrap_or_default().to_owned();
                let atif = if row["atif"] == true { "yes" } else { "no" };
                say!(
                    "{:<16} {:<30} {:<6} {:<34} {}",
                    text("name"),
                    text("version"),
                    atif,
                    text("api"),
                    text("source")
                );
            }
        }
    }
    Ok(CommandOutcome::Success)
}

/// One catalogue entry's row: its pinned version is the prepared wheel's requirement, or its
/// `version` kwarg.
fn row(entry: &catalogue::CatalogueEntry) -> Result<Value, CliError> {
    let AgentConfigFile::Command(config) = entry.load().map_err(CliError::runner)? else {
        return Ok(
            json!({"name": entry.name, "version": "", "source": entry.source,
                         "api": entry.api, "atif": false}),
        );
    };
    let kwarg = |name: &str| config.kwargs.get(name).map(template::kwarg_text);
    let version = match &config.prepare {
        Some(prepare) => template::expand_plain(&prepare.wheel, |name| {
            name.strip_prefix("kwargs.").and_then(kwarg)
        })
        .unwrap_or_else(|_| prepare.wheel.clone()),
        None => kwarg("version").unwrap_or_default(),
    };
    let atif = config.trajectory.format != CommandTrajectoryFormat::None;
    Ok(
        json!({"name": entry.name, "version": version, "source": entry.source,
              "api": entry.api, "atif": atif}),
    )
}
