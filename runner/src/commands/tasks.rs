//! `runner tasks ...`: inspect tasks and datasets.

use std::path::PathBuf;

use serde_json::{Value, json};
use tasks::Dataset;

use super::view::TextFormat;
use crate::exit::{CliError, Family, Outcome};
use crate::{note, say};

/// `runner tasks` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TasksCommand {
    /// Print the content digest of each task and of the dataset.
    #[command(after_help = crate::exit::help_text(Family::Tasks))]
    Digest {
        /// A task directory or a dataset directory.
        path: PathBuf,
        /// Output format: `json` prints one `runner.digest/v1` document.
        #[arg(long, value_enum, default_value_t = TextFormat::Text)]
        format: TextFormat,
    },
}

/// Runs a `runner tasks` subcommand.
pub fn run(command: TasksCommand) -> Result<Outcome, CliError> {
    match command {
        TasksCommand::Digest { path, format } => digest(&path, format),
    }
}

/// One task as the digest lists it: name, digest, directory.
struct Row<'a> {
    name: &'a str,
    digest: &'a str,
    dir: String,
}

/// The `runner.digest/v1` document: every task's digest, the dataset's (none for a single
/// task), and the tasks skipped as malformed with why.
fn digest_json(rows: &[Row<'_>], dataset: Option<(&str, &str)>, skipped: &[String]) -> Value {
    json!({
        "schema": "runner.digest/v1",
        "dataset": dataset.map(|(name, digest)| json!({"name": name, "digest": digest})),
        "tasks": rows
            .iter()
            .map(|r| json!({"name": r.name, "digest": r.digest, "path": r.dir}))
            .collect::<Vec<_>>(),
        "skipped": skipped,
    })
}

fn digest(path: &std::path::Path, format: TextFormat) -> Result<Outcome, CliError> {
    let dataset = Dataset::load(path).map_err(CliError::bad_input)?;
    let skipped: Vec<String> = dataset.skipped.iter().map(|e| e.to_string()).collect();
    match format {
        TextFormat::Text => {
            for task in &dataset.tasks {
                say!("{}  {}", task.digest, task.name);
            }
            for err in &skipped {
                note!("skipped: {err}");
            }
            if !dataset.single_task {
                say!("{}  {} (dataset)", dataset.digest(), dataset.name);
            }
        }
        TextFormat::Json => {
            let rows: Vec<Row<'_>> = dataset
                .tasks
                .iter()
                .map(|t| Row {
                    name: &t.name,
                    digest: &t.digest,
                    dir: t.dir.display().to_string(),
                })
                .collect();
            let dataset_digest = dataset.digest();
            let whole =
                (!dataset.single_task).then_some((dataset.name.as_str(), dataset_digest.as_str()));
            let value = digest_json(&rows, whole, &skipped);
            say!(
                "{}",
                serde_json::to_string_pretty(&value).map_err(CliError::runner)?
            );
        }
    }
    if skipped.is_empty() {
        Ok(Outcome::Success)
    } else {
        Err(CliError::bad_input(format!(
            "{} malformed task(s) skipped",
            skipped.len()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_document() {
        let rows = [
            Row {
                name: "examples/hello-file",
                digest: "sha256:1111",
                dir: "/d/hello-file".into(),
            },
            Row {
                name: "examples/no-network",
                digest: "sha256:2222",
                dir: "/d/no-network".into(),
            },
        ];
        let value = digest_json(
            &rows,
            Some(("examples/runner-examples", "sha256:3333")),
            &["/d/broken/task.toml: missing [verifier]".into()],
        );
        insta::assert_json_snapshot!(value);
        assert_eq!(digest_json(&rows[..1], None, &[])["dataset"], Value::Null);
    }
}
