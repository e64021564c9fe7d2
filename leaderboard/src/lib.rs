//! Leaderboard submission rules over job directories, and the secret scrubber for publishable copies.
