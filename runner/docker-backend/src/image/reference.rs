//! Image references (`[registry/]repository[:tag][@digest]`), parsed as Docker parses them, so
//! a pull asks the engine for the right name and tag and credentials are looked up for the
//! right registry.

use std::fmt;

/// A parsed `docker_image` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// The registry host (`127.0.0.1:5000`), or `None` for the engine's default registry.
    pub registry: Option<String>,
    /// The repository path within the registry (`org/name`).
    pub repository: String,
    /// The tag, if one was written.
    pub tag: Option<String>,
    /// The digest (`sha256:…`), if one was written.
    pub digest: Option<String>,
}

/// Why a `docker_image` value is not an image reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reference:?} is not an image reference: {problem}")]
pub struct BadReference {
    /// The value as written.
    pub reference: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

impl ImageRef {
    /// Parses `text` by Docker's rules: the first `/`-separated component names a registry
    /// when it holds a `.` or a `:` or is `localhost`; a tag follows the last `:` after the
    /// last `/`; a digest follows `@`.
    pub fn parse(text: &str) -> Result<ImageRef, BadReference> {
        let bad = |problem| BadReference {
            reference: text.to_owned(),
            problem,
        };
        if text.is_empty() {
            return Err(bad("it is empty"));
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("it holds whitespace"));
        }
        let (name, digest) = match text.split_once('@') {
            Some((name, digest)) => {
                let valid = digest
                    .split_once(':')
                    .is_some_and(|(algo, hex)| !algo.is_empty() && !hex.is_empty());
                if !valid {
                    return Err(bad("the digest after '@' is not algorithm:hex"));
                }
                (name, Some(digest.to_owned()))
            }
            None => (text, None),
        };
        let (registry, path) = match name.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (Some(first.to_owned()), rest)
            }
            _ => (None, name),
        };
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag.to_owned())),
            _ => (path, None),
        };
        if repository.is_empty() || repository.split('/').any(str::is_empty) {
            return Err(bad("the repository name is empty"));
        }
        if repository
            .chars()
            .any(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "._-/".contains(c)))
        {
            return Err(bad(
                "repository names hold only lowercase letters, digits, '.', '_', '-' and '/'",
            ));
        }
        if tag.as_deref() == Some("") {
            return Err(bad("the tag after ':' is empty"));
        }
        Ok(ImageRef {
            registry,
            repository: repository.to_owned(),
            tag,
            digest,
        })
    }

    /// The name without tag or digest, as the engine's pull takes it (`fromImage`).
    pub fn name(&self) -> String {
        match &self.registry {
            Some(registry) => format!("{registry}/{}", self.repository),
            None => self.repository.clone(),
        }
    }

    /// The `tag` parameter of the engine's pull: the digest, else the tag, else `latest`
    /// (what `docker pull` sends).
    pub fn pull_tag(&self) -> String {
        self.digest
            .clone()
            .or_else(|| self.tag.clone())
            .unwrap_or_else(|| "latest".into())
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(text: &str) -> (Option<String>, String, Option<String>, Option<String>) {
        let r = ImageRef::parse(text).unwrap();
        assert_eq!(r.to_string(), text, "round trip");
        (r.registry, r.repository, r.tag, r.digest)
    }

    #[test]
    fn registry_repository_tag_and_digest_are_told_apart() {
        let s = |x: &str| Some(x.to_owned());
        assert_eq!(
            parts("org/chess-best-move:20251031"),
            (None, "org/chess-best-move".into(), s("20251031"), None)
        );
        assert_eq!(parts("ubuntu"), (None, "ubuntu".into(), None, None));
        assert_eq!(
            parts("127.0.0.1:5000/runner/base:1"),
            (s("127.0.0.1:5000"), "runner/base".into(), s("1"), None)
        );
        assert_eq!(
            parts("localhost/x"),
            (s("localhost"), "x".into(), None, None)
        );
        assert_eq!(
            parts("127.0.0.1:5000/x:1@sha256:ab"),
            (s("127.0.0.1:5000"), "x".into(), s("1"), s("sha256:ab"))
        );
    }

    #[test]
    fn pull_arguments_are_what_docker_pull_sends() {
        let r = ImageRef::parse("127.0.0.1:5000/x").unwrap();
        assert_eq!(
            (r.name(), r.pull_tag()),
            ("127.0.0.1:5000/x".into(), "latest".into())
        );
        let r = ImageRef::parse("x@sha256:ab").unwrap();
        assert_eq!(r.pull_tag(), "sha256:ab");
    }

    #[test]
    fn malformed_references_say_what_is_wrong() {
        for (text, problem) in [
            ("", "empty"),
            ("a b", "whitespace"),
            ("Org/X", "lowercase"),
            ("x:", "tag"),
            ("x@sha256", "digest"),
            ("127.0.0.1:5000/", "empty"),
        ] {
            let err = ImageRef::parse(text).unwrap_err().to_string();
            assert!(err.contains(problem), "{text:?}: {err}");
        }
    }
}
