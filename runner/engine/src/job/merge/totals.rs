//! The merged job's trial totals, from which its result.json is recomputed: each taken
//! trial's, all counted under one eval key.
//!
//! A trial's eval key names its `source`, the dataset directory's name (Harbor 0.26). Shards
//! run on machines whose checkouts are named differently (`terminal-bench` on one,
//! `tb2` on another) record different sources for one plan; the plan check does not compare
//! paths, so such parts merge, and counted as recorded they would split the job's stats into
//! two partial evals. The merged job counts every trial under the first part's source, as a
//! resumed job counts its older trials under the plan's, and says so; each trial's own
//! record keeps the source it was run with.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use tasks::records::{SharedNames, TrialResult, TrialTotals};

use super::parts::Part;

/// The totals of the trials in `order` that have a result in the part `taken` names, and a
/// line for each part whose trials were counted under another source than they recorded.
pub(super) fn merged_totals(
    parts: &[Part],
    order: &[String],
    taken: &BTreeMap<&str, usize>,
) -> (Vec<TrialTotals>, Vec<String>) {
    let result_of = |name: &str| -> Option<(usize, &TrialResult)> {
        let part = *taken.get(name)?;
        Some((part, parts[part].trials[name].result.as_ref()?))
    };
    // The first part's, in the order the parts were given (the first of them with a result).
    let Some((first_part, first)) = order
        .iter()
        .filter_map(|name| result_of(name))
        .min_by_key(|(part, _)| *part)
    else {
        return (Vec::new(), Vec::new());
    };
    let source = first.source.clone();
    let mut names = SharedNames::default();
    let mut renamed: BTreeMap<usize, BTreeSet<Option<String>>> = BTreeMap::new();
    let totals = order
        .iter()
        .filter_map(|name| result_of(name))
        .map(|(part, result)| {
            let result = if result.source == source {
                Cow::Borrowed(result)
            } else {
                renamed
                    .entry(part)
                    .or_default()
                    .insert(result.source.clone());
                let mut counted = result.clone();
                counted.source.clone_from(&source);
                Cow::Owned(counted)
            };
            TrialTotals::of(&result, &mut names)
        })
        .collect();
    let shown = |s: &Option<String>| s.as_deref().unwrap_or("none (a single task)").to_owned();
    let notes = renamed
        .into_iter()
        .map(|(part, recorded)| {
            let recorded: Vec<String> = recorded.iter().map(shown).collect();
            format!(
                "trials of {} recorded source {} (their dataset directory's name there); the merged job counts them under {}, the source of {}, so it has one eval key per agent and model",
                parts[part].dir.display(),
                recorded.join(", "),
                shown(&source),
                parts[first_part].dir.display()
            )
        })
        .collect();
    (totals, notes)
}
