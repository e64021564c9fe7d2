//! Leaderboard submission rules over job directories, and the secret scrubber for publishable copies.

/// Publishable copies of job directories with every known secret removed (`runner scrub`).
pub mod scrub;
/// Leaderboard preflight: job directories validated as one submission (`runner validate-submission`).
pub mod submission;
