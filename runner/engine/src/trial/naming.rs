//! Trial names as Harbor makes them: `<short name, at most 32 chars>__<7 random chars>`.

/// shortuuid's default alphabet (base57: no 0, 1, I, O, l).
const ALPHABET: &[u8] = b"23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/// A fresh trial name for a task's short name.
pub fn trial_name(short_name: &str) -> String {
    let prefix: String = short_name.chars().take(32).collect();
    let prefix = prefix.trim_end_matches(['_', '-']);
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let suffix: String = bytes
        .iter()
        .take(7)
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect();
    format!("{prefix}__{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_harbor_shape() {
        let name = trial_name("a-very-long-task-name-that-goes-past-32-chars");
        let (prefix, suffix) = name.split_once("__").unwrap();
        assert_eq!(prefix, "a-very-long-task-name-that-goes");
        assert_eq!(suffix.len(), 7);
        assert!(suffix.bytes().all(|b| ALPHABET.contains(&b)));
        assert_ne!(trial_name("x"), trial_name("x"));
    }
}
