//! What the user sees: a live view on a terminal, plain lines otherwise, and the end summary.

mod live;
mod summary;

pub use live::Reporter;
pub use summary::{SummaryInput, render_summary};
