//! Test support: helpers to build a bridge pointing at the scripted upstream
//! (`testkit::upstream`, on 127.0.0.1). Shared by the integration tests and the benchmark.
#![allow(dead_code)]

pub use testkit::upstream;

use std::path::Path;

use llm_bridge::{ApiKind, Bridge, BridgeConfig, KeySource, PriceTable, ProviderConfig};

pub use testkit::upstream::{ANTHROPIC_KEY, OPENAI_KEY};

/// Writes the two fake keys to files in `dir`, as a user's key files would be.
pub fn key_files(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let openai = dir.join("openai.key");
    let anthropic = dir.join("anthropic.key");
    std::fs::write(&openai, format!("{OPENAI_KEY}\n")).unwrap();
    std::fs::write(&anthropic, format!("{ANTHROPIC_KEY}\n")).unwrap();
    (openai, anthropic)
}

/// A bridge config whose providers are the scripted upstream, keys from files in `key_dir`.
pub fn config_for(upstream: &upstream::ScriptedUpstream, key_dir: &Path) -> BridgeConfig {
    let (openai_key, anthropic_key) = key_files(key_dir);
    let mut config = BridgeConfig::new(vec![
        ProviderConfig {
            name: "openai".into(),
            api: ApiKind::OpenAi,
            base_url: upstream.openai_base_url(),
            key: KeySource::File(openai_key),
        },
        ProviderConfig {
            name: "anthropic".into(),
            api: ApiKind::Anthropic,
            base_url: upstream.anthropic_base_url(),
            key: KeySource::File(anthropic_key),
        },
    ]);
    config.prices = PriceTable::parse(
        r#"
        [models."openai/gpt-scripted"]
        input_per_mtok = 2.0
        cached_input_per_mtok = 0.5
        output_per_mtok = 8.0

        [models."anthropic/claude-scripted"]
        input_per_mtok = 3.0
        cached_input_per_mtok = 0.3
        cache_write_per_mtok = 3.75
        output_per_mtok = 15.0
        "#,
        Path::new("test-prices.toml"),
    )
    .unwrap();
    config
}

/// A bridge over the scripted upstream.
pub fn bridge_for(upstream: &upstream::ScriptedUpstream, key_dir: &Path) -> Bridge {
    Bridge::new(config_for(upstream, key_dir)).unwrap()
}

/// An HTTP client that talks to a trial's unix socket.
pub fn socket_client(socket: &Path) -> reqwest::Client {
    reqwest::Client::builder()
        .unix_socket(socket)
        .build()
        .unwrap()
}
