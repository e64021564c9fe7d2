//! `runner merge`: one job dir from several of one plan (the shards of a `--shard I/N` split,
//! or any jobs of the same plan, such as a re-run of the trials that failed), with
//! config.json, lock.json and result.json as if the job had run in one go.
//!
//! The parts must be of one plan (see [`check::plan_differences`]). The plan's trials are the
//! union of the parts' lock entries; each trial is taken from the part whose copy counts
//! most (a result that counts, then an infrastructure error, then none: so merging a job
//! with a re-run of its failed trials keeps the re-run's results); two copies that both
//! count and differ in content are refused. result.json is recomputed by the job recorder
//! from the taken trials, exactly as a resumed job's is.

mod check;
mod parts;
mod records;
mod totals;
mod tree;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use tasks::records::{JobLlmUsage, LockTrial};

use super::log::JobLog;
use super::recorder::JobRecorder;
pub use parts::Part;

/// Why a merge was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error(
        "no job directory given; pass the job dirs to merge (e.g. the shards jobs/run-1 jobs/run-2 jobs/run-3)"
    )]
    NoJobs,
    /// A part is not a job dir runner wrote.
    #[error("{}: not a job to merge: {why}", dir.display())]
    NotAJob {
        /// The dir given.
        dir: PathBuf,
        /// What is missing or unreadable.
        why: String,
    },
    /// Two parts are of different plans.
    #[error(
        "{} (A) and {} (B) are not parts of one plan:\n{}\nmerge only shards or re-runs of one job (same agent and its config, model, dataset, k, multipliers and limits)",
        a.display(), b.display(),
        differences.iter().map(|d| format!("  - {d}")).collect::<Vec<_>>().join("\n")
    )]
    Differs {
        /// The first part.
        a: PathBuf,
        /// The part that differs from it.
        b: PathBuf,
        /// One line per field.
        differences: Vec<String>,
    },
    /// A trial present in two parts with different content, both counting.
    #[error(
        "trial {trial} is in {} and in {} with different content (both have a result); keep one of them (move the other trial dir away) and merge again",
        a.display(), b.display()
    )]
    Conflict {
        /// The trial's name.
        trial: String,
        /// One copy.
        a: PathBuf,
        /// The other.
        b: PathBuf,
    },
    /// The output dir is in use.
    #[error("--out {}: already exists and is not empty; choose a new directory", dir.display())]
    OutExists {
        /// The dir.
        dir: PathBuf,
    },
    /// The output dir is inside a part (it would become one of its trial dirs).
    #[error("--out {} is inside {}, a job being merged; write the merged job beside it", out.display(), part.display())]
    OutInside {
        /// The output dir.
        out: PathBuf,
        /// The part holding it.
        part: PathBuf,
    },
    /// A part's records changed after its run, or a trajectory is not its trial's.
    #[error(transparent)]
    Records(#[from] records::RecordsError),
    /// Reading or writing failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or dir.
        path: PathBuf,
        /// The file system's answer.
        #[source]
        source: std::io::Error,
    },
}

impl MergeError {
    /// Whether the user's input is at fault (else the runner could not do its own part).
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, MergeError::Io { .. })
    }
}

/// What a merge did.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeReport {
    /// The merged job dir.
    pub out: PathBuf,
    /// Trials in the merged plan (the union of the parts' lock entries).
    pub planned: usize,
    /// Trials taken, by the part (index into the inputs) they came from.
    pub taken: Vec<usize>,
    /// Files copied (never hard-linked: see `tree`).
    pub files: u64,
    /// With shards of N: the shards (from 1) no part is.
    pub missing_shards: Vec<u32>,
    /// How many shards the plan was split into, when every part is a shard.
    pub n_shards: Option<u32>,
    /// Planned trials with no result in any part.
    pub missing_trials: Vec<String>,
    /// Trials whose copy in one part was chosen over another's, with why.
    pub choices: Vec<String>,
    /// Trial dirs of the parts that no part's plan names (left out).
    pub strays: Vec<String>,
    /// A line for each part whose trials recorded another `source` (dataset directory name)
    /// than the first part's, under which the merged job counts them.
    pub recounted_sources: Vec<String>,
    /// The merged job's coverage.
    pub coverage: tasks::records::Coverage,
    /// Parts without a record manifest (jobs of an earlier runner): their trials are merged
    /// but not recorded in the merged job's manifest.
    pub unrecorded: Vec<PathBuf>,
}

