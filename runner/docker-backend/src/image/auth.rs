//! Registry credentials from the user's Docker client config, as `docker pull` finds them:
//! `$DOCKER_CONFIG/config.json` (default `~/.docker/config.json`), a credential helper named in
//! `credHelpers` (per registry) or `credsStore` (for all), else the base64 `user:password` of
//! the registry's `auths` entry. Credentials are passed to the engine for the pull only; they
//! are never logged or recorded (their `Debug` is redacted).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use bollard::auth::DockerCredentials;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;

/// A credential helper that has not answered by then is treated as failed.
const HELPER_TIMEOUT: Duration = Duration::from_secs(15);
/// What a config file or a helper's answer may hold.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Credentials for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryAuth {
    /// The user name (empty with an identity token).
    pub username: String,
    /// The password, or the identity token when `identity_token` is set.
    secret: String,
    /// The secret is an OAuth identity token, not a password.
    identity_token: bool,
}

impl std::fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryAuth")
            .field("username", &self.username)
            .field("secret", &"<redacted>")
            .finish()
    }
}

impl RegistryAuth {
    /// The engine's form, for `server` (the registry host or the default index address).
    pub fn for_engine(&self, server: &str) -> DockerCredentials {
        let mut credentials = DockerCredentials {
            serveraddress: Some(server.to_owned()),
            ..DockerCredentials::default()
        };
        if self.identity_token {
            credentials.identitytoken = Some(self.secret.clone());
        } else {
            credentials.username = Some(self.username.clone());
            credentials.password = Some(self.secret.clone());
        }
        credentials
    }
}

/// Why credentials could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The config file exists but cannot be read or parsed.
    #[error("the Docker client config {path}: {problem}; fix or move it")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A credential helper failed.
    #[error("credential helper docker-credential-{helper} for {server}: {problem}")]
    Helper {
        /// The helper's name.
        helper: String,
        /// The registry asked about.
        server: String,
        /// What went wrong (never the secret).
        problem: String,
    },
}

/// The parts of `config.json` that hold credentials.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(default)]
    creds_store: Option<String>,
    #[serde(default)]
    cred_helpers: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

/// Where the Docker client keeps its config: `$DOCKER_CONFIG/config.json`, else
/// `$HOME/.docker/config.json`.
pub fn config_path() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        return Some(Path::new(&dir).join("config.json"));
    }
    std::env::var_os("HOME").map(|home| Path::new(&home).join(".docker/config.json"))
}

impl DockerConfig {
    /// Reads the config at `path`; a missing file is an empty config.
    pub fn read(path: &Path) -> Result<DockerConfig, AuthError> {
        let bytes = match tasks::bounded::read_capped(path, MAX_CONFIG_BYTES, "Docker config") {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(DockerConfig::default());
            }
            Err(e) => {
                return Err(AuthError::Config {
                    path: path.to_owned(),
                    problem: e.to_string(),
                });
            }
        };
        serde_json::from_slice(&bytes).map_err(|e| AuthError::Config {
            path: path.to_owned(),
            problem: format!("not valid JSON ({e})"),
        })
    }

    /// The credentials for `server`: a registry host (`127.0.0.1:5000`) or the engine's
    /// default index address. A helper is asked first when one is configured; `auths` is the
    /// fallback. `None` when nothing is configured for the registry (an anonymous pull).
    pub async fn credentials(&self, server: &str) -> Result<Option<RegistryAuth>, AuthError> {
        let host = hostname(server);
        let helper = self
            .cred_helpers
            .iter()
            .find(|(key, _)| hostname(key) == host)
            .map(|(_, helper)| helper)
            .or(self.creds_store.as_ref());
        if let Some(helper) = helper
            && let Some(found) = ask_helper(helper, server).await?
        {
            return Ok(Some(found));
        }
        let entry = self.auths.get(server).or_else(|| {
            self.auths
                .iter()
                .find(|(key, _)| hostname(key) == host)
                .map(|(_, e)| e)
        });
        Ok(entry.and_then(AuthEntry::decode))
    }
}

impl AuthEntry {
    fn decode(&self) -> Option<RegistryAuth> {
        if let Some(token) = self.identitytoken.as_ref().filter(|t| !t.is_empty()) {
            return Some(RegistryAuth {
                username: self.username.clone().unwrap_or_default(),
                secret: token.clone(),
                identity_token: true,
            });
        }
        if let Some(auth) = &self.auth {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(auth.trim())
                .ok()?;
            let text = String::from_utf8(decoded).ok()?;
            let (user, password) = text.split_once(':')?;
            return Some(RegistryAuth {
                username: user.to_owned(),
                secret: password.to_owned(),
                identity_token: false,
            });
        }
        match (&self.username, &self.password) {
            (Some(user), Some(password)) => Some(RegistryAuth {
                username: user.clone(),
                secret: password.clone(),
                identity_token: false,
            }),
            _ => None,
        }
    }
}

