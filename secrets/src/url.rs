//! URLs with credentials in them: `ssh://user:PASSWORD@host`, `tcp://user:pw@host:2376`,
//! `https://TOKEN@host/…`. Every message and record that quotes a URL the user gave (an
//! engine's `--docker-host`, `DOCKER_HOST`, a context's endpoint) passes it through
//! [`redact_url_credentials`] first, so CI logs and job files never keep the password.

use std::sync::LazyLock;

use regex::Regex;

/// What stands in for a URL's user-info.
pub const REDACTED_USERINFO: &str = "***";

/// `scheme://` then the user-info up to the authority's last `@`. The user-info is taken up
/// to the last `@` before whitespace or a quote, not the first `/`: a password may hold a
/// `/` or an `@` a user did not percent-encode, and redacting a little more than the URL
/// standard would (a path with an `@` in it) is the safe way to be wrong.
static USERINFO: LazyLock<Regex> = LazyLock::new(|| {
    // `[` and `]` are never user-info: `ssh://[user@]host` is a usage line, not a URL.
    Regex::new(
        r#"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^\s"'<>`@\[\]]*(?:@[^\s"'<>`@\[\]]*)*@"#,
    )
    .expect("user-info pattern compiles")
});

/// `text` with the user-info of every URL in it (user name and password: a token is often
/// given as the user name) replaced by [`REDACTED_USERINFO`]; text without one is returned
/// unchanged. Works on a bare URL and on a whole message that quotes URLs.
pub fn redact_url_credentials(text: &str) -> String {
    if !text.contains('@') {
        return text.to_owned();
    }
    USERINFO
        .replace_all(text, |caps: &regex::Captures<'_>| {
            format!("{}{REDACTED_USERINFO}@", &caps["scheme"])
        })
        .into_owned()
}

/// True when `text` holds a URL with user-info (a credential, or a name, before an `@`).
pub fn has_url_credentials(text: &str) -> bool {
    USERINFO.is_match(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_info_of_every_scheme_is_redacted() {
        for (given, shown) in [
            ("ssh://user:PASSWORD@host", "ssh://***@host"),
            ("ssh://user:PASSWORD@host:2222", "ssh://***@host:2222"),
            (
                "tcp://user:pw@10.0.0.5:2376#n=4",
                "tcp://***@10.0.0.5:2376#n=4",
            ),
            ("https://TOKEN@example.test/x", "https://***@example.test/x"),
            ("ssh://deploy@host", "ssh://***@host"),
        ] {
            assert_eq!(redact_url_credentials(given), shown);
            assert!(has_url_credentials(given), "{given}");
        }
    }

    #[test]
    fn a_usage_line_with_brackets_is_not_a_url_with_credentials() {
        let usage = "an ssh:// engine is ssh://[user@]host[:port], without a path";
        assert_eq!(redact_url_credentials(usage), usage);
        assert_eq!(
            redact_url_credentials(&format!("ssh://me@h/x: {usage}")),
            format!("ssh://***@h/x: {usage}")
        );
    }

    #[test]
    fn a_password_with_slashes_and_ats_is_redacted_whole() {
        let out = redact_url_credentials("engine tcp://u:p@ss/w0rd@host:1: no answer");
        assert_eq!(out, "engine tcp://***@host:1: no answer");
        assert!(!out.contains("w0rd"), "{out}");
    }

    #[test]
    fn urls_in_a_message_are_redacted_and_the_rest_is_kept() {
        let message =
            "DOCKER_HOST=\"ssh://a:SECRET1@h1\" and --docker-host tcp://b:SECRET2@h2:2375 failed";
        let out = redact_url_credentials(message);
        assert_eq!(
            out,
            "DOCKER_HOST=\"ssh://***@h1\" and --docker-host tcp://***@h2:2375 failed"
        );
    }

    #[test]
    fn text_without_user_info_is_unchanged() {
        for text in [
            "unix:///run/docker.sock",
            "tcp://10.0.0.5:2375",
            "ssh://host:22",
            "mail me at someone@example.test",
            "",
        ] {
            assert_eq!(redact_url_credentials(text), text);
            assert!(!has_url_credentials(text), "{text}");
        }
    }
}
