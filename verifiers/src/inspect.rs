//! Looking at `/logs/verifier` inside the container before anything is downloaded.
//!
//! A reward file the tests turned into a symlink, a FIFO or a huge file must never be copied
//! out, let alone read. The container reports each output file's type and size with `find`
//! (which neither follows links nor opens files); refused entries are then removed inside the
//! container so the download never materializes them on the host.

use crate::checks::{CTRF_JSON, TEST_STDOUT};
use crate::error::Refusal;
use crate::reward::{REWARD_FILE_LIMIT, REWARD_JSON, REWARD_TXT};

/// The verifier's output directory inside the container.
pub const VERIFIER_DIR: &str = "/logs/verifier";

/// The files the verifier reads; only these are examined.
const WATCHED: [&str; 4] = [REWARD_JSON, REWARD_TXT, CTRF_JSON, TEST_STDOUT];

/// The shell command that reports the directory's state and its watched entries.
///
/// Output: one line `dir`, `missing`, `symlink` or `notdir`; for `dir`, then one
/// `<type letter> <size> <name>` record per watched entry, each ending in NUL.
pub fn listing_command() -> String {
    let names = WATCHED
        .iter()
        .map(|n| format!("-name '{n}'"))
        .collect::<Vec<_>>()
        .join(" -o ");
    format!(
        "d={VERIFIER_DIR}; if [ -L \"$d\" ]; then echo symlink; elif [ ! -e \"$d\" ]; then echo missing; \
         elif [ ! -d \"$d\" ]; then echo notdir; else echo dir; \
         find \"$d\" -mindepth 1 -maxdepth 1 \\( {names} \\) -printf '%y %s %f\\0'; fi"
    )
}

/// The state of `/logs/verifier` as the container reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirState {
    /// A real directory with these watched entries.
    Dir(Vec<Entry>),
    /// No such path.
    Missing,
    /// A symlink or a non-directory: nothing in it can be trusted.
    Unsafe(Refusal),
}

/// One watched entry in `/logs/verifier`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The file name.
    pub name: String,
    /// `find -printf %y`: `f` regular, `l` symlink, `p` FIFO, `d` directory, ...
    pub kind: char,
    /// Size in bytes (of the link itself for a symlink).
    pub size: u64,
}

/// [`listing_command`]'s output that does not fit its format (a container that changed the
/// shell or `find` under it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListingError {
    /// The first line is not `dir`, `missing`, `symlink` or `notdir`.
    #[error("unexpected listing header {0:?}")]
    Header(String),
    /// A record is not `<type> <size> <name>`.
    #[error("malformed listing record {0:?}")]
    Record(String),
    /// A record's type is not one character.
    #[error("malformed type {kind:?} in listing record {record:?}")]
    Type {
        /// The type field.
        kind: String,
        /// The whole record.
        record: String,
    },
    /// A record's size is not a number.
    #[error("malformed size in listing record {record:?}")]
    Size {
        /// The whole record.
        record: String,
        /// Why the size does not parse.
        #[source]
        source: std::num::ParseIntError,
    },
}

/// Parses [`listing_command`]'s output; `Err` describes output that does not fit the format.
pub fn parse_listing(output: &str) -> Result<DirState, ListingError> {
    let (head, records) = output.split_once('\n').unwrap_or((output, ""));
    match head.trim() {
        "dir" => {}
        "missing" => return Ok(DirState::Missing),
        "symlink" => return Ok(DirState::Unsafe(Refusal::Symlink)),
        "notdir" => {
            return Ok(DirState::Unsafe(Refusal::NotRegular {
                kind: "non-directory".into(),
            }));
        }
        other => return Err(ListingError::Header(other.to_owned())),
    }
    let mut entries = Vec::new();
    for record in records.split('\0').filter(|r| !r.is_empty()) {
        let mut parts = record.splitn(3, ' ');
        let (Some(kind), Some(size), Some(name)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(ListingError::Record(record.to_owned()));
        };
        let mut kind_chars = kind.chars();
        let (Some(kind), None) = (kind_chars.next(), kind_chars.next()) else {
            return Err(ListingError::Type {
                kind: kind.to_owned(),
                record: record.to_owned(),
            });
        };
        let size = size.parse().map_err(|source| ListingError::Size {
            record: record.to_owned(),
            source,
        })?;
        entries.push(Entry {
            name: name.to_owned(),
            kind,
            size,
        });
    }
    Ok(DirState::Dir(entries))
}

/// What to do about the watched entries before downloading.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Entries to delete inside the container before the download, so they are never copied.
    pub remove: Vec<String>,
    /// The reward file that would be read (`reward.json` if present, else `reward.txt`) and why it
    /// is refused, if it is.
    pub reward_refusal: Option<(String, Refusal)>,
}

/// Decides which entries are refused: non-regular files always, oversized reward files too.
/// Oversized check sources (CTRF, test output) are kept: they are evidence, and the host side
/// refuses to parse them past its own limit.
pub fn judge(entries: &[Entry]) -> Verdict {
    let mut verdict = Verdict::default();
    let reward_file = [REWARD_JSON, REWARD_TXT]
        .into_iter()
        .find(|n| entries.iter().any(|e| e.name == *n));
    for entry in entries {
        let is_reward = entry.name == REWARD_JSON || entry.name == REWARD_TXT;
        let refusal = match entry.kind {
            'f' if is_reward && entry.size > REWARD_FILE_LIMIT => Some(Refusal::TooLarge {
                size: entry.size,
                limit: REWARD_FILE_LIMIT,
            }),
            'f' => None,
            'l' => Some(Refusal::Symlink),
            other => Some(Refusal::NotRegular {
                kind: kind_name(other).into(),
            }),
        };
        let Some(refusal) = refusal else { continue };
        verdict.remove.push(entry.name.clone());
        if reward_file == Some(entry.name.as_str()) {
            verdict.reward_refusal = Some((entry.name.clone(), refusal));
        }
    }
    verdict
}

