//! Insight into job directories written by runner or by Harbor (any version whose records
//! are JSON in Harbor's layout): an end-of-run [`summary`], a paired [`compare_jobs`], and a
//! static HTML report ([`write_report`]) with a page per trial and the ATIF trajectory as a
//! conversation.
//!
//! Records are read as JSON values, tolerant of Harbor's older shapes; a record that cannot
//! be read is reported in the output, never fatal. Everything in a trial dir is the agent's
//! output and treated as hostile: symlinks are not followed, sizes are capped, and HTML is
//! escaped by construction.

mod compare;
mod files;
mod html;
mod load;
mod summary;
mod text;
mod union;

use std::path::PathBuf;

pub use compare::{
    COMPARISON_SCHEMA, JobComparison, Side, compare_job_sets, compare_jobs, compare_loaded,
};
pub use html::{ReportSummary, write_report, write_report_groups};
pub use load::{Check, Exception, Job, Phase, Trial, Usage, load_job, load_trial};
pub use summary::{
    JobSummary, RewardStats, SUMMARY_SCHEMA, TaskSummary, Title, summarize_job, summary,
    summary_of, title_of,
};
pub use text::{comparison_text, summary_text};
pub use union::load_jobs;

/// Why a job dir could not be read or a report not written.
#[derive(Debug, thiserror::Error)]
pub enum ViewerError {
    /// No job dir was given.
    #[error("no job directory given; pass one or more job dirs (jobs/<job_name>)")]
    NoJobs,
    /// The path is not a directory.
    #[error("{path}: not a directory; pass a job dir (jobs/<job_name>)")]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// A directory without config.json, result.json or trial dirs.
    #[error(
        "{path}: not a job dir (no config.json, result.json or trial dirs); pass a job dir such as jobs/<job_name>, not the jobs dir or a trial dir"
    )]
    NotAJob {
        /// The path given.
        path: PathBuf,
    },
    /// A directory whose subdirs are job dirs: the jobs dir, one level too high.
    #[error("{path}: a directory of jobs, not a job; pass a job dir such as {example}")]
    JobsDir {
        /// The path given.
        path: PathBuf,
        /// One of the job dirs inside.
        example: PathBuf,
    },
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or dir.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}