impl MergeReport {
    /// The merged job lacks data: a shard, or a trial without a result that counts.
    pub fn incomplete(&self) -> bool {
        !self.missing_shards.is_empty() || self.coverage.infra_error + self.coverage.not_run > 0
    }
}

/// Merges the job dirs `inputs` into the new job dir `out`.
pub fn merge(inputs: &[PathBuf], out: &Path) -> Result<MergeReport, MergeError> {
    let parts = read_parts(inputs)?;
    // The plan: every part's lock entries, each trial once (its entry from the part its
    // copy is taken from, which names the image it ran on there).
    let planned_names: BTreeSet<&str> = parts
        .iter()
        .flat_map(|p| p.lock.trials.iter().map(|t| t.trial_name.as_str()))
        .collect();
    let (taken, choices) = take_trials(&parts, &planned_names)?;
    // Before anything is written: a part whose records changed after its run is refused.
    let manifests = parts
        .iter()
        .map(records::part_manifest)
        .collect::<Result<Vec<_>, _>>()?;
    let entries = records::check_taken(&parts, &manifests, &taken)?;
    let strays = strays(&parts, &planned_names);
    refuse_out_inside(&parts, out)?;
    prepare_out(out)?;
    let files = copy_taken(&parts, &taken, out)?;

    let order = plan_order(&parts, &planned_names);
    let lock = merged_lock(&parts, &order, &taken);
    let config = merged_config(&parts, &taken, out);
    tasks::atomic::write_json_atomic(&out.join("config.json"), &config)
        .map_err(io(&out.join("config.json")))?;

    let (totals, recounted_sources) = totals::merged_totals(&parts, &order, &taken);
    let missing_trials = missing_trials(&parts, &order, &taken);
    let (n_shards, missing_shards) = shards(&parts);
    let log = JobLog::open(out);
    let job_id = job_id(&parts);
    let mut recorder = JobRecorder::new(
        out.to_owned(),
        &job_id,
        order.len() as u32,
        lock,
        earliest(&parts),
        totals,
        log.clone(),
    );
    if let Some(usage) = llm_usage(&parts) {
        recorder.set_llm_usage(usage);
    }
    recorder
        .manifest_mut()
        .set_trials(entries)
        .map_err(io(&out.join(tasks::records::RECORD_MANIFEST)))?;
    recorder.write_lock().map_err(io(&out.join("lock.json")))?;
    recorder
        .finish_at(latest(&parts))
        .map_err(io(&out.join("result.json")))?;
    let report = MergeReport {
        out: out.to_owned(),
        planned: order.len(),
        taken: taken.values().copied().collect(),
        files,
        missing_shards,
        n_shards,
        missing_trials,
        choices,
        strays,
        recounted_sources,
        coverage: recorder.coverage(),
        unrecorded: parts
            .iter()
            .zip(&manifests)
            .filter(|(_, m)| m.is_none())
            .map(|(p, _)| p.dir.clone())
            .collect(),
    };
    write_log(&log, &parts, &report, &taken);
    Ok(report)
}

/// A file system failure at `path`, as a merge error.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> MergeError {
    let path = path.to_owned();
    move |source| MergeError::Io { path, source }
}

/// The parts, read; refused unless each planned what the first did.
fn read_parts(inputs: &[PathBuf]) -> Result<Vec<Part>, MergeError> {
    if inputs.is_empty() {
        return Err(MergeError::NoJobs);
    }
    let parts = inputs
        .iter()
        .map(|d| Part::read(d))
        .collect::<Result<Vec<_>, _>>()?;
    for part in &parts[1..] {
        let differences = check::plan_differences(&parts[0], part);
        if !differences.is_empty() {
            return Err(MergeError::Differs {
                a: parts[0].dir.clone(),
                b: part.dir.clone(),
                differences,
            });
        }
    }
    Ok(parts)
}

/// Which part each planned trial is taken from (none for a trial no part has), and why, where
/// another part also had it.
fn take_trials<'a>(
    parts: &[Part],
    planned_names: &BTreeSet<&'a str>,
) -> Result<(BTreeMap<&'a str, usize>, Vec<String>), MergeError> {
    let mut taken = BTreeMap::new();
    let mut choices = Vec::new();
    for name in planned_names {
        if let Some((part, why)) = choose(parts, name)? {
            taken.insert(*name, part);
            choices.extend(why);
        }
    }
    Ok((taken, choices))
}

