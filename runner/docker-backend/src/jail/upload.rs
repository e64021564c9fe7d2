//! What goes into a verifier jail's fresh root before it runs: the static helper `contain`
//! (embedded in the binary by the build script) and the task's tests, packed off the runtime.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::container::archive;
use crate::error::DockerError;

/// The helper, compiled statically by the build script (empty when that was not possible).
#[cfg(contain_helper)]
pub(crate) const HELPER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/contain"));
#[cfg(not(contain_helper))]
pub(crate) const HELPER: &[u8] = &[];

/// What the helper is called as inside the jail.
pub(crate) const HELPER_PATH: &str = "/.runner/contain";

/// Every jail's first upload: the helper's part of it, packed once and shared (see
/// [`archive::upload_parts`]), then `tests` (a whole archive of them) or the archive's end.
pub(crate) fn jail_root_parts(tests: Option<Vec<u8>>) -> Result<Vec<bytes::Bytes>, DockerError> {
    static ROOT: OnceLock<Result<bytes::Bytes, Arc<std::io::Error>>> = OnceLock::new();
    let root = ROOT
        .get_or_init(|| {
            archive::pack_jail_root_open(HELPER, HELPER_PATH)
                .map(bytes::Bytes::from)
                .map_err(Arc::new)
        })
        .clone()
        .map_err(|e| DockerError::Jail(format!("packing the helper: {e}")))?;
    let rest = match tests {
        Some(tests) => bytes::Bytes::from(tests),
        None => bytes::Bytes::from_static(archive::END_OF_ARCHIVE),
    };
    Ok(vec![root, rest])
}

/// Packs what `pack` makes of the tests at `tests` on a blocking thread (a big tests tree
/// must not hold up the runtime).
pub(crate) async fn pack_off_thread(
    tests: &Path,
    pack: fn(&Path) -> std::io::Result<Vec<u8>>,
) -> Result<Vec<u8>, DockerError> {
    let dir = tests.to_path_buf();
    tokio::task::spawn_blocking(move || pack(&dir))
        .await
        .map_err(|e| DockerError::Jail(format!("packing the tests: {e}")))?
        .map_err(|e| DockerError::Jail(format!("packing {}: {e}", tests.display())))
}
