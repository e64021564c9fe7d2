//! `runner tasks digest`: Harbor's content digest of each task and of the dataset.

use std::path::Path;

use serde_json::{Value, json};
use tasks::Dataset;

use super::super::view::TextFormat;
use crate::exit::CliError;
use crate::exit::CommandOutcome;
use crate::{note, say};

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

/// Prints the digests of the task or dataset at `path`. Every task Harbor would read is
/// hashed, whether or not this runner can run it (a digest is of content); a path with no
/// task is bad input, naming the subfolders that hold tasks when there are any.
pub fn digest(path: &Path, format: TextFormat) -> Result<CommandOutcome, CliError> {
    let dataset = Dataset::read(path).map_err(CliError::bad_input)?;
    if dataset.tasks.is_empty() && dataset.skipped.is_empty() {
        return Err(CliError::bad_input(no_task_message(&dataset)));
    }
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
        Ok(CommandOutcome::Success)
    } else {
        Err(CliError::bad_input(format!(
            "{} malformed task(s) skipped",
            skipped.len()
        )))
    }
}

/// `tasks digest --check MANIFEST PATH`: the dataset at `path` against a published manifest,
/// through the manifest reader `validate-submission --dataset` uses. Success when they agree;
/// each difference listed and `Rejected` otherwise.
pub fn check(manifest: &Path, path: &Path, format: TextFormat) -> Result<CommandOutcome, CliError> {
    use leaderboard::submission::manifest::{Manifest, compare};
    let manifest_doc = Manifest::read(manifest).map_err(CliError::bad_input)?;
    let dataset = Dataset::read(path).map_err(CliError::bad_input)?;
    if dataset.tasks.is_empty() && dataset.skipped.is_empty() {
        return Err(CliError::bad_input(no_task_message(&dataset)));
    }
    let local = dataset
        .tasks
        .iter()
        .map(|t| (t.name.clone(), t.digest.clone()))
        .collect();
    let diff = compare(&manifest_doc, &local);
    let skipped: Vec<String> = dataset.skipped.iter().map(|e| e.to_string()).collect();
    match format {
        TextFormat::Text => {
            for (task, want, have) in &diff.changed {
                say!(
                    "changed  {task}: the manifest pins {want}, {} has {have}",
                    path.display()
                );
            }
            for task in &diff.missing {
                say!(
                    "missing  {task}: listed in the manifest, not in {}",
                    path.display()
                );
            }
            for task in &diff.extra {
                say!(
                    "extra    {task}: in {}, not in the manifest",
                    path.display()
                );
            }
            for err in &skipped {
                note!("skipped: {err}");
            }
            say!(
                "{} of {} manifest task(s) match {}",
                manifest_doc.digests.len() - diff.changed.len() - diff.missing.len(),
                manifest_doc.digests.len(),
                path.display()
            );
        }
        TextFormat::Json => {
            let value = json!({
                "schema": "runner.digest-check/v1",
                "manifest": manifest.display().to_string(),
                "matches": diff.is_empty(),
                "changed": diff.changed.iter().map(|(task, want, have)| json!({"name": task, "manifest": want, "local": have})).collect::<Vec<_>>(),
                "missing": diff.missing,
                "extra": diff.extra,
                "skipped": skipped,
            });
            say!(
                "{}",
                serde_json::to_string_pretty(&value).map_err(CliError::runner)?
            );
        }
    }
    if !skipped.is_empty() {
        return Err(CliError::bad_input(format!(
            "{} malformed task(s) skipped",
            skipped.len()
        )));
    }
    Ok(if diff.is_empty() {
        CommandOutcome::Success
    } else {
        CommandOutcome::Rejected
    })
}

/// Why a dataset directory with no task is refused, and where its tasks may be.
pub fn no_task_message(dataset: &Dataset) -> String {
    let dir = dataset.dir.display();
    let mut message = format!(
        "{dir} has no task: it has no task.toml and none of its immediate subdirectories has one (Harbor reads a dataset's immediate subdirectories only)"
    );
    let nested = dataset.nested_datasets();
    if !nested.is_empty() {
        let names: Vec<String> = nested.iter().map(|p| p.display().to_string()).collect();
        message.push_str(&format!(
            "; these folders hold tasks, pass one of them: {}",
            names.join(", ")
        ));
    }
    message
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
