//! The flags of `runner run` that choose what runs and how it is shown (hence the name): task selection, a job
//! config file, the progress display and the output format; and the merge of a config file
//! into the flags (the command line and `RUNNER_*` variables win).

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::RunArgs;
use super::config_file::{self, FileSettings};
use super::selection::{SelectionArgs, TaskNames, select};
use crate::commands::view::TextFormat;
use crate::exit::CliError;
use crate::report::ProgressMode;

/// What runs and how it is shown: the task selection, a job config file, the progress display
/// and the output format of `runner run`.
#[derive(Debug, Clone, clap::Args)]
pub struct ChoiceArgs {
    /// A job config (TOML, JSON or YAML) with Harbor's JobConfig fields; a job's own
    /// config.json runs that job again. Flags given here override it.
    #[arg(short, long, value_name = "FILE", env = "RUNNER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Which tasks of the dataset run.
    #[command(flatten)]
    pub selection: SelectionArgs,
    /// Progress display: bar (the live view), lines (one timestamped line per finished
    /// trial) or none. Default: bar on a terminal, lines otherwise.
    #[arg(long, value_enum, value_name = "MODE", env = "RUNNER_PROGRESS")]
    pub progress: Option<ProgressMode>,
    /// `json` prints the end summary as JSON (`runner.summary/v1`) on stdout; the readable
    /// summary then goes to stderr.
    #[arg(long, value_enum, default_value_t = TextFormat::Text, env = "RUNNER_FORMAT")]
    pub format: TextFormat,
    /// Ids of the flags the command line or the environment gave (filled by the parser).
    #[arg(skip)]
    pub given: BTreeSet<String>,
}

/// Fills the flags `-c FILE` sets and the user did not give.
pub fn apply_config_file(args: &mut RunArgs) -> Result<(), CliError> {
    let Some(path) = args.choices.config.clone() else {
        return Ok(());
    };
    let settings = config_file::load(&path).map_err(CliError::bad_input)?;
    apply(args, settings);
    check_values(args, &path)?;
    if args.path.as_os_str().is_empty() && args.source.dataset.is_none() {
        return Err(CliError::bad_input(format!(
            "{}: names no dataset or task (datasets[0].path or name); give --path or -d",
            path.display()
        )));
    }
    if let Some(name) = &args.agent
        && !args.choices.given.contains("agent")
        && adapter::AnyAgent::builtin(name).is_none()
        && adapter::catalogue::entry(name).is_none()
    {
        let why = adapter::catalogue::refusal(name).map_or_else(String::new, |w| format!(" ({w})"));
        return Err(CliError::bad_input(format!(
            "{}: agents[0].name {name:?} is neither a built-in agent ({}) nor one of the catalogue (`runner agents list`){why}; for an agent of your own give agent_config = \"its.toml\" in the file, or --agent-config",
            path.display(),
            adapter::BUILTIN_AGENTS.join(", ")
        )));
    }
    if args.agent.is_none() && args.agent_config.is_none() {
        return Err(CliError::bad_input(format!(
            "{}: names no agent (agents[0].name); give --agent or --agent-config",
            path.display()
        )));
    }
    Ok(())
}

