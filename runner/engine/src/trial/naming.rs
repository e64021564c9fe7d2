//! Trial names in Harbor's shape, `<short name, at most 32 chars>__<7 chars>`, with the suffix
//! taken from the trial's identity key instead of at random: the same trial of the same job
//! always has the same name, so a resume finds its directory.

/// shortuuid's default alphabet (base57: no 0, 1, I, O, l), as in Harbor's names.
const ALPHABET: &[u8] = b"23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// The name of the trial of task `short_name` whose identity key is `key` (`sha256:<hex>`);
/// `length` suffix characters (7 as in Harbor; more only to break a clash inside one job).
pub fn trial_name(short_name: &str, key: &str, length: usize) -> String {
    let prefix: String = short_name.chars().take(32).collect();
    let prefix = prefix.trim_end_matches(['_', '-']);
    let hex = key.strip_prefix("sha256:").unwrap_or(key);
    let bytes = hex::decode(hex).unwrap_or_else(|_| hex.as_bytes().to_vec());
    let suffix: String = bytes
        .chunks(2)
        .take(length)
        .map(|pair| {
            let n = pair.iter().fold(0usize, |acc, b| acc * 256 + *b as usize);
            ALPHABET[n % ALPHABET.len()] as char
        })
        .collect();
    format!("{prefix}__{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    #[test]
    fn names_follow_harbor_shape_and_the_key() {
        let name = trial_name("a-very-long-task-name-that-goes-past-32-chars", KEY, 7);
        let (prefix, suffix) = name.split_once("__").unwrap();
        assert_eq!(prefix, "a-very-long-task-name-that-goes");
        assert_eq!(suffix.len(), 7);
        assert!(suffix.bytes().all(|b| ALPHABET.contains(&b)));
        assert_eq!(
            name,
            trial_name("a-very-long-task-name-that-goes-past-32-chars", KEY, 7)
        );
        let other = KEY.replace("9f86", "9f87");
        assert_ne!(trial_name("x", KEY, 7), trial_name("x", &other, 7));
        assert_eq!(trial_name("x", KEY, 8).len(), "x__".len() + 8);
    }
}
