//! `environment/docker-compose.yaml`: parsed with saphyr (YAML 1.2) into JSON values, `${VAR}`
//! interpolated in every string value, then read into typed services. Only what runner can
//! run faithfully is accepted; any other key is refused by name, never ignored.
//!
//! Harbor runs `docker compose -f <build|prebuilt> -f <task file>`: the build or prebuilt
//! file defines only `main` (its build or image and `sh -c "sleep infinity"`), and the task
//! file may override any of it. Main's `build` and `image` decide its image, which is
//! prepared before the trial (`main_image.rs`); its `command`, `entrypoint`, `user` and
//! `working_dir` go to the main container; it may add `depends_on`, `environment`,
//! `volumes` and `healthcheck`.

use std::collections::{BTreeMap, BTreeSet};

use saphyr::{LoadableYamlNode, Scalar, Yaml};
use serde::Deserialize;
use serde_json::Value;

use super::service::{Build, ServiceDef};

/// Harbor's name for the agent's service.
pub const MAIN_SERVICE: &str = "main";

/// A compose file, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ComposeFile {
    /// Services by name, `main` included when the file mentions it.
    pub services: BTreeMap<String, ServiceDef>,
    /// Top-level named volumes (created per trial).
    pub volumes: BTreeSet<String>,
}

/// Why a compose file cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment/docker-compose.yaml: {0}")]
pub struct ComposeError(pub String);

impl ComposeError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// Top-level keys runner reads; `version` and `name` are accepted and ignored, as compose
/// itself ignores `version`. `x-*` extension fields are ignored.
const TOP_LEVEL: &[&str] = &["services", "volumes", "version", "name"];

/// The file's top-level mapping.
fn load(text: &str) -> Result<serde_json::Map<String, Value>, ComposeError> {
    // Before a tree is built: building, converting and dropping one recurse per level.
    tasks::nesting::check_yaml(text).map_err(|e| ComposeError::new(e.to_string()))?;
    let docs = Yaml::load_from_str(text).map_err(|e| ComposeError::new(e.to_string()))?;
    let root = match docs.first() {
        Some(doc) => to_json(doc)?,
        None => Value::Null,
    };
    let Value::Object(root) = root else {
        return Err(ComposeError::new(
            "the file must be a mapping with `services`",
        ));
    };
    Ok(root)
}

/// `services.main.build` and `services.main.image` alone, interpolated with `vars`: what
/// main's image needs before a trial exists (the rest of the file is read at its start).
pub fn main_image_keys(
    text: &str,
    vars: &BTreeMap<String, String>,
) -> Result<(Option<Build>, Option<String>), ComposeError> {
    let mut root = load(text)?;
    let Some(Value::Object(mut main)) = root
        .remove("services")
        .and_then(|mut s| s.get_mut(MAIN_SERVICE).map(Value::take))
    else {
        return Ok((None, None));
    };
    let mut read = |key: &str| -> Result<Option<Value>, ComposeError> {
        let Some(mut value) = main.remove(key) else {
            return Ok(None);
        };
        interpolate(&mut value, vars)
            .map_err(|e| ComposeError::new(format!("services.main.{key}: {}", e.0)))?;
        Ok(Some(value))
    };
    let build = read("build")?
        .map(|v| {
            Build::deserialize(v).map_err(|e| ComposeError::new(format!("services.main: {e}")))
        })
        .transpose()?;
    let image = match read("image")? {
        None | Some(Value::Null) => None,
        Some(Value::String(image)) => Some(image),
        Some(other) => {
            return Err(ComposeError::new(format!(
                "services.main.image: expected a string, found {other}"
            )));
        }
    };
    Ok((build, image))
}

/// Parses `text` with `vars` for interpolation.
pub fn parse(text: &str, vars: &BTreeMap<String, String>) -> Result<ComposeFile, ComposeError> {
    let mut root = load(text)?;
    for key in root.keys() {
        if !TOP_LEVEL.contains(&key.as_str()) && !key.starts_with("x-") {
            return Err(ComposeError::new(format!(
                "top-level key `{key}` is not supported by runner (supported: services, volumes)"
            )));
        }
    }
    let mut services = BTreeMap::new();
    if let Some(Value::Object(defs)) = root.remove("services") {
        for (name, mut def) in defs {
            interpolate(&mut def, vars)?;
            let service = ServiceDef::deserialize(def.clone())
                .map_err(|e| ComposeError::new(format!("services.{name}: {e}")))?;
            service.check(&name)?;
            services.insert(name, service);
        }
    }
    let volumes = match root.remove("volumes") {
        Some(Value::Object(map)) => map.into_iter().map(|(k, _)| k).collect(),
        Some(Value::Null) | None => BTreeSet::new(),
        Some(_) => return Err(ComposeError::new("`volumes` must be a mapping of names")),
    };
    let file = ComposeFile { services, volumes };
    file.check()?;
    Ok(file)
}

impl ComposeFile {
    /// The services other than `main`.
    pub fn sidecars(&self) -> impl Iterator<Item = (&String, &ServiceDef)> {
        self.services.iter().filter(|(n, _)| *n != MAIN_SERVICE)
    }

    /// The sidecars in an order where each comes after what it depends on.
    pub fn start_order(&self) -> Result<Vec<String>, ComposeError> {
        let mut order = Vec::new();
        let mut state: BTreeMap<&str, bool> = BTreeMap::new();
        for (name, _) in self.sidecars() {
            self.visit(name, &mut state, &mut order, 0)?;
        }
        Ok(order)
    }

