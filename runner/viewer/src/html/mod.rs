//! The static HTML report: `index.html` with every job's summary, task table and trial list,
//! and one page per trial. Works from `file://` with no network: inline CSS, no script, and
//! a Content-Security-Policy that forbids scripts and remote loads, so even a bug in escaping
//! could not run what an agent wrote. Every value is escaped by maud.

mod index;
mod links;
mod trajectory;
mod trial;

use std::path::{Path, PathBuf};

use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde::Serialize;
use stats::Resampling;

use crate::ViewerError;
use crate::load::Job;
use crate::summary::{JobSummary, summarize_job};

pub use links::Links;

const STYLE: &str = include_str!("style.css");

/// Scripts none, styles inline only, images only from files (trajectory images).
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src file: 'self' data:";

/// What [`write_report`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportSummary {
    /// The report's entry page, `<out>/index.html`.
    pub index: PathBuf,
    /// Job dirs in the report.
    pub jobs: usize,
    /// Trial pages written.
    pub trial_pages: usize,
    /// Trajectory steps rendered over all trial pages.
    pub steps: usize,
}

/// A job with what its pages need: the summary, and each trial's page name.
pub(crate) struct JobPages {
    pub job: Job,
    pub summary: JobSummary,
    /// The job's folder under the output dir.
    pub folder: String,
    /// 1-based position in the report, for anchors (`#job-2`).
    pub number: usize,
    /// Per trial (same order as `job.trials`): the page's file name, and its step count.
    pub pages: Vec<(String, Option<usize>)>,
}

/// Keeps `[A-Za-z0-9._-]`, so a name from a job dir is always a safe single path component.
pub(crate) fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s = s.trim_start_matches('.').to_owned();
    if s.is_empty() { "_".into() } else { s }
}

/// The anchor of a task's row in the index.
pub(crate) fn task_anchor(job: usize, task: &str) -> String {
    format!("job-{job}-task-{}", slug(task))
}

/// A full page: head with the inline style and the CSP, a breadcrumb, and `body`.
pub(crate) fn page(title: &str, crumbs: &[(String, String)], body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(CSP);
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                nav.crumbs {
                    @for (href, label) in crumbs {
                        a href=(href) { (label) } " › "
                    }
                    span { (title) }
                }
                main { (body) }
            }
        }
    }
}

fn write(path: &Path, markup: Markup) -> Result<(), ViewerError> {
    tasks::atomic::write_atomic(path, markup.into_string().as_bytes()).map_err(|source| {
        ViewerError::Io {
            path: path.to_path_buf(),
            source,
        }
    })
}

fn create_dir(path: &Path) -> Result<(), ViewerError> {
    std::fs::create_dir_all(path).map_err(|source| ViewerError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes the report for `job_dirs` (runner's or Harbor's) into `out` (created if needed):
/// `index.html` and one page per trial under a folder per job. Links to the job's own files
/// (full logs, trajectories) are relative, so moving `out` and the jobs together keeps them.
pub fn write_report(job_dirs: &[PathBuf], out: &Path) -> Result<ReportSummary, ViewerError> {
    let groups: Vec<Vec<PathBuf>> = job_dirs.iter().map(|d| vec![d.clone()]).collect();
    write_report_groups(&groups, out)
}

/// [`write_report`] of jobs each made of one or more job dirs read as one (the shards of a
/// split: see [`crate::load_jobs`]).
pub fn write_report_groups(
    job_dirs: &[Vec<PathBuf>],
    out: &Path,
) -> Result<ReportSummary, ViewerError> {
    if job_dirs.is_empty() {
        return Err(ViewerError::NoJobs);
    }
    create_dir(out)?;
    let out = out.canonicalize().map_err(|source| ViewerError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    let mut jobs = Vec::new();
    for (i, dir) in job_dirs.iter().enumerate() {
        let job = crate::union::load_jobs(dir)?;
        let summary = summarize_job(&job, &Resampling::default());
        let folder = format!("job{}-{}", i + 1, slug(&job.name));
        jobs.push(JobPages {
            job,
            summary,
            folder,
            number: i + 1,
            pages: Vec::new(),
        });
    }
    let mut trial_pages = 0;
    let mut steps = 0;
    for jp in &mut jobs {
        let folder = out.join(&jp.folder);
        create_dir(&folder)?;
        let links = Links::new(&folder);
        let mut names: Vec<String> = Vec::new();
        for trial in &jp.job.trials {
            let mut name = format!("{}.html", slug(&trial.name));
            let mut n = 2;
            while names.contains(&name) {
                name = format!("{}-{n}.html", slug(&trial.name));
                n += 1;
            }
            names.push(name);
        }
        let mut pages = Vec::new();
        for (t, trial) in jp.job.trials.iter().enumerate() {
            let neighbours = trial::Neighbours {
                previous: t.checked_sub(1).map(|p| names[p].as_str()),
                next: names.get(t + 1).map(String::as_str),
            };
            let rendered = trial::render(jp, trial, &links, &neighbours);
            write(&folder.join(&names[t]), rendered.markup)?;
            steps += rendered.steps.unwrap_or(0);
            trial_pages += 1;
            pages.push((names[t].clone(), rendered.steps));
        }
        jp.pages = pages;
    }
    let index = out.join("index.html");
    write(&index, index::render(&jobs, &Links::new(&out)))?;
    Ok(ReportSummary {
        index,
        jobs: jobs.len(),
        trial_pages,
        steps,
    })
}
