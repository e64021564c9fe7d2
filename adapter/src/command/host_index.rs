//! `[install] host_package_index`: this machine's way to the Python package index, handed to
//! install commands in the container. Machines that reach the index through a TLS-intercepting
//! proxy need the host's CA bundle inside the container, and machines with a private index
//! name it in pip's configuration; both are read here, never written into a config.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Where the host's CA bundle goes in the container.
pub const CONTAINER_CA_BUNDLE: &str = "/usr/local/share/runner/host-ca-bundle.crt";

/// The largest CA bundle uploaded (a system bundle is about 200 KB).
const MAX_CA_BUNDLE_BYTES: u64 = 8 << 20;

/// pip's settings passed on: `pip config list` key → environment variable.
const PIP_KEYS: &[(&str, &str)] = &[
    ("index-url", "PIP_INDEX_URL"),
    ("extra-index-url", "PIP_EXTRA_INDEX_URL"),
    ("trusted-host", "PIP_TRUSTED_HOST"),
    ("default-timeout", "PIP_DEFAULT_TIMEOUT"),
    ("timeout", "PIP_DEFAULT_TIMEOUT"),
    ("retries", "PIP_RETRIES"),
];

/// What install commands get: the CA bundle's bytes and the env that points tools at it and
/// at the index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPackageIndex {
    /// The host's CA bundle, uploaded to [`CONTAINER_CA_BUNDLE`].
    pub ca_bundle: Option<Vec<u8>>,
    /// `PIP_*`, `SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE` for install commands.
    pub env: BTreeMap<String, String>,
}

/// Why this machine's package index settings cannot be passed to install commands.
#[derive(Debug, thiserror::Error)]
pub enum HostIndexError {
    /// The CA bundle exists but cannot be read (or is too large).
    #[error("reading {}: {source}", path.display())]
    ReadCaBundle {
        /// The bundle's path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A pip setting holds `user:password@` in a URL (the value is never shown).
    #[error(
        "the host's pip setting {0} holds credentials (user:password@ in a URL); they would reach every container, so host_package_index refuses it: use an index URL without credentials"
    )]
    Credentials(String),
}

impl HostPackageIndex {
    /// Reads this machine's CA bundle (`SSL_CERT_FILE`, else the system bundle) and pip
    /// settings (`pip config list`, then `PIP_*` variables, which win as they do for pip).
    /// A setting holding credentials (a URL with `user:password@`) is refused by name: it
    /// would put them in every container.
    pub fn detect() -> Result<Self, HostIndexError> {
        let listed = std::process::Command::new("python3")
            .args(["-m", "pip", "config", "list"])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let env: BTreeMap<String, String> = std::env::vars().collect();
        let bundle_path = env
            .get("SSL_CERT_FILE")
            .map(PathBuf::from)
            .filter(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("/etc/ssl/certs/ca-certificates.crt"));
        let ca_bundle =
            match tasks::bounded::read_capped(&bundle_path, MAX_CA_BUNDLE_BYTES, "CA bundle") {
                Ok(bytes) => Some(bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(source) => {
                    return Err(HostIndexError::ReadCaBundle {
                        path: bundle_path,
                        source,
                    });
                }
            };
        Self::from_parts(&listed, &env, ca_bundle)
    }

    /// [`Self::detect`] from its inputs: `pip config list` output, the environment, the bundle.
    pub fn from_parts(
        pip_config_list: &str,
        env: &BTreeMap<String, String>,
        ca_bundle: Option<Vec<u8>>,
    ) -> Result<Self, HostIndexError> {
        let mut out = BTreeMap::new();
        for line in pip_config_list.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let name = key.rsplit('.').next().unwrap_or(key);
            let value = value.trim().trim_matches(['\'', '"']);
            if let Some((_, var)) = PIP_KEYS.iter().find(|(k, _)| *k == name) {
                out.insert((*var).to_owned(), value.to_owned());
            }
        }
        for (_, var) in PIP_KEYS {
            if let Some(value) = env.get(*var) {
                out.insert((*var).to_owned(), value.clone());
            }
        }
        if let Some((var, _)) = out.iter().find(|(_, v)| has_userinfo(v)) {
            return Err(HostIndexError::Credentials(var.clone()));
        }
        // uv reads its own names for the same settings.
        for (pip, uv) in [
            ("PIP_INDEX_URL", "UV_INDEX_URL"),
            ("PIP_EXTRA_INDEX_URL", "UV_EXTRA_INDEX_URL"),
            ("PIP_TRUSTED_HOST", "UV_INSECURE_HOST"),
        ] {
            if let Some(value) = out.get(pip).cloned() {
                out.insert(uv.to_owned(), value);
            }
        }
        if ca_bundle.is_some() {
            for var in [
                "PIP_CERT",
                "SSL_CERT_FILE",
                "REQUESTS_CA_BUNDLE",
                "CURL_CA_BUNDLE",
            ] {
                out.insert(var.to_owned(), CONTAINER_CA_BUNDLE.to_owned());
            }
        }
        out.insert("PIP_DISABLE_PIP_VERSION_CHECK".into(), "1".into());
        Ok(Self {
            ca_bundle,
            env: out,
        })
    }
}

/// True when some whitespace-separated URL in `value` has `user@` or `user:password@`.
fn has_userinfo(value: &str) -> bool {
    value.split_whitespace().any(|url| {
        url.split_once("://").is_some_and(|(_, rest)| {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            authority.contains('@')
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_settings_come_from_config_then_env_and_point_at_the_uploaded_bundle() {
        let listed = "global.cert='/etc/ssl/certs/ca-certificates.crt'\n\
                      global.index-url='https://mirror.example/simple'\n\
                      :env:.find-links='/opt/wheels'\n\
                      install.trusted-host='mirror.example'\n";
        let env = BTreeMap::from([("PIP_DEFAULT_TIMEOUT".to_owned(), "180".to_owned())]);
        let index = HostPackageIndex::from_parts(listed, &env, Some(b"CERT".to_vec())).unwrap();
        assert_eq!(index.env["PIP_INDEX_URL"], "https://mirror.example/simple");
        assert_eq!(index.env["PIP_TRUSTED_HOST"], "mirror.example");
        assert_eq!(index.env["UV_INDEX_URL"], "https://mirror.example/simple");
        assert_eq!(index.env["PIP_DEFAULT_TIMEOUT"], "180");
        assert_eq!(index.env["PIP_CERT"], CONTAINER_CA_BUNDLE);
        assert_eq!(index.env["SSL_CERT_FILE"], CONTAINER_CA_BUNDLE);
        // Host paths (find-links, the host's cert path) mean nothing in a container.
        assert!(!index.env.contains_key("PIP_FIND_LINKS"));
        assert!(
            index
                .env
                .values()
                .all(|v| v != "/etc/ssl/certs/ca-certificates.crt")
        );
        let bare = HostPackageIndex::from_parts("", &BTreeMap::new(), None).unwrap();
        assert!(!bare.env.contains_key("PIP_CERT"));
    }

    #[test]
    fn settings_with_credentials_are_refused_by_name() {
        let env = BTreeMap::from([(
            "PIP_EXTRA_INDEX_URL".to_owned(),
            "https://a.example/simple https://bob:hunter2@b.example/simple".to_owned(),
        )]);
        let err = HostPackageIndex::from_parts("", &env, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("PIP_EXTRA_INDEX_URL"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        assert!(!has_userinfo("https://a.example/simple?x=a@b"));
    }
}
