//! Writing to the terminal without ever panicking.
//!
//! `println!` panics when stdout is a closed pipe (`runner ... | head`), which would kill a
//! job mid-run and leave containers behind. These macros write and ignore the error: output
//! is a courtesy; the job directory is the record.

/// Like `println!`, but a closed or failing stdout is ignored.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// Like `eprintln!`, but a closed or failing stderr is ignored.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