/// The parts' trial dirs that no part's plan names (left out of the merge).
fn strays(parts: &[Part], planned_names: &BTreeSet<&str>) -> Vec<String> {
    parts
        .iter()
        .flat_map(|p| {
            p.trials
                .keys()
                .filter(|n| !planned_names.contains(n.as_str()))
                .map(|n| format!("{}/{n}", p.dir.display()))
        })
        .collect()
}

/// Refuses an `out` inside a part: the merged job would become a trial dir of that part.
fn refuse_out_inside(parts: &[Part], out: &Path) -> Result<(), MergeError> {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    match parts
        .iter()
        .find(|p| absolute(out).starts_with(absolute(&p.dir)))
    {
        Some(part) => Err(MergeError::OutInside {
            out: out.to_owned(),
            part: part.dir.clone(),
        }),
        None => Ok(()),
    }
}

/// Copies each taken trial's dir into `out`, then syncs `out`; the number of files copied.
fn copy_taken(
    parts: &[Part],
    taken: &BTreeMap<&str, usize>,
    out: &Path,
) -> Result<u64, MergeError> {
    let mut files = 0;
    for (name, part) in taken {
        let from = &parts[*part].trials[*name].dir;
        files += tree::copy_tree(from, &out.join(name)).map_err(io(&out.join(name)))?;
    }
    tasks::atomic::sync_dir(out).map_err(io(out))?;
    Ok(files)
}

/// The merged job's config.json: the first part's, unsharded, naming the parts it came from
/// and `out` as its job name and jobs dir.
fn merged_config(
    parts: &[Part],
    taken: &BTreeMap<&str, usize>,
    out: &Path,
) -> tasks::records::JobConfig {
    let mut config = parts[0].config.clone();
    config.shard = None;
    config.n_shards = None;
    config.merged_from = part_ids(parts, taken);
    config.job_name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    config.jobs_dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| ".".to_owned(), |p| p.display().to_string());
    config
}

/// Planned trials with no result in the part they are taken from (or in none).
fn missing_trials(parts: &[Part], order: &[String], taken: &BTreeMap<&str, usize>) -> Vec<String> {
    order
        .iter()
        .filter(|n| {
            taken
                .get(n.as_str())
                .is_none_or(|p| parts[*p].trials[n.as_str()].result.is_none())
        })
        .cloned()
        .collect()
}

/// The part `name` is taken from (and why, when another part also had it), or none when no
/// part has a dir for it.
fn choose(parts: &[Part], name: &str) -> Result<Option<(usize, Option<String>)>, MergeError> {
    let copies: Vec<(usize, &parts::TrialCopy)> = parts
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((i, p.trials.get(name)?)))
        .collect();
    let Some(best) = copies.iter().map(|(_, c)| c.rank()).max() else {
        return Ok(None);
    };
    let mut best_copies = copies.iter().filter(|(_, c)| c.rank() == best);
    let (first, copy) = *best_copies.next().expect("the best rank has a copy");
    if best > 0 {
        for (other, other_copy) in best_copies {
            let same =
                tree::same_tree(&copy.dir, &other_copy.dir).map_err(|source| MergeError::Io {
                    path: other_copy.dir.clone(),
                    source,
                })?;
            if !same {
                return Err(MergeError::Conflict {
                    trial: name.to_owned(),
                    a: parts[first].dir.clone(),
                    b: parts[*other].dir.clone(),
                });
            }
        }
    }
    let why = (copies.len() > 1 && copies.iter().any(|(_, c)| c.rank() != best)).then(|| {
        let what = ["no result", "an infrastructure error", "a result"];
        format!(
            "trial {name}: taken from {} ({}) over {}",
            parts[first].dir.display(),
            what[best as usize],
            copies
                .iter()
                .filter(|(_, c)| c.rank() < best)
                .map(|(i, c)| format!("{} ({})", parts[*i].dir.display(), what[c.rank() as usize]))
                .collect::<Vec<_>>()
                .join(", ")
        )
    });
    Ok(Some((first, why)))
}

/// The output dir: new, or an empty dir.
fn prepare_out(out: &Path) -> Result<(), MergeError> {
    let non_empty = std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some());
    if non_empty || out.is_file() {
        return Err(MergeError::OutExists {
            dir: out.to_owned(),
        });
    }
    std::fs::create_dir_all(out).map_err(|source| MergeError::Io {
        path: out.to_owned(),
        source,
    })
}

