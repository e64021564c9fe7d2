//! What `runner merge` checks of the parts' records before it copies a trial: the part's
//! record manifest (and its signature, when signed) still matches the trial's files, and the
//! trial's trajectory is its own (agent and model as its `agent_info`, no session shared
//! with another trial taken). A part without a manifest (a job of an earlier runner) is merged
//! with its trials left out of the merged manifest, which validation then names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tasks::records::record_manifest::{TrialEntries, describe_changes};
use tasks::records::record_signature::{ManifestSignature, RECORD_SIGNATURE, verify};
use tasks::records::trajectory_binding::{
    TrajectoryFacts, binding_problems, read_trajectory, repeated_sessions,
};
use tasks::records::{RECORD_MANIFEST, RecordManifest};

use super::parts::Part;

/// A part's records that do not hold.
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    /// A part's manifest or signature cannot be read or does not hold.
    #[error("{}: {problem}; the job's records changed after the run, so it is not merged", dir.display())]
    Manifest {
        /// The part.
        dir: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A trial's files differ from what its part's manifest recorded.
    #[error("{}/{trial}: its records changed after the trial ended ({changes}); merge the job as the run left it", dir.display())]
    Changed {
        /// The part.
        dir: PathBuf,
        /// The trial.
        trial: String,
        /// The files that differ.
        changes: String,
    },
    /// A trajectory is not the trial's own.
    #[error("{trial}: agent/trajectory.json is not this trial's: {problem}")]
    NotBound {
        /// The trial (as `part/trial`).
        trial: String,
        /// What differs.
        problem: String,
    },
}

/// A part's manifest (`None`: it has none), its signature checked when it has one.
pub fn part_manifest(part: &Part) -> Result<Option<RecordManifest>, RecordsError> {
    let bad = |problem: String| RecordsError::Manifest {
        dir: part.dir.clone(),
        problem,
    };
    let bytes = match std::fs::read(part.dir.join(RECORD_MANIFEST)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(bad(format!("cannot read {RECORD_MANIFEST}: {e}"))),
    };
    let manifest = RecordManifest::parse(&bytes)
        .map_err(|e| bad(format!("{RECORD_MANIFEST} is malformed: {e}")))?;
    match std::fs::read(part.dir.join(RECORD_SIGNATURE)) {
        Ok(sig) => {
            let sig: ManifestSignature = serde_json::from_slice(&sig)
                .map_err(|e| bad(format!("{RECORD_SIGNATURE} is malformed: {e}")))?;
            verify(&sig, &bytes, &[]).map_err(|e| bad(e.to_string()))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bad(format!("cannot read {RECORD_SIGNATURE}: {e}"))),
    }
    Ok(Some(manifest))
}

/// Checks the trials taken (name → part) against their parts' manifests and each other's
/// trajectories; returns the merged manifest's entries.
pub fn check_taken(
    parts: &[Part],
    manifests: &[Option<RecordManifest>],
    taken: &BTreeMap<&str, usize>,
) -> Result<TrialEntries, RecordsError> {
    let mut entries = TrialEntries::new();
    let mut sessions: Vec<(String, TrajectoryFacts)> = Vec::new();
    for (name, part) in taken {
        let copy = &parts[*part].trials[*name];
        if let Some(manifest) = &manifests[*part]
            && let Some(changes) = manifest.trial_changes(name, &copy.dir)
        {
            let changes = changes.map_err(|e| RecordsError::Manifest {
                dir: parts[*part].dir.clone(),
                problem: format!("cannot read trial {name}: {e}"),
            })?;
            if !changes.is_empty() {
                return Err(RecordsError::Changed {
                    dir: parts[*part].dir.clone(),
                    trial: (*name).to_owned(),
                    changes: describe_changes(&changes),
                });
            }
            entries.insert((*name).to_owned(), manifest.trials[*name].clone());
        }
        let label = format!("{}/{name}", parts[*part].dir.display());
        if let Some(facts) = trajectory_of(&copy.dir, &label)? {
            sessions.push((label, facts));
        }
    }
    let repeated = repeated_sessions(sessions.iter().map(|(l, f)| (l.as_str(), f)));
    if let Some((session, trials)) = repeated.first() {
        return Err(RecordsError::NotBound {
            trial: trials[0].to_owned(),
            problem: format!(
                "the same session {session:?} is the trajectory of {} trials: {}",
                trials.len(),
                trials.join(", ")
            ),
        });
    }
    Ok(entries)
}

/// The trajectory of a trial with a result, checked against that result's `agent_info`.
fn trajectory_of(dir: &Path, label: &str) -> Result<Option<TrajectoryFacts>, RecordsError> {
    let Some(facts) = read_trajectory(dir) else {
        return Ok(None);
    };
    let not_bound = |problem: String| RecordsError::NotBound {
        trial: label.to_owned(),
        problem,
    };
    let facts = facts.map_err(not_bound)?;
    let result = tasks::records::read::read_json(&dir.join("result.json"))
        .ok()
        .flatten();
    if let Some(result) = result {
        let problems = binding_problems(&facts, &result, None);
        if !problems.is_empty() {
            return Err(not_bound(problems.join("; ")));
        }
    }
    Ok(Some(facts))
}
