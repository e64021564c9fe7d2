//! The price table: USD per million tokens per model, loaded from a TOML file.
//!
//! ```toml
//! # Keys are model names as the trial declares them: `provider/model` or a bare model name.
//! [models."openai/gpt-4.1-mini"]
//! input_per_mtok = 0.40          # uncached input
//! cached_input_per_mtok = 0.10   # cache reads; defaults to input_per_mtok
//! output_per_mtok = 1.60
//!
//! [models."anthropic/claude-sonnet-4-5"]
//! input_per_mtok = 3.0
//! cached_input_per_mtok = 0.30
//! cache_write_per_mtok = 3.75    # Anthropic cache writes; defaults to input_per_mtok
//! output_per_mtok = 15.0
//! max_output_tokens = 64000      # optional: the model's output cap (see below)
//! ```
//!
//! A model missing from the table is metered in tokens only (it counts against token budgets);
//! the call record and the trial's usage say so instead of pretending it cost nothing, and a
//! dollar budget over a model missing here is refused before the job starts.
//!
//! `max_output_tokens` is what a call that sets no `max_tokens` reserves of the budgets while
//! it runs, and what it is charged for output when its usage never arrives (an aborted stream).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::usage::Usage;

/// Prices of one model in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// Uncached input tokens.
    pub input_per_mtok: f64,
    /// Input tokens read from the provider's prompt cache (default: `input_per_mtok`).
    #[serde(default)]
    pub cached_input_per_mtok: Option<f64>,
    /// Input tokens written to the prompt cache, which Anthropic bills apart (default:
    /// `input_per_mtok`).
    #[serde(default)]
    pub cache_write_per_mtok: Option<f64>,
    /// Output tokens (reasoning tokens included, as the providers bill them).
    pub output_per_mtok: f64,
    /// The model's own cap on output tokens: what a call that does not set `max_tokens`
    /// reserves of the budgets, and is charged when its usage never arrives (default:
    /// `BridgeConfig::default_max_output_tokens`).
    #[serde(default)]
    pub max_output_tokens: Option<u64>,
}

impl ModelPrice {
    /// The cost in USD of one call's usage.
    pub fn cost_usd(&self, usage: &Usage) -> f64 {
        let cached = usage.n_cache_tokens;
        let cache_write = usage.n_cache_write_tokens;
        let uncached = usage.n_input_tokens.saturating_sub(cached + cache_write);
        let per_token = |per_mtok: f64| per_mtok / 1_000_000.0;
        uncached as f64 * per_token(self.input_per_mtok)
            + cached as f64 * per_token(self.cached_input_per_mtok.unwrap_or(self.input_per_mtok))
            + cache_write as f64
                * per_token(self.cache_write_per_mtok.unwrap_or(self.input_per_mtok))
            + usage.n_output_tokens as f64 * per_token(self.output_per_mtok)
    }
}

/// Model name → price. Empty means every call is metered in tokens only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    /// Prices by declared model name (`provider/model` or bare).
    #[serde(default)]
    pub models: BTreeMap<String, ModelPrice>,
}

/// Why a price table could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PriceTableError {
    /// The file could not be read.
    #[error("cannot read the price table {path}: {source}")]
    Read {
        /// The file named as the price table.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a valid price table.
    #[error(
        "the price table {path} is invalid: {source} (expected [models.\"provider/model\"] tables with input_per_mtok and output_per_mtok)"
    )]
    Parse {
        /// The file named as the price table.
        path: PathBuf,
        /// What TOML or serde said, with the field.
        source: toml::de::Error,
    },
    /// A price is negative or not a number.
    #[error(
        "the price table {path} gives model '{model}' a {field} of {value}; prices must be finite and not negative"
    )]
    BadPrice {
        /// The file named as the price table.
        path: PathBuf,
        /// The model whose price is wrong.
        model: String,
        /// The field.
        field: &'static str,
        /// The value found.
        value: f64,
    },
}

