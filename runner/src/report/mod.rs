//! What the user sees: a live view on a terminal, plain lines otherwise, and the end summary.

mod frame;
mod live;
mod summary;

pub use frame::short_duration;

/// How progress is shown while a job runs (`runner run --progress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// The live view: running trials with phase and elapsed time, counts, ETA (a terminal).
    Bar,
    /// One timestamped line per finished trial (logs and CI).
    Lines,
    /// Nothing until the summary.
    None,
}
pub use live::{Notice, Reporter};
pub use summary::{SummaryInput, colorize_summary, render_summary};
