//! Writing to the terminal without ever panicking, quietly when asked, in colour when wanted.
//!
//! `println!` panics when stdout is a closed pipe (`runner ... | head`), which would kill a
//! job mid-run and leave containers behind. These macros write and ignore the error: output
//! is a courtesy; the job directory is the record.
//!
//! `-q/--quiet` drops `note!` lines (progress and information on stderr) except warnings and
//! errors; `say!` (results on stdout) always prints. `--color auto|always|never` decides
//! colour once for stdout and stderr ([`use_color`]); `console` (which indicatif draws with)
//! is told the same, so every styled string follows it.

use std::sync::atomic::{AtomicBool, Ordering};

static QUIET: AtomicBool = AtomicBool::new(false);

/// When to colour output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set (`CLICOLOR_FORCE` forces it on).
    #[default]
    Auto,
    /// Always, even into a file or pipe.
    Always,
    /// Never.
    Never,
}

/// Whether to colour a stream: `never`/`always` as said; `auto` colours a terminal whose
/// `TERM` is not `dumb`, unless `NO_COLOR` is set to anything non-empty; `CLICOLOR_FORCE`
/// (non-empty, not `0`) colours even a pipe. <https://no-color.org>, <https://bixense.com/clicolors/>.
pub fn use_color(
    choice: ColorChoice,
    no_color: Option<&str>,
    clicolor_force: Option<&str>,
    term: Option<&str>,
    is_terminal: bool,
) -> bool {
    match choice {
        ColorChoice::Never => false,
        ColorChoice::Always => true,
        ColorChoice::Auto => {
            if no_color.is_some_and(|v| !v.is_empty()) {
                false
            } else if clicolor_force.is_some_and(|v| !v.is_empty() && v != "0") {
                true
            } else {
                is_terminal && term != Some("dumb")
            }
        }
    }
}

/// Sets quiet mode and colour for the process (once, before any output).
pub fn init(quiet: bool, color: ColorChoice) {
    use std::io::IsTerminal;
    QUIET.store(quiet, Ordering::Relaxed);
    let var = |name| std::env::var(name).ok();
    let (no_color, force, term) = (var("NO_COLOR"), var("CLICOLOR_FORCE"), var("TERM"));
    let decide = |tty| {
        use_color(
            color,
            no_color.as_deref(),
            force.as_deref(),
            term.as_deref(),
            tty,
        )
    };
    console::set_colors_enabled(decide(std::io::stdout().is_terminal()));
    console::set_colors_enabled_stderr(decide(std::io::stderr().is_terminal()));
}

/// Whether `-q/--quiet` is on.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Turns quiet mode on (a job config's `quiet = true`).
pub fn set_quiet() {
    QUIET.store(true, Ordering::Relaxed);
}

/// Whether stderr is coloured.
pub fn stderr_colored() -> bool {
    console::colors_enabled_stderr()
}

/// A stderr line as it is printed: `None` when quiet drops it; a leading `error:` or
/// `warning:` is coloured when stderr is.
pub fn note_text(text: String) -> Option<String> {
    // No note prints a URL's user-info (an engine's password), whatever it quotes.
    let text = secrets::redact_url_credentials(&text);
    let severity = [
        ("error:", console::Style::new().red().bold()),
        ("warning:", console::Style::new().yellow()),
    ]
    .into_iter()
    .find(|(prefix, _)| text.trim_start().starts_with(prefix));
    match severity {
        None if quiet() => None,
        None => Some(text),
        Some((prefix, style)) => {
            let at = text.find(prefix).unwrap_or(0);
            let (head, rest) = text.split_at(at + prefix.len());
            let (lead, word) = head.split_at(at);
            Some(format!("{lead}{}{rest}", style.for_stderr().apply_to(word)))
        }
    }
}

/// Like `println!`, but a closed or failing stdout is ignored.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// Like `eprintln!`, but a closed or failing stderr is ignored, and with `--quiet` only
/// warnings and errors are written.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Some(text) = $crate::output::note_text(format!($($arg)*)) {
            let _ = writeln!(std::io::stderr(), "{text}");
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_follows_the_flag_then_no_color_then_clicolor_force_then_the_terminal() {
        use ColorChoice::*;
        assert!(!use_color(Never, None, Some("1"), None, true));
        assert!(use_color(Always, Some("1"), None, None, false));
        assert!(use_color(Auto, None, None, Some("xterm"), true));
        assert!(!use_color(Auto, None, None, Some("xterm"), false));
        assert!(!use_color(Auto, None, None, Some("dumb"), true));
        assert!(!use_color(Auto, Some("1"), Some("1"), None, true));
        // An empty NO_COLOR does not count, as the convention says.
        assert!(use_color(Auto, Some(""), None, None, true));
        assert!(use_color(Auto, None, Some("1"), None, false));
        assert!(!use_color(Auto, None, Some("0"), None, false));
    }
}