impl PriceTable {
    /// Reads and checks a price table file.
    pub fn load(path: &Path) -> Result<PriceTable, PriceTableError> {
        let text = std::fs::read_to_string(path).map_err(|source| PriceTableError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses a price table; `path` only names the source in errors.
    pub fn parse(text: &str, path: &Path) -> Result<PriceTable, PriceTableError> {
        let table: PriceTable = toml::from_str(text).map_err(|source| PriceTableError::Parse {
            path: path.to_owned(),
            source,
        })?;
        for (model, price) in &table.models {
            let fields = [
                ("input_per_mtok", Some(price.input_per_mtok)),
                ("cached_input_per_mtok", price.cached_input_per_mtok),
                ("cache_write_per_mtok", price.cache_write_per_mtok),
                ("output_per_mtok", Some(price.output_per_mtok)),
            ];
            for (field, value) in fields {
                if let Some(value) = value.filter(|v| !v.is_finite() || *v < 0.0) {
                    return Err(PriceTableError::BadPrice {
                        path: path.to_owned(),
                        model: model.clone(),
                        field,
                        value,
                    });
                }
            }
        }
        Ok(table)
    }

    /// The price for a call, looked up by the declared name first (`provider/model`), then by
    /// the bare model name the agent sent.
    pub fn price_for(&self, declared: &str, requested: &str) -> Option<&ModelPrice> {
        self.models
            .get(declared)
            .or_else(|| self.models.get(requested))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> PriceTable {
        PriceTable::parse(
            r#"
            [models."openai/gpt-test"]
            input_per_mtok = 2.0
            cached_input_per_mtok = 0.5
            output_per_mtok = 8.0

            [models."claude-test"]
            input_per_mtok = 3.0
            cache_write_per_mtok = 3.75
            output_per_mtok = 15.0
            "#,
            Path::new("prices.toml"),
        )
        .unwrap()
    }

    #[test]
    fn cost_splits_cached_and_uncached_input() {
        let usage = Usage {
            n_input_tokens: 1_000_000,
            n_cache_tokens: 400_000,
            n_cache_write_tokens: 0,
            n_output_tokens: 100_000,
        };
        let price = table()
            .price_for("openai/gpt-test", "gpt-test")
            .copied()
            .unwrap();
        // 600k uncached * 2 + 400k cached * 0.5 + 100k output * 8, per million.
        let expected = 1.2 + 0.2 + 0.8;
        assert!((price.cost_usd(&usage) - expected).abs() < 1e-9);
    }

    #[test]
    fn cache_writes_have_their_own_price_and_bare_names_match() {
        let usage = Usage {
            n_input_tokens: 300,
            n_cache_tokens: 100,
            n_cache_write_tokens: 100,
            n_output_tokens: 10,
        };
        let table = table();
        let price = table
            .price_for("anthropic/claude-test", "claude-test")
            .unwrap();
        let expected = (100.0 * 3.0 + 100.0 * 3.0 + 100.0 * 3.75 + 10.0 * 15.0) / 1e6;
        assert!((price.cost_usd(&usage) - expected).abs() < 1e-12);
        assert!(table.price_for("openai/unknown", "unknown").is_none());
    }

    #[test]
    fn bad_tables_name_the_file_and_field() {
        let err = PriceTable::parse(
            "[models.m]\ninput_per_mtok = -1.0\noutput_per_mtok = 1.0\n",
            Path::new("p.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("p.toml") && err.contains("'m'") && err.contains("input_per_mtok"),
            "{err}"
        );
        let err = PriceTable::parse("[models.m]\ninput_per_mtok = 1.0\n", Path::new("p.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("output_per_mtok"), "{err}");
        let err = PriceTable::parse(
            "[models.m]\ninput_per_mtok = 1.0\noutput_per_mtok = 1.0\ninput = 2\n",
            Path::new("p.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("input"), "{err}");
    }
}
