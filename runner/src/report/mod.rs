//! What the user sees: a live view on a terminal, plain lines otherwise, and the end summary.

mod frame;
mod live;
mod summary;

pub use frame::short_duration;
pub use live::{Notice, Reporter};
pub use summary::{SummaryInput, colorize_summary, render_summary};
