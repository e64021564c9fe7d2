//! `runner images ...`: warm the engine's image cache for a dataset before a run, and remove
//! the images runner pulled or built that no recent job used.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use docker_backend::{
    DEFAULT_MIN_FREE_DISK_MB, DEFAULT_PULLS_PER_MINUTE, DockerBackend, DockerClient, ImagePolicy,
    Ledger, PruneReport, PullRetryPolicy, default_state_dir, prune_images,
};
use engine::{Backend, BackendError, IMAGE_PROGRESS_STREAM, ImageInfo, OutputSink};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use tasks::Dataset;
use tokio::sync::Semaphore;

use crate::exit::{CliError, CommandOutcome, Family};
use crate::{note, say};

/// How images are pulled and when the disk is too full: shared by `run` and `images pull`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImageArgs {
    /// Pull attempts started per minute at most, retries included (registries rate-limit pulls).
    #[arg(long, default_value_t = DEFAULT_PULLS_PER_MINUTE,
        value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub pulls_per_minute: u32,
    /// Attempts per image pull; 429s, 5xx answers, timeouts and dropped connections are retried
    /// with backoff (2 s, doubling, at most 30 s).
    #[arg(long, default_value_t = PullRetryPolicy::default().attempts,
        value_parser = clap::value_parser!(u32).range(1..=20))]
    pub pull_attempts: u32,
    /// Start no image build or pull while the engine's data root has less free space than this
    /// many MB; the task's trials fail with DiskSpaceError instead.
    #[arg(long, default_value_t = DEFAULT_MIN_FREE_DISK_MB)]
    pub min_free_disk_mb: u64,
}

impl ImageArgs {
    /// The backend's image policy from these flags.
    pub fn policy(&self) -> ImagePolicy {
        ImagePolicy {
            pulls_per_minute: self.pulls_per_minute,
            retry: PullRetryPolicy {
                attempts: self.pull_attempts,
                ..PullRetryPolicy::default()
            },
            min_free_disk_bytes: self.min_free_disk_mb.saturating_mul(1_000_000),
            ..ImagePolicy::default()
        }
    }
}

/// `runner images` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ImagesCommand {
    /// Pull (or, with --force-build, build) every image a dataset's tasks run in, so a run
    /// starts with a warm cache; prints each image's origin, size and time.
    #[command(after_help = crate::exit::help_text(Family::Images))]
    Pull(PullArgs),
    /// Remove images runner pulled or built that no job used in the last N days (images you
    /// pulled or built yourself are never touched; an image a container uses is kept).
    #[command(after_help = crate::exit::help_text(Family::Images))]
    Prune(PruneArgs),
}

/// Arguments of `runner images pull`.
#[derive(Debug, clap::Args)]
pub struct PullArgs {
    /// A task directory or a dataset directory.
    #[arg(
        short = 'p',
        long,
        required_unless_present = "dataset",
        default_value = "",
        hide_default_value = true,
        value_parser = super::run::any_path
    )]
    pub path: PathBuf,
    /// -d/--dataset NAME[@VERSION] with --registry-url/--registry-path: a dataset by name.
    #[command(flatten)]
    pub source: super::dataset_source::DatasetSourceArgs,
    /// Build from environment/Dockerfile even when a task names a prebuilt docker_image (as
    /// `run --force-build` does).
    #[arg(long)]
    pub force_build: bool,
    /// Images prepared at once.
    #[arg(short = 'n', long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub n_concurrent: u32,
    /// Pull and disk settings.
    #[command(flatten)]
    pub images: ImageArgs,
}

/// Arguments of `runner images prune`.
#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// Remove images no job used for this many days.
    #[arg(long, default_value_t = 7)]
    pub older_than: u32,
    /// Also remove images labelled runner.managed that this ledger does not record (built by
    /// another user's or an older runner), judged by their creation time.
    #[arg(long)]
    pub all_labelled: bool,
    /// List what would be removed, remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs a `runner images` subcommand.
pub fn run(command: ImagesCommand) -> Result<CommandOutcome, CliError> {
    match command {
        ImagesCommand::Pull(mut args) => {
            // A dataset by name becomes its verified local directory before the runtime starts.
            if let Some(resolved) = args.source.resolve()? {
                args.path = resolved.dir;
            }
            super::block_on(pull(args))
        }
        ImagesCommand::Prune(args) => super::block_on(prune(args)),
    }
}

/// One task's image, prepared or not.
#[derive(Debug, Clone)]
pub struct PulledRow {
    /// The task.
    pub task: String,
    /// The image, or why it could not be prepared.
    pub image: Result<ImageInfo, BackendError>,
    /// Time it took (waiting for a shared pull included).
    pub seconds: f64,
}