    fn visit<'a>(
        &'a self,
        name: &'a str,
        state: &mut BTreeMap<&'a str, bool>,
        order: &mut Vec<String>,
        depth: usize,
    ) -> Result<(), ComposeError> {
        match state.get(name) {
            Some(true) => return Ok(()),
            Some(false) => {
                return Err(ComposeError::new(format!(
                    "services.{name}: depends_on forms a cycle"
                )));
            }
            None => {}
        }
        if depth > self.services.len() {
            return Err(ComposeError::new("depends_on is too deep"));
        }
        state.insert(name, false);
        for (dependency, _) in self.services[name].dependencies() {
            self.visit(dependency, state, order, depth + 1)?;
        }
        state.insert(name, true);
        order.push(name.to_owned());
        Ok(())
    }

    /// References between services and volumes resolve and `depends_on` has no cycle.
    fn check(&self) -> Result<(), ComposeError> {
        for (name, service) in &self.services {
            for (dependency, _) in service.dependencies() {
                if dependency == MAIN_SERVICE {
                    return Err(ComposeError::new(format!(
                        "services.{name}: depends_on main is not supported (main starts last)"
                    )));
                }
                if !self.services.contains_key(dependency) {
                    return Err(ComposeError::new(format!(
                        "services.{name}: depends_on names {dependency:?}, which is not a service of the file"
                    )));
                }
            }
            for volume in service.named_volumes()? {
                if !self.volumes.contains(&volume.name) {
                    return Err(ComposeError::new(format!(
                        "services.{name}: volume {:?} is not declared under the top-level `volumes`",
                        volume.name
                    )));
                }
            }
        }
        self.start_order().map(|_| ())
    }
}

/// Replaces `${VAR}`, `${VAR:-default}`, `${VAR-default}` and `$VAR` in every string of
/// `value`; `$$` is a literal `$`. An unset variable without a default is an error naming it
/// (compose would substitute an empty string with a warning nobody reads).
fn interpolate(value: &mut Value, vars: &BTreeMap<String, String>) -> Result<(), ComposeError> {
    match value {
        Value::String(text) => *text = interpolate_str(text, vars)?,
        Value::Array(items) => {
            for item in items {
                interpolate(item, vars)?;
            }
        }
        Value::Object(map) => {
            for item in map.values_mut() {
                interpolate(item, vars)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// One string's interpolation (see [`interpolate`]).
pub fn interpolate_str(
    text: &str,
    vars: &BTreeMap<String, String>,
) -> Result<String, ComposeError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        if let Some(after) = rest.strip_prefix('$') {
            out.push('$');
            rest = after;
        } else if let Some(after) = rest.strip_prefix('{') {
            let end = after
                .find('}')
                .ok_or_else(|| ComposeError::new(format!("unclosed ${{ in {text:?}")))?;
            let expr = &after[..end];
            rest = &after[end + 1..];
            let (name, default) = match expr.find([':', '-']) {
                Some(i) if expr[i..].starts_with(":-") => {
                    (&expr[..i], Some((&expr[i + 2..], true)))
                }
                Some(i) if expr[i..].starts_with('-') => {
                    (&expr[..i], Some((&expr[i + 1..], false)))
                }
                Some(_) => {
                    return Err(ComposeError::new(format!(
                        "${{{expr}}}: only ${{VAR}}, ${{VAR:-default}} and ${{VAR-default}} are supported"
                    )));
                }
                None => (expr, None),
            };
            out.push_str(&lookup(name, default, vars)?);
        } else {
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if len == 0 {
                out.push('$');
                continue;
            }
            out.push_str(&lookup(&rest[..len], None, vars)?);
            rest = &rest[len..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn lookup(
    name: &str,
    default: Option<(&str, bool)>,
    vars: &BTreeMap<String, String>,
) -> Result<String, ComposeError> {
    match (vars.get(name), default) {
        (Some(v), Some((d, true))) if v.is_empty() => Ok(d.to_owned()),
        (Some(v), _) => Ok(v.clone()),
        (None, Some((d, _))) => Ok(d.to_owned()),
        (None, None) => Err(ComposeError::new(format!(
            "variable {name} is not set (runner provides CONTEXT_DIR, MAIN_IMAGE_NAME, PREBUILT_IMAGE_NAME, CPUS, MEMORY and the task's [environment].env)"
        ))),
    }
}

/// A saphyr node as JSON; keys must be scalars.
fn to_json(node: &Yaml<'_>) -> Result<Value, ComposeError> {
    Ok(match node {
        Yaml::Value(scalar) => scalar_json(scalar),
        Yaml::Representation(text, _, _) => Value::String(text.to_string()),
        Yaml::Sequence(items) => Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Yaml::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (key, value) in map {
                let key = match to_json(key)? {
                    Value::String(s) => s,
                    Value::Null => "null".into(),
                    other => other.to_string(),
                };
                out.insert(key, to_json(value)?);
            }
            Value::Object(out)
        }
        Yaml::Tagged(_, inner) => to_json(inner)?,
        Yaml::Alias(_) | Yaml::BadValue => {
            return Err(ComposeError::new(
                "aliases and malformed values are not supported",
            ));
        }
    })
}

fn scalar_json(scalar: &Scalar<'_>) -> Value {
    match scalar {
        Scalar::Null => Value::Null,
        Scalar::Boolean(b) => Value::Bool(*b),
        Scalar::Integer(i) => Value::Number((*i).into()),
        Scalar::FloatingPoint(f) => serde_json::Number::from_f64(f.into_inner())
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Scalar::String(s) => Value::String(s.to_string()),
    }
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