/// The trials in the unsharded plan's order: trial index (from the trial's identity), then
/// task name, as `plan_job` orders them; a trial whose index is unknown goes last.
fn plan_order(parts: &[Part], planned: &BTreeSet<&str>) -> Vec<String> {
    let mut task_of: HashMap<&str, &str> = HashMap::new();
    let mut index_of: HashMap<&str, u32> = HashMap::new();
    for part in parts {
        for t in &part.lock.trials {
            task_of.entry(&t.trial_name).or_insert(&t.task.name);
        }
        for (name, copy) in &part.trials {
            if let Some(i) = copy.config.as_ref().and_then(|c| c.identity.as_ref()) {
                index_of.entry(name).or_insert(i.index);
            }
        }
    }
    let mut order: Vec<&str> = planned.iter().copied().collect();
    order.sort_by_key(|n| {
        (
            index_of.get(n).copied().unwrap_or(u32::MAX),
            task_of.get(n).copied().unwrap_or(""),
            *n,
        )
    });
    order.into_iter().map(str::to_owned).collect()
}

/// The first part's lock for the whole plan: every trial's entry from the part it was taken
/// from (else the first part that plans it), the images of every part, the first creation.
fn merged_lock(
    parts: &[Part],
    order: &[String],
    taken: &BTreeMap<&str, usize>,
) -> tasks::records::JobLock {
    let mut lock = parts[0].lock.clone();
    let entry = |part: &Part, name: &str| -> Option<LockTrial> {
        part.lock
            .trials
            .iter()
            .find(|t| t.trial_name == name)
            .cloned()
    };
    lock.trials = order
        .iter()
        .filter_map(|name| {
            taken
                .get(name.as_str())
                .and_then(|p| entry(&parts[*p], name))
                .or_else(|| parts.iter().find_map(|p| entry(p, name)))
        })
        .collect();
    for part in parts {
        for (task, image) in &part.lock.images {
            lock.images
                .entry(task.clone())
                .or_insert_with(|| image.clone());
        }
        for (task, engines) in &part.lock.engine_images {
            let merged = lock.engine_images.entry(task.clone()).or_default();
            for (engine, id) in engines {
                merged.entry(engine.clone()).or_insert_with(|| id.clone());
            }
        }
    }
    lock.created_at = parts
        .iter()
        .map(|p| p.lock.created_at)
        .min()
        .unwrap_or(lock.created_at);
    lock.invocation = without_shard(&lock.invocation);
    // Written in this runner's shape whatever the parts' (a part's older entries read with
    // 0.26's fields at their defaults).
    lock.schema_version = tasks::records::JOB_LOCK_SCHEMA;
    lock
}

/// The invocation without `--shard I/N`, so `runner jobs resume` on the merged job plans
/// the whole job and runs again its trials without a result (a missing shard's tasks are
/// not in the merged job: a resume refuses them by name).
fn without_shard(argv: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for arg in argv {
        if std::mem::take(&mut skip) {
            continue;
        }
        if arg == "--shard" {
            skip = true;
        } else if !arg.starts_with("--shard=") {
            out.push(arg.clone());
        }
    }
    out
}

/// With every part a shard of N: N and the shards none is.
fn shards(parts: &[Part]) -> (Option<u32>, Vec<u32>) {
    let all_shards = parts.iter().all(|p| p.config.shard.is_some());
    match parts[0].config.n_shards {
        Some(n) if all_shards => {
            let have: BTreeSet<u32> = parts.iter().filter_map(|p| p.config.shard).collect();
            (Some(n), (1..=n).filter(|i| !have.contains(i)).collect())
        }
        _ => (None, Vec::new()),
    }
}

/// One job id when every part has the same (the same job given twice), else a new one.
/// The job ids the merged trials record (their parts' ids, also of a part that has no
/// result.json yet), each once, in the parts' order.
fn part_ids(parts: &[Part], taken: &BTreeMap<&str, usize>) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let recorded = taken
            .iter()
            .filter(|(_, p)| **p == i)
            .filter_map(|(name, _)| part.trials[*name].config.as_ref().map(|c| &c.job_id));
        for id in part
            .result
            .as_ref()
            .map(|r| &r.id)
            .into_iter()
            .chain(recorded)
        {
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
    }
    ids
}