async fn pull(args: PullArgs) -> Result<CommandOutcome, CliError> {
    let dataset = Dataset::load(&args.path).map_err(CliError::bad_input)?;
    for skipped in &dataset.skipped {
        note!("skipping task: {skipped}");
    }
    if dataset.tasks.is_empty() {
        return Err(CliError::bad_input(format!(
            "{} has no runnable task",
            dataset.dir.display()
        )));
    }
    let client = DockerClient::connect().await.map_err(CliError::bad_input)?;
    let backend = DockerBackend::with_policy(client, args.images.policy());
    let view = Arc::new(Progress::new());
    let slots = Arc::new(Semaphore::new(args.n_concurrent as usize));
    let started = Instant::now();
    let mut running = tokio::task::JoinSet::new();
    for (index, task) in dataset.tasks.iter().cloned().enumerate() {
        let (backend, view, slots) = (backend.clone(), view.clone(), slots.clone());
        let force_build = args.force_build;
        running.spawn(async move {
            let _slot = slots.acquire_owned().await.expect("never closed");
            let began = Instant::now();
            let log = view.sink(&task.name);
            let request = engine::ImageRequest::for_task(&task, force_build);
            let image = backend.prepare_image(&task, &request, &log).await;
            view.done(&task.name);
            let row = PulledRow {
                task: task.name.clone(),
                image,
                seconds: began.elapsed().as_secs_f64(),
            };
            (index, row)
        });
    }
    let mut rows = Vec::new();
    while let Some(joined) = running.join_next().await {
        rows.push(joined.map_err(|e| CliError::runner_because("an image task failed", e))?);
    }
    view.clear();
    rows.sort_by_key(|(index, _)| *index);
    let rows: Vec<PulledRow> = rows.into_iter().map(|(_, row)| row).collect();
    for row in &rows {
        if let Err(message) = &row.image {
            note!("image of {} failed: {message}", row.task);
        }
    }
    say!("{}", render_pull_summary(&rows, started.elapsed()));
    let failed = rows.iter().filter(|r| r.image.is_err()).count();
    Ok(if failed > 0 {
        CommandOutcome::Rejected
    } else if !dataset.skipped.is_empty() {
        CommandOutcome::TasksSkipped
    } else {
        CommandOutcome::Success
    })
}

/// The table `images pull` prints: one row per task, then totals.
pub fn render_pull_summary(rows: &[PulledRow], wall: Duration) -> String {
    let width = rows.iter().map(|r| r.task.len()).max().unwrap_or(4).max(4);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<width$}  {:<7}  {:>9}  {:>7}  image",
        "task", "origin", "size MB", "seconds"
    );
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut sizes: BTreeMap<&str, u64> = BTreeMap::new();
    for row in rows {
        match &row.image {
            Ok(image) => {
                *counts.entry(image.origin.as_str()).or_default() += 1;
                if let Some(size) = image.size_bytes {
                    sizes.insert(image.id.as_str(), size);
                }
                let size = image
                    .size_bytes
                    .map(|b| format!("{:.1}", b as f64 / 1e6))
                    .unwrap_or_else(|| "?".into());
                let digest = image
                    .repo_digests
                    .first()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{:<width$}  {:<7}  {size:>9}  {:>7.1}  {}{digest}",
                    row.task,
                    image.origin.as_str(),
                    row.seconds,
                    image.tag
                );
            }
            Err(_) => {
                *counts.entry("failed").or_default() += 1;
                let _ = writeln!(
                    out,
                    "{:<width$}  {:<7}  {:>9}  {:>7.1}  (see the error above)",
                    row.task, "failed", "-", row.seconds
                );
            }
        }
    }
    let breakdown: Vec<String> = ["pulled", "built", "reused", "failed"]
        .iter()
        .filter_map(|k| counts.get(k).map(|n| format!("{n} {k}")))
        .collect();
    let _ = write!(
        out,
        "\n{} task(s): {}; {} distinct image(s), {:.1} MB; {:.1}s",
        rows.len(),
        breakdown.join(", "),
        sizes.len(),
        sizes.values().sum::<u64>() as f64 / 1e6,
        wall.as_secs_f64()
    );
    out
}

async fn prune(args: PruneArgs) -> Result<CommandOutcome, CliError> {
    let Some(state_dir) = default_state_dir() else {
        return Err(CliError::bad_input(
            "no state directory: set RUNNER_STATE_DIR, XDG_STATE_HOME or HOME",
        ));
    };
    let ledger = Ledger::new(&state_dir);
    let client = DockerClient::connect().await.map_err(CliError::bad_input)?;
    let cutoff = chrono::Utc::now() - chrono::Duration::days(i64::from(args.older_than));
    let report = prune_images(&client, &ledger, cutoff, args.all_labelled, args.dry_run)
        .await
        .map_err(CliError::runner)?;
    say!(
        "{}",
        render_prune_report(&report, args.older_than, args.dry_run)
    );
    Ok(CommandOutcome::Success)
}

