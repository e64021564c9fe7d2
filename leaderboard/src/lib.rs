//! Leaderboard submission rules over job directories, and the secret scrubber for publishable copies.

/// Publishable copies of job directories with every known secret removed (`runner scrub`).
pub mod scrub;
