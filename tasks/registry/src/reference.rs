//! `-d NAME[@VERSION]` (and a job config's `name`/`version`): which dataset of a registry, and
//! the choice of version when none is given (Harbor's rule, [`crate::version`]).

use crate::error::RegistryError;
use crate::model::{DatasetSpec, Registry};
use crate::version::resolve_version;

/// A dataset asked for by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetName {
    /// The name.
    pub name: String,
    /// The version, if given.
    pub version: Option<String>,
}

impl DatasetName {
    /// Parses `NAME[@VERSION]`. `org/name` is Harbor Hub's form, refused by name with the fix.
    pub fn parse(text: &str) -> Result<DatasetName, RegistryError> {
        let (name, version) = match text.split_once('@') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (text.trim(), None),
        };
        if name.contains('/') {
            return Err(RegistryError::HubDataset {
                name: text.to_owned(),
            });
        }
        if name.is_empty() || version == Some("") || name.chars().any(char::is_whitespace) {
            return Err(RegistryError::BadName(text.to_owned()));
        }
        Ok(DatasetName {
            name: name.to_owned(),
            version: version.map(str::to_owned),
        })
    }

    /// The dataset version of `registry` this names.
    pub fn pick<'r>(&self, registry: &'r Registry) -> Result<&'r DatasetSpec, RegistryError> {
        let versions = registry.versions(&self.name);
        if versions.is_empty() {
            let names = registry.names();
            return Err(RegistryError::UnknownDataset {
                name: self.name.clone(),
                origin: registry.origin.clone(),
                available: if names.is_empty() {
                    "no dataset".into()
                } else {
                    names.join(", ")
                },
            });
        }
        let version = match &self.version {
            Some(v) => v.as_str(),
            None => resolve_version(&versions).unwrap_or_default(),
        };
        registry
            .datasets
            .iter()
            .find(|d| d.name == self.name && d.version == version)
            .ok_or_else(|| RegistryError::UnknownVersion {
                name: self.name.clone(),
                version: version.to_owned(),
                origin: registry.origin.clone(),
                available: versions.join(", "),
            })
    }
}

impl std::fmt::Display for DatasetName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.version {
            Some(v) => write!(f, "{}@{v}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        let row =
            |v: &str| format!(r#"{{"name":"tb","version":"{v}","description":"","tasks":[]}}"#);
        Registry::parse("r.json", &format!("[{},{}]", row("1.0"), row("2.0"))).unwrap()
    }

    #[test]
    fn a_name_with_and_without_a_version() {
        let d = DatasetName::parse("tb@2.0").unwrap();
        assert_eq!((d.name.as_str(), d.version.as_deref()), ("tb", Some("2.0")));
        assert_eq!(
            DatasetName::parse("tb")
                .unwrap()
                .pick(&registry())
                .unwrap()
                .version,
            "2.0"
        );
        assert!(matches!(
            DatasetName::parse("tb@"),
            Err(RegistryError::BadName(_))
        ));
    }

    #[test]
    fn a_hub_name_is_refused_with_the_fix() {
        let err = DatasetName::parse("laude/terminal-bench@2.0")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Harbor Hub") && err.contains("--registry-url"),
            "{err}"
        );
    }

    #[test]
    fn unknown_names_and_versions_say_what_the_registry_has() {
        let err = DatasetName::parse("tbx")
            .unwrap()
            .pick(&registry())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"tbx\"") && err.contains("it has: tb"),
            "{err}"
        );
        let err = DatasetName::parse("tb@3.0")
            .unwrap()
            .pick(&registry())
            .unwrap_err()
            .to_string();
        assert!(err.contains("3.0") && err.contains("1.0, 2.0"), "{err}");
    }
}