/// What `images prune` prints.
pub fn render_prune_report(report: &PruneReport, days: u32, dry_run: bool) -> String {
    let mut out = String::new();
    let verb = if dry_run { "would remove" } else { "removed" };
    for item in &report.removed {
        let size = item
            .size_bytes
            .map(|b| format!("{:.1} MB", b as f64 / 1e6))
            .unwrap_or_else(|| "size unknown".into());
        let _ = writeln!(
            out,
            "{verb} {} ({}, {size}, last used {})",
            item.reference,
            item.origin,
            item.last_used_at.format("%Y-%m-%d")
        );
    }
    for (item, why) in &report.kept {
        let _ = writeln!(out, "kept {}: {why}", item.reference);
    }
    for gone in &report.gone {
        let _ = writeln!(out, "forgot {gone} (no longer in the engine)");
    }
    let total: u64 = report.removed.iter().filter_map(|i| i.size_bytes).sum();
    let _ = write!(
        out,
        "{} image(s) {verb}, {:.1} MB (images share layers, so less may be freed), {} kept; candidates are runner's images no job used for {days} day(s)",
        report.removed.len(),
        total as f64 / 1e6,
        report.kept.len()
    );
    out
}

/// Progress lines while images are prepared: on a terminal one spinner per task, otherwise
/// the runner's own lines (pulling, pulled, built) on stderr.
struct Progress {
    multi: Option<MultiProgress>,
    bars: Mutex<BTreeMap<String, ProgressBar>>,
}

impl Progress {
    fn new() -> Self {
        Self {
            multi: std::io::stderr().is_terminal().then(MultiProgress::new),
            bars: Mutex::new(BTreeMap::new()),
        }
    }

    /// The log of `task`'s preparation.
    fn sink(self: &Arc<Self>, task: &str) -> OutputSink {
        let view = self.clone();
        let task = task.to_owned();
        Arc::new(move |stream, bytes| {
            let text = String::from_utf8_lossy(bytes);
            let Some(line) = text.lines().rfind(|l| !l.trim().is_empty()) else {
                return;
            };
            match (stream, &view.multi) {
                (IMAGE_PROGRESS_STREAM, Some(multi)) => {
                    let mut bars = view.bars.lock().expect("not poisoned");
                    let bar = bars.entry(task.clone()).or_insert_with(|| {
                        let bar = multi.add(ProgressBar::new_spinner());
                        bar.set_style(
                            ProgressStyle::with_template("  {spinner} {prefix}: {msg}")
                                .expect("static template"),
                        );
                        bar.set_prefix(task.clone());
                        bar.enable_steady_tick(Duration::from_millis(200));
                        bar
                    });
                    bar.set_message(line.trim().to_owned());
                }
                ("runner", Some(multi)) => {
                    let _ = multi.println(format!("{task}: {}", line.trim()));
                }
                ("runner", None) => note!("{task}: {}", line.trim()),
                // Build output is in the failure message when it matters.
                _ => {}
            }
        })
    }

    fn done(&self, task: &str) {
        if let Some(bar) = self.bars.lock().expect("not poisoned").remove(task) {
            bar.finish_and_clear();
        }
    }

    fn clear(&self) {
        for bar in self.bars.lock().expect("not poisoned").values() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use docker_backend::PruneItem;
    use engine::{BackendErrorKind, ImageOrigin};

    fn image(tag: &str, origin: ImageOrigin, size: u64, digest: Option<&str>) -> ImageInfo {
        ImageInfo {
            repo_digests: digest.map(str::to_owned).into_iter().collect(),
            size_bytes: Some(size),
            ..ImageInfo::new(tag, format!("sha256:{tag}"), origin)
        }
    }

    #[test]
    fn pull_summary() {
        let rows = vec![
            PulledRow {
                task: "org/chess".into(),
                image: Ok(image(
                    "127.0.0.1:5000/chess:1",
                    ImageOrigin::Pulled,
                    250_000_000,
                    Some("127.0.0.1:5000/chess@sha256:ab12"),
                )),
                seconds: 12.34,
            },
            PulledRow {
                task: "org/regex".into(),
                image: Ok(image(
                    "runner-task-regex:0123456789abcdef",
                    ImageOrigin::Built,
                    104_000_000,
                    None,
                )),
                seconds: 3.2,
            },
            PulledRow {
                task: "org/gone".into(),
                image: Err(BackendError::new(
                    BackendErrorKind::Pull,
                    "pulling 127.0.0.1:5000/gone:1 failed",
                )),
                seconds: 0.4,
            },
        ];
        insta::assert_snapshot!(render_pull_summary(&rows, Duration::from_millis(13_100)));
    }

    #[test]
    fn prune_report() {
        let at = chrono::DateTime::from_timestamp(1_790_000_000, 0).unwrap();
        let item = |reference: &str, origin: &str| PruneItem {
            reference: reference.into(),
            origin: origin.into(),
            last_used_at: at,
            size_bytes: Some(104_000_000),
        };
        let report = PruneReport {
            removed: vec![
                item("127.0.0.1:5000/chess:1", "pulled"),
                item("runner-task-regex:0123456789abcdef", "built"),
            ],
            kept: vec![(
                item("runner-task-busy:0123456789abcdef", "built (label)"),
                "conflict: unable to remove repository reference (must force) - container 1a2b is using its referenced image".into(),
            )],
            gone: vec!["127.0.0.1:5000/old:1".into()],
        };
        insta::assert_snapshot!(render_prune_report(&report, 7, false));
    }
}
