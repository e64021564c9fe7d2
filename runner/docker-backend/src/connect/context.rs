//! The Docker CLI's contexts (`docker context create`), read from its store for
//! `--docker-context NAME`: the context's metadata is
//! `$DOCKER_CONFIG/contexts/meta/<sha256 of NAME>/meta.json` (`~/.docker` without
//! `DOCKER_CONFIG`), its engine's TLS files `…/contexts/tls/<sha256 of NAME>/docker/`
//! (`ca.pem`, `cert.pem`, `key.pem`). Each context carries its own certificates, so this is
//! how a pool mixes TLS engines of different CAs.

use std::path::{Path, PathBuf};

use secrets::redact_url_credentials as redact;
use sha2::{Digest, Sha256};

use crate::connect::remote::TlsFiles;
use crate::connect::{EngineUrl, EngineUrlError};

/// The Docker CLI's configuration directory: `DOCKER_CONFIG`, else `~/.docker`.
pub fn docker_config_dir() -> Option<PathBuf> {
    std::env::var_os("DOCKER_CONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker")))
}

/// A `--docker-context` whose engine this runner cannot use.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// `default` names `DOCKER_HOST`, which is given with `--docker-host`.
    #[error(
        "the default context is the engine of DOCKER_HOST (or the default socket), not a stored one: give it with --docker-host"
    )]
    Default,
    /// The store has no context of this name (its metadata file cannot be read).
    #[error(
        "no Docker context {name} in {} ({}: {source}); `docker context ls` lists them",
        config_dir.display(),
        meta_path.display()
    )]
    Unknown {
        /// The context's name.
        name: String,
        /// The Docker CLI's configuration directory.
        config_dir: PathBuf,
        /// The metadata file looked for.
        meta_path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// The metadata file is not JSON.
    #[error("{} is not a context's metadata: {source}", meta_path.display())]
    BadMetadata {
        /// The metadata file.
        meta_path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The metadata has no `Endpoints.docker.Host`.
    #[error(
        "context {name} names no Docker engine ({} has no Endpoints.docker.Host)",
        meta_path.display()
    )]
    NoEngine {
        /// The context's name.
        name: String,
        /// The metadata file.
        meta_path: PathBuf,
    },
    /// The context skips verifying the engine's certificate.
    #[error(
        "context {name} ({host}) skips verifying the engine's certificate, which this runner does not do; create it with the engine's CA (docker context create … --docker host=…,ca=…,cert=…,key=…)"
    )]
    SkipsTlsVerify {
        /// The context's name.
        name: String,
        /// Its engine.
        host: String,
    },
    /// The context's engine URL cannot be used.
    #[error("context {name}: {source}")]
    Engine {
        /// The context's name.
        name: String,
        /// What is wrong with its engine URL.
        #[source]
        source: EngineUrlError,
    },
    /// The context holds TLS files for an engine that is not `tcp://`.
    #[error(
        "context {name}: its engine {host} is not a tcp:// engine, yet the context holds TLS files"
    )]
    TlsForNonTcp {
        /// The context's name.
        name: String,
        /// Its engine.
        host: String,
    },
}

