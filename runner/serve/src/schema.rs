//! `/schema`: the Terminal-Bench wrapper's JSON schemas (its action and observation models
//! and OpenEnv's `State`, as its server answers), field for field. `schema.json` is what
//! pydantic generates from the wrapper's models; the end-to-end tests diff it against the
//! models rebuilt on the installed `openenv-core`.

use serde_json::Value;

/// The schema document `/schema` answers: `{"action": …, "observation": …, "state": …}`.
pub fn schema() -> Value {
    serde_json::from_str(include_str!("schema.json")).expect("schema.json is JSON")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_schema_names_the_wrappers_fields() {
        let schema = super::schema();
        let fields = |part: &str| {
            schema[part]["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            fields("action"),
            [
                "metadata",
                "action_type",
                "command",
                "session_id",
                "block",
                "wait_seconds",
                "file_path",
                "content"
            ]
        );
        assert!(fields("observation").contains(&"instruction".to_owned()));
        assert_eq!(fields("state"), ["episode_id", "step_count"]);
    }
}
