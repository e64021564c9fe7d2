//! The walk over per-step `metrics` and the trajectory's `final_metrics`.

use serde_json::Value;

use super::super::{Version, schema};
use super::{Walker, get};

impl Walker<'_> {
    pub(super) fn metrics(&mut self, path: &str, value: &Value, version: Version) {
        let Some(map) = self.object(path, value, schema::METRICS, version) else {
            return;
        };
        for key in ["prompt_tokens", "completion_tokens", "cached_tokens"] {
            if let Some(v) = get(map, key) {
                self.integer(&format!("{path}.{key}"), v, i64::MIN);
            }
        }
        if let Some(v) = get(map, "cost_usd") {
            self.number(&format!("{path}.cost_usd"), v);
        }
        for key in ["prompt_token_ids", "completion_token_ids"] {
            if let Some(ids) = get(map, key) {
                let ids_path = format!("{path}.{key}");
                if let Some(ids) = self.array(&ids_path, ids)
                    && let Some(i) = ids.iter().position(|id| !(id.is_i64() || id.is_u64()))
                {
                    self.err(&format!("{ids_path}[{i}]"), "token ids must be integers");
                }
            }
        }
        if let Some(v) = get(map, "logprobs") {
            self.array(&format!("{path}.logprobs"), v);
        }
        if let Some(extra) = get(map, "extra") {
            self.any_object(&format!("{path}.extra"), extra);
        }
    }

    pub(super) fn final_metrics(&mut self, path: &str, value: &Value, version: Version) {
        let Some(map) = self.object(path, value, schema::FINAL_METRICS, version) else {
            return;
        };
        for key in [
            "total_prompt_tokens",
            "total_completion_tokens",
            "total_cached_tokens",
        ] {
            if let Some(v) = get(map, key) {
                self.integer(&format!("{path}.{key}"), v, i64::MIN);
            }
        }
        if let Some(v) = get(map, "total_steps") {
            self.integer(&format!("{path}.total_steps"), v, 0);
        }
        if let Some(v) = get(map, "total_cost_usd") {
            self.number(&format!("{path}.total_cost_usd"), v);
        }
        if let Some(extra) = get(map, "extra") {
            self.any_object(&format!("{path}.extra"), extra);
        }
    }
}