/// Keeps the tasks `selection` chooses (the others are not planned at all, as in Harbor).
pub fn select_tasks(
    dataset: &mut tasks::Dataset,
    selection: &SelectionArgs,
) -> Result<(), CliError> {
    if selection.is_empty() {
        return Ok(());
    }
    let dir_names: Vec<String> = dataset
        .tasks
        .iter()
        .map(|t| {
            t.dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    let names: Vec<TaskNames<'_>> = dataset
        .tasks
        .iter()
        .zip(&dir_names)
        .map(|(t, dir_name)| TaskNames {
            name: &t.name,
            dir_name,
        })
        .collect();
    let kept = select(&names, selection).map_err(CliError::bad_input)?;
    let mut index = 0;
    dataset.tasks.retain(|_| {
        index += 1;
        kept.contains(&(index - 1))
    });
    Ok(())
}

/// Records the selection in config.json as Harbor does (`datasets[0]`), so the job's own
/// config runs the same tasks again.
pub fn record_selection(config: &mut tasks::records::JobConfig, selection: &SelectionArgs) {
    if let Some(dataset) = config.datasets.first_mut() {
        let list = |v: &Vec<String>| (!v.is_empty()).then(|| v.clone());
        dataset.task_names = list(&selection.include);
        dataset.exclude_task_names = list(&selection.exclude);
        dataset.n_tasks = selection.n_tasks;
    }
}

/// Records the installed agent's config file (absolute) in config.json, runner-only, so the
/// job's config runs the same agent again.
pub fn record_agent_config(
    config: &mut tasks::records::JobConfig,
    agent_config: Option<&std::path::Path>,
) {
    config.agent_config = agent_config.map(|path| {
        std::path::absolute(path)
            .unwrap_or_else(|_| path.to_path_buf())
            .display()
            .to_string()
    });
}

/// A file's values pass the checks the command line's get.
fn check_values(args: &RunArgs, file: &std::path::Path) -> Result<(), CliError> {
    let bad = |field: &str, why: String| {
        Err(CliError::bad_input(format!(
            "{}: {field}: {why}",
            file.display()
        )))
    };
    if let Some(name) = &args.job_name
        && let Err(why) = super::parse_job_name(name)
    {
        return bad("job_name", why);
    }
    if args.k == 0 {
        return bad("n_attempts", "must be at least 1".into());
    }
    if args.n_concurrent == 0 {
        return bad("n_concurrent_trials", "must be at least 1".into());
    }
    if args.choices.selection.n_tasks == Some(0) {
        return bad("datasets[0].n_tasks", "must be at least 1".into());
    }
    for field in tasks::Multipliers::FIELDS {
        if let Some(v) = (field.get)(&args.multipliers)
            && let Err(why) = tasks::multipliers::parse_multiplier(&v.to_string())
        {
            return bad(field.name, why);
        }
    }
    Ok(())
}

/// `settings` over the flags not in `args.choices.given`.
fn apply(args: &mut RunArgs, s: FileSettings) {
    let given = args.choices.given.clone();
    let free = |id: &str| !given.contains(id);
    macro_rules! fill {
        ($id:literal, $value:expr => $target:expr) => {
            if free($id)
                && let Some(v) = $value
            {
                $target = v;
            }
        };
    }
    // A dataset is a path or a name: the command line's either one wins over the file's.
    if free("dataset") {
        fill!("path", s.path => args.path);
    }
    if free("path") && free("dataset") && s.dataset.is_some() {
        args.source.dataset = s.dataset;
        fill!("registry_url", s.registry_url.map(Some) => args.source.registry.registry_url);
        fill!("registry_path", s.registry_path.map(Some) => args.source.registry.registry_path);
    }
    fill!("job_name", s.job_name.map(Some) => args.job_name);
    fill!("jobs_dir", s.jobs_dir => args.jobs_dir);
    fill!("k", s.k => args.k);
    fill!("n_concurrent", s.n_concurrent => args.n_concurrent);
    for field in tasks::Multipliers::FIELDS {
        if free(field.name)
            && let Some(&v) = s.multipliers.get(field.name)
        {
            (field.set)(&mut args.multipliers, v);
        }
    }
    fill!("max_retries", s.max_retries => args.max_retries);
    fill!("retry_include", s.retry_include => args.retry_include);
    fill!("retry_exclude", s.retry_exclude.map(Some) => args.retry_exclude);
    if let Some(overrides) = s.override_error_policy {
        args.override_error_policy = overrides;
    }
    fill!("force_build", s.force_build => args.force_build);
    fill!("allow_container_secrets", s.allow_container_secrets => args.allow_container_secrets);
    fill!("agent_toolchain", s.agent_toolchain => args.agent_toolchain);
    fill!("pids_limit", s.pids_limit.map(Some) => args.pids_limit);
    fill!("max_download_mb", s.max_download_mb => args.max_download_mb);
    fill!("max_trial_log_mb", s.max_trial_log_mb => args.max_trial_log_mb);
    fill!("shard", s.shard.map(Some) => args.shard);
    fill!("task_env_from", s.task_env_from => args.task_env_from);
    fill!("include", s.include => args.choices.selection.include);
    fill!("exclude", s.exclude => args.choices.selection.exclude);
    fill!("n_tasks", s.n_tasks.map(Some) => args.choices.selection.n_tasks);
    // One agent: the command line's, else the file's installed agent config, else its name.
    if free("agent") && free("agent_config") {
        if let Some(config) = s.agent_config {
            args.agent = None;
            args.agent_config = Some(config);
        } else if let Some(name) = s.agent {
            args.agent = Some(name);
        }
    }
    fill!("models", s.agent_model.map(|m| vec![m]) => args.llm.models);
    if free("agent_kwargs") && !s.agent_kwargs.is_empty() {
        args.agent_kwargs = s.agent_kwargs;
    }
    if free("agent_env") && !s.agent_env.is_empty() {
        args.agent_env = s.agent_env;
    }
    if free("quiet") && s.quiet == Some(true) {
        crate::output::set_quiet();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(argv: &[&str]) -> RunArgs {
        let cli = crate::cli::try_parse_from(std::iter::once("runner").chain(argv.iter().copied()))
            .expect("parses");
        match cli.command {
            crate::cli::Command::Run(args) => *args,
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_file_fills_only_what_the_command_line_left_out() {
        let mut args = parse(&["run", "-c", "job.toml", "-k", "2", "-i", "a*"]);
        apply(
            &mut args,
            FileSettings {
                path: Some("d".into()),
                k: Some(5),
                n_concurrent: Some(8),
                include: Some(vec!["b*".into()]),
                exclude: Some(vec!["c".into()]),
                agent: Some("nop".into()),
                multipliers: [("timeout_multiplier", 2.0)].into(),
                ..FileSettings::default()
            },
        );
        assert_eq!(args.path, PathBuf::from("d"));
        assert_eq!((args.k, args.n_concurrent), (2, 8));
        assert_eq!(args.choices.selection.include, vec!["a*"]);
        assert_eq!(args.choices.selection.exclude, vec!["c"]);
        assert_eq!(args.agent.as_deref(), Some("nop"));
        assert_eq!(args.multipliers.timeout_multiplier, 2.0);

        let mut args = parse(&["run", "-c", "job.toml", "--agent", "oracle", "-p", "x"]);
        apply(
            &mut args,
            FileSettings {
                path: Some("d".into()),
                agent_config: Some("a.toml".into()),
                ..FileSettings::default()
            },
        );
        assert_eq!(
            (args.agent.as_deref(), args.agent_config, args.path),
            (Some("oracle"), None, PathBuf::from("x"))
        );
    }

    #[test]
    fn a_catalogue_agents_model_and_kwargs_from_the_file_yield_to_the_flags() {
        let file = || FileSettings {
            path: Some("d".into()),
            agent: Some("codex".into()),
            agent_model: Some("openai/gpt-5".into()),
            agent_kwargs: vec!["reasoning_effort=high".into()],
            ..FileSettings::default()
        };
        let mut args = parse(&["run", "-c", "job.yaml"]);
        apply(&mut args, file());
        assert_eq!(args.agent.as_deref(), Some("codex"));
        assert_eq!(args.llm.models, ["openai/gpt-5"]);
        assert_eq!(args.agent_kwargs, ["reasoning_effort=high"]);
        let mut args = parse(&[
            "run",
            "-c",
            "job.yaml",
            "-m",
            "openai/o3",
            "--ak",
            "web_search=live",
        ]);
        apply(&mut args, file());
        assert_eq!(args.llm.models, ["openai/o3"]);
        assert_eq!(args.agent_kwargs, ["web_search=live"]);
    }

    #[test]
    fn without_a_file_path_and_agent_are_required() {
        let err = crate::cli::try_parse_from(["runner", "run", "--agent", "nop"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        let err = crate::cli::try_parse_from(["runner", "run", "-p", "x"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        assert!(crate::cli::try_parse_from(["runner", "run", "-c", "f.json"]).is_ok());
    }
}
