//! The errors of starting a bridge, starting a trial's bridge and closing it.

/// Why the bridge could not start, or a trial could not get or close its bridge.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// A provider's key file could not be read.
    #[error("cannot read the key for provider '{provider}' from {source_desc}: {error}")]
    KeyFile {
        /// The provider.
        provider: String,
        /// Where the key was to come from.
        source_desc: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// A provider's key is empty.
    #[error("the key for provider '{provider}' from {source_desc} is empty")]
    EmptyKey {
        /// The provider.
        provider: String,
        /// Where the key came from.
        source_desc: String,
    },
    /// Two providers share a name.
    #[error("provider '{0}' is configured twice; provider names must be unique")]
    DuplicateProvider(String),
    /// A declared model needs a provider whose key the runner does not have.
    #[error(
        "trial '{trial}' declares model '{model}', but the runner has no key for provider '{provider}' (set {source_desc})"
    )]
    MissingKey {
        /// The trial.
        trial: String,
        /// The declared model.
        model: String,
        /// The provider that would serve it.
        provider: String,
        /// Where the key is looked for.
        source_desc: String,
    },
    /// The grant is unusable.
    #[error("trial '{trial}': {reason}")]
    BadGrant {
        /// The trial.
        trial: String,
        /// What is wrong.
        reason: String,
    },
    /// The upstream HTTP client could not be built (TLS setup).
    #[error("cannot set up the upstream HTTP client: {0}")]
    Client(String),
    /// A file or socket operation failed.
    #[error("{what}: {error}")]
    Io {
        /// What was being done, with the path.
        what: String,
        /// The I/O error.
        error: std::io::Error,
    },
}

/// A declared model the bridge could not serve (see [`crate::Bridge::check_models`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelKeyError {
    /// No provider is configured at all for it.
    #[error("model '{model}' is declared but no provider is configured")]
    NoProvider {
        /// The declared model.
        model: String,
    },
    /// Its provider has no key: the variable is unset.
    #[error(
        "model '{model}' needs provider '{provider}', but the runner has no key for it (set {key})"
    )]
    MissingKey {
        /// The declared model.
        model: String,
        /// The provider that would serve it.
        provider: String,
        /// Where the key is looked for.
        key: crate::config::KeySource,
    },
    /// A dollar budget is set but the price table has no price for a declared model, so its
    /// calls could not be counted against it.
    #[error(
        "the {scope} dollar budget cannot be kept: model '{model}' has no price in the price table (add [models.\"{model}\"] with input_per_mtok and output_per_mtok to the price table, or use a token budget)"
    )]
    Unpriced {
        /// The declared model.
        model: String,
        /// Whose budget: "trial" or "job".
        scope: &'static str,
    },
}

/// Wraps an I/O error with what was being done.
pub(crate) fn io_error(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BridgeError {
    let what = what.into();
    move |error| BridgeError::Io { what, error }
}