fn job_id(parts: &[Part]) -> String {
    let ids: BTreeSet<&str> = parts
        .iter()
        .filter_map(|p| p.result.as_ref().map(|r| r.id.as_str()))
        .collect();
    match (ids.len(), ids.first()) {
        (1, Some(id)) if parts.iter().all(|p| p.result.is_some()) => (*id).to_owned(),
        _ => uuid::Uuid::new_v4().to_string(),
    }
}

fn earliest(parts: &[Part]) -> Option<DateTime<Utc>> {
    parts
        .iter()
        .filter_map(|p| p.result.as_ref().map(|r| r.started_at))
        .min()
}

/// The last part's end, or none while some part has not finished.
fn latest(parts: &[Part]) -> Option<DateTime<Utc>> {
    parts
        .iter()
        .map(|p| p.result.as_ref().and_then(|r| r.finished_at))
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .max()
}

/// The parts' LLM bridge totals added up (each counts every attempt it ran).
fn llm_usage(parts: &[Part]) -> Option<JobLlmUsage> {
    let usages: Vec<&JobLlmUsage> = parts
        .iter()
        .filter_map(|p| p.result.as_ref()?.llm_bridge.as_ref())
        .collect();
    if usages.is_empty() {
        return None;
    }
    let mut total = JobLlmUsage::default();
    for u in usages {
        total.n_input_tokens += u.n_input_tokens;
        total.n_cache_tokens += u.n_cache_tokens;
        total.n_cache_write_tokens += u.n_cache_write_tokens;
        total.n_output_tokens += u.n_output_tokens;
        total.cost_usd = match (total.cost_usd, u.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        total.n_calls += u.n_calls;
        total.n_refused_calls += u.n_refused_calls;
        total.n_failed_calls += u.n_failed_calls;
        total.n_trials += u.n_trials;
        for m in &u.models_called {
            if !total.models_called.contains(m) {
                total.models_called.push(m.clone());
            }
        }
        for m in &u.unpriced_models {
            if !total.unpriced_models.contains(m) {
                total.unpriced_models.push(m.clone());
            }
        }
        if total.budget_exhausted.is_none() {
            total.budget_exhausted = u.budget_exhausted.clone();
        }
    }
    Some(total)
}

/// job.log: where each part came from, what was chosen, what is missing; then each part's
/// own job.log, so nothing of how the trials ran is lost.
fn write_log(log: &JobLog, parts: &[Part], report: &MergeReport, taken: &BTreeMap<&str, usize>) {
    log.line(&format!(
        "job merged by runner merge (runner {}) from {} job dir(s): {} trial(s) planned, {} taken",
        tasks::RUNNER_VERSION,
        parts.len(),
        report.planned,
        taken.len()
    ));
    for (i, part) in parts.iter().enumerate() {
        let count = taken.values().filter(|p| **p == i).count();
        log.line(&format!(
            "part {}: {} ({}, job {}): {} trial(s) taken of {} planned there",
            i + 1,
            part.dir.display(),
            part.label(),
            part.result.as_ref().map_or("?", |r| r.id.as_str()),
            count,
            part.lock.trials.len()
        ));
    }
    for line in report.choices.iter().chain(&report.recounted_sources) {
        log.line(line);
    }
    for stray in &report.strays {
        log.line(&format!("left out {stray}: no part's plan names it"));
    }
    for part in &report.unrecorded {
        log.line(&format!(
            "{}: no {}: its trials are not recorded in this job's (not recorded)",
            part.display(),
            tasks::records::RECORD_MANIFEST
        ));
    }
    if !report.missing_shards.is_empty() {
        log.line(&format!(
            "missing shard(s) {} of {}: their trials are not in this job",
            report
                .missing_shards
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            report.n_shards.unwrap_or(0)
        ));
    }
    if !report.missing_trials.is_empty() {
        log.line(&format!(
            "{} planned trial(s) have no result: {}",
            report.missing_trials.len(),
            report.missing_trials.join(", ")
        ));
    }
    for (i, part) in parts.iter().enumerate() {
        if let Ok(text) = std::fs::read_to_string(part.dir.join(super::JOB_LOG)) {
            log.block(
                &format!("job.log of part {} ({}):", i + 1, part.dir.display()),
                &text,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_invocation_loses_its_shard() {
        let argv: Vec<String> = ["runner", "run", "--shard", "2/3", "-k", "5", "--shard=1/2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(without_shard(&argv), vec!["runner", "run", "-k", "5"]);
    }
}
