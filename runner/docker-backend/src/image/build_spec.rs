//! What one image build is made of: the context directory, the Dockerfile inside it, build
//! arguments and the target stage (compose's `build:` mapping; a plain task build is the
//! `environment/` directory and its `Dockerfile`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The Dockerfile name a build uses when nothing names another.
pub const DOCKERFILE: &str = "Dockerfile";

/// One build's inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildSpec {
    /// The context directory on the host.
    pub context: PathBuf,
    /// The Dockerfile's path relative to the context, with `/` separators.
    pub dockerfile: String,
    /// Build arguments.
    pub args: BTreeMap<String, String>,
    /// The stage to build; the last one when `None`.
    pub target: Option<String>,
}

impl BuildSpec {
    /// A build of `dir` with its `Dockerfile`, no arguments, the last stage.
    pub fn context(dir: PathBuf) -> Self {
        Self {
            context: dir,
            dockerfile: DOCKERFILE.to_owned(),
            args: BTreeMap::new(),
            target: None,
        }
    }

    /// True when only the context is given (the Dockerfile is `Dockerfile`, no arguments,
    /// no target).
    pub fn is_plain(&self) -> bool {
        self.dockerfile == DOCKERFILE && self.args.is_empty() && self.target.is_none()
    }

    /// The tag's content part: the context tar's hash, and for a build that is not plain,
    /// the Dockerfile's name, the arguments and the target too, so two builds of one context
    /// never share a tag. A plain build's digest is the context's alone, as it always was, so
    /// images built before are reused.
    pub fn digest(&self, context_tar: &[u8]) -> String {
        let mut hasher = Sha256::new();
        hasher.update(context_tar);
        if !self.is_plain() {
            hasher.update(b"\0dockerfile=");
            hasher.update(self.dockerfile.as_bytes());
            for (key, value) in &self.args {
                // The key's length first: `A=B` `=C` and `A` `B=C` must differ.
                hasher.update(format!("\0arg={}:{key}={value}", key.len()).as_bytes());
            }
            if let Some(target) = &self.target {
                hasher.update(b"\0target=");
                hasher.update(target.as_bytes());
            }
        }
        hex::encode(hasher.finalize())[..16].to_owned()
    }

    /// `context <dir>, dockerfile <name>[, args …][, target …]`, the context relative to
    /// `env_dir` when it is inside it.
    pub fn describe(&self, env_dir: &Path) -> String {
        let env_dir = env_dir
            .canonicalize()
            .unwrap_or_else(|_| env_dir.to_owned());
        let context = match self.context.strip_prefix(&env_dir) {
            Ok(rel) if rel.as_os_str().is_empty() => "environment/".to_owned(),
            Ok(rel) => format!("environment/{}", rel.display()),
            Err(_) => self.context.display().to_string(),
        };
        let mut out = format!("context {context}, dockerfile {}", self.dockerfile);
        if !self.args.is_empty() {
            let keys: Vec<&str> = self.args.keys().map(String::as_str).collect();
            out.push_str(&format!(", args {}", keys.join(" ")));
        }
        if let Some(target) = &self.target {
            out.push_str(&format!(", target {target}"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_builds_digest_is_the_contexts_and_others_differ_by_each_part() {
        let plain = BuildSpec::context("/ctx".into());
        let tar = b"tar bytes";
        assert_eq!(
            plain.digest(tar),
            hex::encode(Sha256::digest(tar))[..16].to_owned()
        );
        let named = BuildSpec {
            dockerfile: "Dockerfile.main".into(),
            ..plain.clone()
        };
        let with_arg = BuildSpec {
            args: BTreeMap::from([("A".into(), "1".into())]),
            ..plain.clone()
        };
        let other_arg = BuildSpec {
            args: BTreeMap::from([("A".into(), "2".into())]),
            ..plain.clone()
        };
        let staged = BuildSpec {
            target: Some("main".into()),
            ..plain.clone()
        };
        let digests: std::collections::BTreeSet<String> =
            [&plain, &named, &with_arg, &other_arg, &staged]
                .iter()
                .map(|s| s.digest(tar))
                .collect();
        assert_eq!(digests.len(), 5, "{digests:?}");
    }
}
