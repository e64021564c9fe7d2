//! One table of a job config being read field by field: every field is taken once, a field
//! runner cannot honour must hold its unused value, and what is left over is unknown.

use serde_json::{Map, Value};

/// One object being read: its path in the document, and the fields not yet read.
pub(super) struct Section {
    path: String,
    fields: Map<String, Value>,
}

impl Section {
    pub(super) fn new(path: &str, value: &Value) -> Result<Section, String> {
        match value {
            Value::Object(map) => Ok(Section {
                path: path.to_owned(),
                fields: map.clone(),
            }),
            _ => Err(format!("{}: expected a table of fields", label(path))),
        }
    }

    pub(super) fn name(&self, field: &str) -> String {
        if self.path.is_empty() {
            field.to_owned()
        } else {
            format!("{}.{field}", self.path)
        }
    }

    /// Takes a field; `null` counts as absent (Harbor writes unset options as null).
    pub(super) fn take(&mut self, field: &str) -> Option<Value> {
        self.fields.remove(field).filter(|v| !v.is_null())
    }

    pub(super) fn typed<T: serde::de::DeserializeOwned>(
        &mut self,
        field: &str,
        what: &str,
    ) -> Result<Option<T>, String> {
        let name = self.name(field);
        self.take(field)
            .map(|v| serde_json::from_value(v).map_err(|_| format!("{name}: expected {what}")))
            .transpose()
    }

    /// A field runner does not support: absent, or one of the values meaning "unused".
    pub(super) fn default_only(&mut self, field: &str, allowed: &[Value]) -> Result<(), String> {
        match self.take(field) {
            None => Ok(()),
            Some(v) if is_empty(&v) || allowed.contains(&v) => Ok(()),
            Some(v) => Err(format!(
                "{}: {} is not supported by runner (leave it unset)",
                self.name(field),
                short(&v)
            )),
        }
    }

    /// Every field left is unknown.
    pub(super) fn finish(self) -> Result<(), String> {
        match self.fields.keys().next() {
            None => Ok(()),
            Some(field) => Err(format!(
                "{}: unknown field (Harbor's JobConfig has no such field, and runner adds only agent_config, allow_container_secrets, instruction_suffix, pids_limit, max_download_mb, max_trial_log_mb, task_env_from, shard, n_shards and merged_from)",
                self.name(field)
            )),
        }
    }
}

fn label(path: &str) -> &str {
    if path.is_empty() {
        "the document"
    } else {
        path
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}
