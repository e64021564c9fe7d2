//! Where a registry is read from: `--registry-url` (HTTP(S), or `file://`), `--registry-path`,
//! or Harbor's public JSON registry. A registry read over the network is kept in the cache,
//! so a later run with the network gone reads the copy (and says so) instead of failing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cache::Cache;
use crate::error::RegistryError;
use crate::model::Registry;

/// Harbor's public JSON registry: the `registry.json` at the root of Harbor's repository
/// (Harbor 0.26's `RemoteRegistryInfo.url`).
pub const DEFAULT_REGISTRY_URL: &str =
    "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json";

/// A registry's location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistrySource {
    /// `--registry-url` / `registry_url`.
    Url(String),
    /// `--registry-path` / `registry_path`.
    Path(PathBuf),
}

impl Default for RegistrySource {
    fn default() -> Self {
        RegistrySource::Url(DEFAULT_REGISTRY_URL.to_owned())
    }
}

impl std::fmt::Display for RegistrySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegistrySource::Url(url) => f.write_str(url),
            RegistrySource::Path(path) => write!(f, "{}", path.display()),
        }
    }
}

impl RegistrySource {
    /// Reads and parses the registry. A URL that cannot be read falls back to the copy the
    /// cache kept from its last read, with a note through `note`.
    pub fn load(
        &self,
        cache: &Cache,
        note: &mut dyn FnMut(String),
    ) -> Result<Registry, RegistryError> {
        let origin = self.to_string();
        let text = match self {
            RegistrySource::Path(path) => read_file(path)?,
            RegistrySource::Url(url) => match url.strip_prefix("file://") {
                Some(path) => read_file(Path::new(path))?,
                None => {
                    let copy = cache.registry_copy(url);
                    match get(url) {
                        Ok(text) => {
                            // Kept only once it parses: a broken answer never replaces a good copy.
                            Registry::parse(&origin, &text)?;
                            let _ = cache.keep_registry_copy(&copy, &text);
                            text
                        }
                        Err(detail) => match std::fs::read_to_string(&copy) {
                            Ok(text) => {
                                note(format!(
                                    "cannot read the registry {url} ({detail}); using the copy cached from its last read"
                                ));
                                text
                            }
                            Err(_) => return Err(RegistryError::Unreachable { origin, detail }),
                        },
                    }
                }
            },
        };
        Registry::parse(&origin, &text)
    }
}

fn read_file(path: &Path) -> Result<String, RegistryError> {
    std::fs::read_to_string(path).map_err(|e| RegistryError::Unreachable {
        origin: path.display().to_string(),
        detail: e.to_string(),
    })
}

/// GET `url` as text (on a runtime of its own: callers resolve datasets before the command's
/// runtime starts).
fn get(url: &str) -> Result<String, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(15))
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| e.to_string())?;
        let response = client.get(url).send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("HTTP {status}"));
        }
        response.text().await.map_err(|e| e.to_string())
    })
}
