//! `runner images prune`: removes the images runner built or pulled that no job used within
//! a number of days. Runner's images are the ledger's entries and, when asked, also images
//! labelled `runner.managed` that the ledger does not know (built by runners that kept another
//! ledger or none), judged by their creation time: not by default, because a ledger of another
//! state directory (another user, a test) may still be using them. Images the user pulled or
//! built are never candidates; an image a container still uses is kept.

use std::collections::HashMap;

use bollard::query_parameters::{ListImagesOptionsBuilder, RemoveImageOptionsBuilder};
use chrono::{DateTime, Utc};

use crate::connect::DockerClient;
use crate::error::DockerError;
use crate::image::inspect;
use crate::image::ledger::{Ledger, LedgerFile, LedgerOrigin};
use crate::labels::MANAGED;

/// One image prune looked at.
#[derive(Debug, Clone, PartialEq)]
pub struct PruneItem {
    /// The reference (tag) removed or kept.
    pub reference: String,
    /// `built`, `pulled` or `built (label)` for a labelled image outside the ledger.
    pub origin: String,
    /// When a job last used it (the creation time for a labelled image outside the ledger).
    pub last_used_at: DateTime<Utc>,
    /// Its size in bytes, when the engine still had it.
    pub size_bytes: Option<u64>,
}

/// What a prune did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PruneReport {
    /// Removed (or, in a dry run, that would be removed).
    pub removed: Vec<PruneItem>,
    /// Kept because the engine refused to remove them, with its answer (e.g. in use).
    pub kept: Vec<(PruneItem, String)>,
    /// Ledger entries whose image was already gone (dropped from the ledger).
    pub gone: Vec<String>,
}

/// Removes runner's images unused since `cutoff` (with `all_labelled`, also labelled images
/// the ledger does not know, created before `cutoff`); with `dry_run`, only reports them.
pub async fn prune_images(
    client: &DockerClient,
    ledger: &Ledger,
    cutoff: DateTime<Utc>,
    all_labelled: bool,
    dry_run: bool,
) -> Result<PruneReport, DockerError> {
    let io = |source| DockerError::Io {
        operation: format!("reading the image ledger {}", ledger.path().display()),
        source,
    };
    let recorded = ledger.read().map_err(io)?;
    let mut candidates = ledger_candidates(&recorded, cutoff);
    if all_labelled {
        candidates.extend(labelled_candidates(client, &recorded, cutoff).await?);
    }
    let mut report = PruneReport::default();
    for mut item in candidates {
        let Some(found) = inspect(client, &item.reference).await? else {
            report.gone.push(item.reference);
            continue;
        };
        item.size_bytes = found.size.and_then(|s| u64::try_from(s).ok());
        if dry_run {
            report.removed.push(item);
        } else {
            remove(client, item, &mut report).await?;
        }
    }
    if !dry_run {
        let forget: Vec<String> = report
            .removed
            .iter()
            .map(|i| i.reference.clone())
            .chain(report.gone.iter().cloned())
            .collect();
        ledger
            .update(|file| {
                for reference in &forget {
                    file.images.remove(reference);
                }
            })
            .map_err(io)?;
    }
    Ok(report)
}

/// The ledger's images no job used since `cutoff`.
fn ledger_candidates(recorded: &LedgerFile, cutoff: DateTime<Utc>) -> Vec<PruneItem> {
    recorded
        .images
        .iter()
        .filter(|(_, e)| e.last_used_at < cutoff)
        .map(|(reference, e)| PruneItem {
            reference: reference.clone(),
            origin: match e.origin {
                LedgerOrigin::Built => "built".into(),
                LedgerOrigin::Pulled => "pulled".into(),
            },
            last_used_at: e.last_used_at,
            size_bytes: None,
        })
        .collect()
}

/// The tags of images labelled `runner.managed` that the ledger does not know, created before
/// `cutoff`.
async fn labelled_candidates(
    client: &DockerClient,
    recorded: &LedgerFile,
    cutoff: DateTime<Utc>,
) -> Result<Vec<PruneItem>, DockerError> {
    let labelled = client
        .api()
        .list_images(Some(
            ListImagesOptionsBuilder::default()
                .filters(&HashMap::from([("label", vec![format!("{MANAGED}=1")])]))
                .build(),
        ))
        .await
        .map_err(|e| DockerError::api("listing runner's labelled images", e))?;
    let mut candidates = Vec::new();
    for image in labelled {
        let created = DateTime::from_timestamp(image.created, 0).unwrap_or_default();
        for tag in image.repo_tags {
            if !recorded.images.contains_key(&tag) && created < cutoff && tag != "<none>:<none>" {
                candidates.push(PruneItem {
                    reference: tag,
                    origin: "built (label)".into(),
                    last_used_at: created,
                    size_bytes: None,
                });
            }
        }
    }
    Ok(candidates)
}

/// Removes `item`'s image and files it in `report`: removed, gone already, or kept with the
/// engine's answer.
async fn remove(
    client: &DockerClient,
    item: PruneItem,
    report: &mut PruneReport,
) -> Result<(), DockerError> {
    // Without force: an image a container uses is refused (409) and kept.
    let options = RemoveImageOptionsBuilder::default().force(false).build();
    match client
        .api()
        .remove_image(&item.reference, Some(options), None)
        .await
    {
        Ok(_) => report.removed.push(item),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => report.gone.push(item.reference),
        Err(bollard::errors::Error::DockerResponseServerError { message, .. }) => {
            report.kept.push((item, message))
        }
        Err(e) => {
            return Err(DockerError::api(
                format!("removing image {}", item.reference),
                e,
            ));
        }
    }
    Ok(())
}