/// The engine of context `text` (`NAME`, optionally `#n=N` as for `--docker-host`) in the
/// store under `config_dir`. Refused, saying why: an unknown context, the built-in `default`
/// (which is `DOCKER_HOST`, not a stored context), and one that skips TLS verification.
pub fn context_engine(config_dir: &Path, text: &str) -> Result<EngineUrl, ContextError> {
    let (name, cap) = match text.split_once('#') {
        Some((name, cap)) => (name, Some(cap)),
        None => (text, None),
    };
    if name == "default" {
        return Err(ContextError::Default);
    }
    let id = hex::encode(Sha256::digest(name.as_bytes()));
    let meta_path = config_dir.join("contexts/meta").join(&id).join("meta.json");
    let meta = std::fs::read_to_string(&meta_path).map_err(|source| ContextError::Unknown {
        name: name.to_owned(),
        config_dir: config_dir.to_owned(),
        meta_path: meta_path.clone(),
        source,
    })?;
    let meta: serde_json::Value =
        serde_json::from_str(&meta).map_err(|source| ContextError::BadMetadata {
            meta_path: meta_path.clone(),
            source,
        })?;
    let endpoint = &meta["Endpoints"]["docker"];
    let host = endpoint["Host"]
        .as_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| ContextError::NoEngine {
            name: name.to_owned(),
            meta_path: meta_path.clone(),
        })?;
    if endpoint["SkipTLSVerify"].as_bool() == Some(true) {
        return Err(ContextError::SkipsTlsVerify {
            name: name.to_owned(),
            host: redact(host),
        });
    }
    let tls_dir = config_dir.join("contexts/tls").join(&id).join("docker");
    let tls = tls_dir.join("ca.pem").exists().then_some(tls_dir);
    let with_cap = match cap {
        Some(cap) => format!("{host}#{cap}"),
        None => host.to_owned(),
    };
    let mut engine = EngineUrl::parse_with(&with_cap, tls.as_deref()).map_err(|source| {
        ContextError::Engine {
            name: name.to_owned(),
            source,
        }
    })?;
    if engine.tls.is_none() && tls.is_some() {
        return Err(ContextError::TlsForNonTcp {
            name: name.to_owned(),
            host: redact(host),
        });
    }
    engine.context = Some(name.to_owned());
    // Of a context's TLS files only the CA may be given (the engine's certificate checked,
    // no client certificate): `TlsFiles::in_dir` keeps what is there.
    engine.tls = tls.as_deref().map(TlsFiles::in_dir);
    Ok(engine)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// `docker context create` in `config` (the real Docker CLI, as users make contexts).
    fn create(config: &Path, name: &str, docker: &str) {
        let out = Command::new("docker")
            .env("DOCKER_CONFIG", config)
            .args(["context", "create", name, "--docker", docker])
            .output()
            .expect("the docker CLI runs (it is installed where these tests run)");
        assert!(
            out.status.success(),
            "docker context create {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn contexts_written_by_the_docker_cli_give_their_engine_and_tls_files() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("docker-config");
        let certs = dir.path().join("certs");
        let made = Command::new("bash")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../scripts/docker-engines.sh"
            ))
            .arg("certs")
            .arg(&certs)
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        let file = |f: &str| certs.join(f).display().to_string();
        create(
            &config,
            "remote-tls",
            &format!(
                "host=tcp://127.0.0.1:23763,ca={},cert={},key={}",
                file("ca.pem"),
                file("cert.pem"),
                file("key.pem")
            ),
        );
        create(&config, "over-ssh", "host=ssh://me@127.0.0.1:2222");
        create(&config, "plain", "host=tcp://127.0.0.1:2375");
        create(
            &config,
            "unverified",
            "host=tcp://127.0.0.1:2376,skip-tls-verify=true",
        );

        let tls = context_engine(&config, "remote-tls#n=3").unwrap();
        assert_eq!(tls.url, "tcp://127.0.0.1:23763");
        assert_eq!(tls.max_trials, Some(3));
        assert_eq!(tls.context.as_deref(), Some("remote-tls"));
        let files = tls.tls.expect("the context's TLS files");
        // The CLI copied the files into its store: the reader points there, and they are the
        // ones given.
        assert!(files.ca.starts_with(&config), "{files:?}");
        assert_eq!(
            std::fs::read(&files.ca).unwrap(),
            std::fs::read(certs.join("ca.pem")).unwrap()
        );
        let (cert, key) = files.client.expect("client certificate and key");
        assert_eq!(
            std::fs::read(cert).unwrap(),
            std::fs::read(certs.join("cert.pem")).unwrap()
        );
        assert!(key.ends_with("key.pem"));

        let ssh = context_engine(&config, "over-ssh").unwrap();
        assert_eq!(
            (ssh.url.as_str(), &ssh.tls),
            ("ssh://me@127.0.0.1:2222", &None)
        );
        assert_eq!(ssh.name(), "ssh://127.0.0.1:2222");
        let plain = context_engine(&config, "plain").unwrap();
        assert_eq!(
            (plain.url.as_str(), plain.tls),
            ("tcp://127.0.0.1:2375", None)
        );

        let unverified = context_engine(&config, "unverified")
            .unwrap_err()
            .to_string();
        assert!(
            unverified.contains("unverified") && unverified.contains("skips"),
            "{unverified}"
        );
        // Issue 39: a context whose engine URL holds a password is refused without it.
        create(
            &config,
            "leaky",
            "host=tcp://user:Ctx1Secret@127.0.0.1:2375",
        );
        let leaky = context_engine(&config, "leaky").unwrap_err().to_string();
        assert!(!leaky.contains("Ctx1Secret"), "{leaky}");
        assert!(leaky.contains("tcp://***@127.0.0.1:2375"), "{leaky}");
        create(
            &config,
            "leaky-unverified",
            "host=tcp://user:Ctx2Secret@127.0.0.1:2376,skip-tls-verify=true",
        );
        let leaky = context_engine(&config, "leaky-unverified")
            .unwrap_err()
            .to_string();
        assert!(!leaky.contains("Ctx2Secret"), "{leaky}");
        let missing = context_engine(&config, "nope").unwrap_err().to_string();
        assert!(missing.contains("no Docker context nope"), "{missing}");
        let default = context_engine(&config, "default").unwrap_err().to_string();
        assert!(default.contains("--docker-host"), "{default}");
    }
}