/// The shell command that deletes refused entries (names come from the fixed watched set).
pub fn removal_command(names: &[String]) -> String {
    let paths: Vec<String> = names
        .iter()
        .filter(|n| WATCHED.contains(&n.as_str()))
        .map(|n| format!("'{VERIFIER_DIR}/{n}'"))
        .collect();
    format!("rm -rf -- {}", paths.join(" "))
}

fn kind_name(letter: char) -> &'static str {
    match letter {
        'p' => "fifo",
        's' => "socket",
        'd' => "directory",
        'b' | 'c' => "device",
        _ => "special file",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, kind: char, size: u64) -> Entry {
        Entry {
            name: name.into(),
            kind,
            size,
        }
    }

    #[test]
    fn parses_header_and_nul_separated_records() {
        let output = "dir\nf 2 reward.txt\0l 11 ctrf.json\0p 0 test-stdout.txt\0";
        assert_eq!(
            parse_listing(output).unwrap(),
            DirState::Dir(vec![
                entry("reward.txt", 'f', 2),
                entry("ctrf.json", 'l', 11),
                entry("test-stdout.txt", 'p', 0)
            ])
        );
        assert_eq!(parse_listing("dir\n").unwrap(), DirState::Dir(vec![]));
        assert_eq!(parse_listing("missing\n").unwrap(), DirState::Missing);
        assert_eq!(
            parse_listing("symlink\n").unwrap(),
            DirState::Unsafe(Refusal::Symlink)
        );
        assert!(matches!(
            parse_listing("notdir\n").unwrap(),
            DirState::Unsafe(Refusal::NotRegular { .. })
        ));
    }

    #[test]
    fn malformed_listings_are_errors() {
        assert!(parse_listing("").is_err());
        assert!(parse_listing("dir\nf reward.txt\0").is_err());
        assert!(parse_listing("dir\nfx 1 reward.txt\0").is_err());
        assert!(parse_listing("dir\nf many reward.txt\0").is_err());
    }

    #[test]
    fn regular_small_files_pass() {
        let verdict = judge(&[
            entry("reward.txt", 'f', 2),
            entry("test-stdout.txt", 'f', 1 << 30),
        ]);
        assert_eq!(verdict, Verdict::default());
    }

    #[test]
    fn symlink_fifo_and_oversized_reward_files_are_refused_and_removed() {
        let verdict = judge(&[entry("reward.txt", 'l', 11)]);
        assert_eq!(verdict.remove, ["reward.txt"]);
        assert_eq!(
            verdict.reward_refusal,
            Some(("reward.txt".into(), Refusal::Symlink))
        );

        let verdict = judge(&[entry("reward.txt", 'p', 0)]);
        assert_eq!(
            verdict.reward_refusal,
            Some((
                "reward.txt".into(),
                Refusal::NotRegular {
                    kind: "fifo".into()
                }
            ))
        );

        let verdict = judge(&[entry("reward.json", 'f', REWARD_FILE_LIMIT + 1)]);
        assert_eq!(
            verdict.reward_refusal,
            Some((
                "reward.json".into(),
                Refusal::TooLarge {
                    size: REWARD_FILE_LIMIT + 1,
                    limit: REWARD_FILE_LIMIT
                }
            ))
        );
    }

    #[test]
    fn only_the_reward_file_that_would_be_read_is_an_error() {
        // reward.json is read first, so a bad reward.txt beside it is removed but not fatal.
        let verdict = judge(&[entry("reward.json", 'f', 20), entry("reward.txt", 'l', 5)]);
        assert_eq!(verdict.remove, ["reward.txt"]);
        assert_eq!(verdict.reward_refusal, None);
        // A bad reward.json is fatal even when reward.txt is fine.
        let verdict = judge(&[entry("reward.json", 'p', 0), entry("reward.txt", 'f', 2)]);
        assert_eq!(
            verdict.reward_refusal.map(|(n, _)| n),
            Some("reward.json".into())
        );
    }

    #[test]
    fn unsafe_check_sources_are_removed_without_a_reward_error() {
        let verdict = judge(&[
            entry("ctrf.json", 'l', 9),
            entry("test-stdout.txt", 'p', 0),
            entry("reward.txt", 'f', 2),
        ]);
        assert_eq!(verdict.remove, ["ctrf.json", "test-stdout.txt"]);
        assert_eq!(verdict.reward_refusal, None);
    }

    #[test]
    fn removal_only_names_watched_files() {
        let cmd = removal_command(&["reward.txt".into(), "../../etc/passwd".into()]);
        assert_eq!(cmd, "rm -rf -- '/logs/verifier/reward.txt'");
    }

    #[test]
    fn listing_command_runs_in_bash_and_reports_entries() {
        let dir = tempfile::tempdir().unwrap();
        let verifier = dir.path().join("logs/verifier");
        std::fs::create_dir_all(&verifier).unwrap();
        std::fs::write(verifier.join("reward.txt"), "1\n").unwrap();
        std::fs::write(verifier.join("unrelated.txt"), "x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", verifier.join("ctrf.json")).unwrap();
        let command = listing_command().replace(VERIFIER_DIR, &verifier.display().to_string());
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(command)
            .output()
            .unwrap();
        let DirState::Dir(mut entries) =
            parse_listing(&String::from_utf8(out.stdout).unwrap()).unwrap()
        else {
            panic!("expected a directory listing");
        };
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(
            entries,
            vec![
                entry("ctrf.json", 'l', "/etc/passwd".len() as u64),
                entry("reward.txt", 'f', 2)
            ]
        );
    }
}
