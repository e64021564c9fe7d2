//! Per-trial tokens: what the agent presents instead of a provider key.
//!
//! A token is `runner-trial-` followed by 48 hex digits of OS randomness. The prefix keeps it
//! from matching any provider-key shape (so the secret boundary and scrub never mistake it for a
//! real key) and tells a human reading a log what it is. It is only ever checked by the trial's
//! own bridge, so it is worthless outside this runner process and after the trial closes.

use std::fmt;

/// The prefix every per-trial token starts with.
pub const TOKEN_PREFIX: &str = "runner-trial-";

/// Random bytes in a token (48 hex digits): enough that guessing one is hopeless.
const TOKEN_RANDOM_BYTES: usize = 24;

/// A per-trial bearer token. `Debug` never prints the value, so a token in a logged struct
/// does not end up in a log file.
#[derive(Clone, PartialEq, Eq)]
pub struct TrialToken(String);

impl TrialToken {
    /// Draws a fresh token from the operating system's random source.
    pub fn generate() -> Result<TrialToken, getrandom::Error> {
        let mut bytes = [0u8; TOKEN_RANDOM_BYTES];
        getrandom::fill(&mut bytes)?;
        Ok(TrialToken(format!("{TOKEN_PREFIX}{}", hex::encode(bytes))))
    }

    /// The token's text, to hand to the agent as its API key.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Compares `presented` with this token in time independent of where they first differ,
    /// so an agent cannot learn the token byte by byte from response timings.
    pub fn matches(&self, presented: &str) -> bool {
        let expected = self.0.as_bytes();
        let presented = presented.as_bytes();
        if expected.len() != presented.len() {
            return false;
        }
        expected
            .iter()
            .zip(presented)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl fmt::Debug for TrialToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TrialToken({TOKEN_PREFIX}…)")
    }
}

/// True when `value` has the shape of a per-trial token. The secret boundary can use this to
/// let `OPENAI_API_KEY=<token>` into a container: the name looks like a credential, the value
/// is not one.
pub fn is_trial_token_shaped(value: &str) -> bool {
    value.strip_prefix(TOKEN_PREFIX).is_some_and(|rest| {
        rest.len() == TOKEN_RANDOM_BYTES * 2 && rest.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_and_never_look_like_provider_keys() {
        let a = TrialToken::generate().unwrap();
        let b = TrialToken::generate().unwrap();
        assert_ne!(a, b);
        assert!(a.as_str().starts_with(TOKEN_PREFIX));
        assert!(is_trial_token_shaped(a.as_str()));
        assert!(
            !secrets::looks_like_provider_key(a.as_str()),
            "{}",
            a.as_str()
        );
        assert!(!format!("{a:?}").contains(&a.as_str()[TOKEN_PREFIX.len()..]));
    }

    #[test]
    fn matching_is_exact() {
        let token = TrialToken::generate().unwrap();
        assert!(token.matches(token.as_str()));
        let mut wrong = token.as_str().to_owned();
        wrong.pop();
        assert!(!token.matches(&wrong));
        wrong.push('x');
        assert!(!token.matches(&wrong));
        assert!(!token.matches(""));
        assert!(!is_trial_token_shaped("runner-trial-xyz"));
    }
}