/// `https://host:5000/v1/` → `host:5000`, as the Docker client compares config keys.
fn hostname(key: &str) -> &str {
    let rest = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    rest.split('/').next().unwrap_or(rest)
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct HelperAnswer {
    username: String,
    secret: String,
}

/// Runs `docker-credential-<helper> get` with `server` on stdin. "Not found" is `None`.
async fn ask_helper(helper: &str, server: &str) -> Result<Option<RegistryAuth>, AuthError> {
    let fail = |problem: String| AuthError::Helper {
        helper: helper.to_owned(),
        server: server.to_owned(),
        problem,
    };
    let program = format!("docker-credential-{helper}");
    let mut child = tokio::process::Command::new(&program)
        .arg("get")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(format!("cannot run {program}: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(server.as_bytes())
            .await
            .map_err(|e| fail(format!("writing its input: {e}")))?;
    }
    let output = tokio::time::timeout(HELPER_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| fail(format!("no answer within {}s", HELPER_TIMEOUT.as_secs())))?
        .map_err(|e| fail(e.to_string()))?;
    if output.stdout.len() as u64 > MAX_CONFIG_BYTES {
        return Err(fail("its answer is too large".into()));
    }
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        // The helpers' protocol answers "credentials not found in native keychain".
        if said.to_ascii_lowercase().contains("not found") {
            return Ok(None);
        }
        return Err(fail(format!("exited with {}", output.status)));
    }
    let answer: HelperAnswer = serde_json::from_slice(&output.stdout)
        .map_err(|_| fail("its answer is not the helper protocol's JSON".into()))?;
    Ok(Some(if answer.username == "<token>" {
        RegistryAuth {
            username: String::new(),
            secret: answer.secret,
            identity_token: true,
        }
    } else {
        RegistryAuth {
            username: answer.username,
            secret: answer.secret,
            identity_token: false,
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> DockerConfig {
        serde_json::from_str(json).unwrap()
    }

    #[tokio::test]
    async fn auths_entries_match_by_host_whatever_the_scheme_and_path() {
        let encoded = base64::engine::general_purpose::STANDARD.encode("alice:s3cret-pw");
        let c = config(&format!(
            r#"{{"auths": {{"http://127.0.0.1:5000/v2/": {{"auth": "{encoded}"}}}}}}"#
        ));
        let found = c.credentials("127.0.0.1:5000").await.unwrap().unwrap();
        assert_eq!(found.username, "alice");
        let engine = found.for_engine("127.0.0.1:5000");
        assert_eq!(engine.password.as_deref(), Some("s3cret-pw"));
        assert_eq!(c.credentials("127.0.0.1:5001").await.unwrap(), None);
        assert!(
            !format!("{found:?}").contains("s3cret"),
            "Debug is redacted"
        );
    }

    #[tokio::test]
    async fn identity_tokens_and_plain_fields_are_read() {
        let c = config(
            r#"{"auths": {"127.0.0.1:1": {"identitytoken": "tok"}, "127.0.0.1:2": {"username": "u", "password": "p"}}}"#,
        );
        let token = c.credentials("127.0.0.1:1").await.unwrap().unwrap();
        assert_eq!(
            token.for_engine("127.0.0.1:1").identitytoken.as_deref(),
            Some("tok")
        );
        let plain = c.credentials("127.0.0.1:2").await.unwrap().unwrap();
        assert_eq!(plain.username, "u");
    }

    #[tokio::test]
    async fn a_missing_helper_is_an_error_naming_it() {
        let c = config(r#"{"credHelpers": {"127.0.0.1:5000": "runner-test-absent"}}"#);
        let err = c
            .credentials("127.0.0.1:5000")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("docker-credential-runner-test-absent"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_config_is_empty_and_a_broken_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = DockerConfig::read(&dir.path().join("config.json")).unwrap();
        assert!(missing.auths.is_empty());
        std::fs::write(dir.path().join("config.json"), "{").unwrap();
        let err = DockerConfig::read(&dir.path().join("config.json"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("config.json") && err.contains("JSON"), "{err}");
    }
}
