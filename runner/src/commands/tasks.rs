//! `runner tasks ...`: inspect tasks and datasets.

use std::path::PathBuf;

use tasks::Dataset;

use crate::exit_codes;

/// `runner tasks` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TasksCommand {
    /// Print the content digest of each task and of the dataset.
    Digest {
        /// A task directory or a dataset directory.
        path: PathBuf,
    },
}

/// Runs a `runner tasks` subcommand.
pub fn run(command: TasksCommand) -> u8 {
    match command {
        TasksCommand::Digest { path } => digest(&path),
    }
}

fn digest(path: &std::path::Path) -> u8 {
    let dataset = match Dataset::load(path) {
        Ok(d) => d,
        Err(err) => {
            eprintln!("error: {err}");
            return exit_codes::BAD_INPUT;
        }
    };
    for task in &dataset.tasks {
        println!("{}  {}", task.digest, task.name);
    }
    for err in &dataset.skipped {
        eprintln!("skipped: {err}");
    }
    if !dataset.single_task {
        println!("{}  {} (dataset)", dataset.digest(), dataset.name);
    }
    if dataset.skipped.is_empty() {
        exit_codes::OK
    } else {
        exit_codes::BAD_INPUT
    }
}
