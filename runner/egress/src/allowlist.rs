//! Which hosts and addresses a phase may reach: Harbor's `allowed_hosts` patterns (an exact
//! name, `*.suffix`, or an IP literal) and the address rules that keep the host's own network
//! out of reach.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One `allowed_hosts` entry, normalised (lower case, no trailing dot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// `pypi.org`: that name only.
    Exact(String),
    /// `*.pythonhosted.org`: any name under the suffix, not the suffix itself (the leading
    /// `*.` means at least one more label, as in Harbor's sidecar).
    Wildcard(String),
    /// `10.0.0.7`: that address, as a literal in requests and as a resolved address.
    Ip(IpAddr),
}

/// A phase's allowed hosts; never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowlist {
    patterns: Vec<HostPattern>,
}

/// How a phase's traffic through the proxy is treated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    /// `public`: any host, but never the host's loopback, link-local or private addresses
    /// (the container could not reach those directly either).
    Open,
    /// `no-network`, and between phases: every attempt refused.
    Closed,
    /// `allowlist`: only the listed hosts.
    Allow(Allowlist),
}

/// What the proxy does with one request's host, before or after resolving it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The host may be reached; `trusted_addresses` when the task named it exactly (or as a
    /// literal), which lets it resolve to a private or loopback address.
    Allow {
        /// The task listed this very host, so restricted addresses are accepted for it.
        trusted_addresses: bool,
    },
    /// Refused, with the reason recorded in the log and sent to the client.
    Refuse(String),
}

/// Why a task's `allowed_hosts` cannot be an allowlist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowlistError {
    /// The list names no host (an allowlist that allows nothing is a mistake, not `no_network`).
    #[error("an allowlist needs at least one host")]
    Empty,
    /// An entry is neither a host name, a `*.suffix` pattern nor an IP address (a URL, a
    /// port or a path in it, or a malformed label).
    #[error("{0:?} is not a host name, a `*.suffix` pattern or an IP address")]
    BadEntry(String),
}

impl HostPattern {
    /// Parses one `allowed_hosts` entry; `Err` says what is wrong with it.
    pub fn parse(entry: &str) -> Result<HostPattern, AllowlistError> {
        let host = entry.trim().trim_end_matches('.').to_ascii_lowercase();
        if let Ok(ip) = strip_brackets(&host).parse::<IpAddr>() {
            return Ok(HostPattern::Ip(ip));
        }
        let (wildcard, name) = match host.strip_prefix("*.") {
            Some(suffix) => (true, suffix),
            None => (false, host.as_str()),
        };
        let label_ok = |label: &str| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        };
        if name.is_empty() || !name.split('.').all(label_ok) {
            return Err(AllowlistError::BadEntry(entry.to_owned()));
        }
        Ok(if wildcard {
            HostPattern::Wildcard(name.to_owned())
        } else {
            HostPattern::Exact(name.to_owned())
        })
    }

    fn matches(&self, host: &str, ip: Option<IpAddr>) -> bool {
        match self {
            HostPattern::Exact(name) => ip.is_none() && host == name,
            HostPattern::Wildcard(suffix) => {
                ip.is_none()
                    && host.len() > suffix.len() + 1
                    && host.ends_with(suffix.as_str())
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
            }
            HostPattern::Ip(listed) => ip == Some(*listed),
        }
    }
}

impl Allowlist {
    /// Parses a task's `allowed_hosts`; an empty list or a malformed entry is an `Err`.
    pub fn parse(entries: &[String]) -> Result<Allowlist, AllowlistError> {
        if entries.is_empty() {
            return Err(AllowlistError::Empty);
        }
        let patterns = entries
            .iter()
            .map(|e| HostPattern::parse(e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Allowlist { patterns })
    }

    /// The patterns, in the task's order.
    pub fn patterns(&self) -> &[HostPattern] {
        &self.patterns
    }

    fn is_listed_address(&self, ip: IpAddr) -> bool {
        self.patterns.contains(&HostPattern::Ip(ip))
    }
}

impl Policy {
    /// Decides on a request's host (a name or an IP literal) before it is resolved.
    pub fn decide_host(&self, host: &str) -> Decision {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let ip = strip_brackets(&host).parse::<IpAddr>().ok();
        match self {
            Policy::Closed => Decision::Refuse("this phase has no network".into()),
            Policy::Open => Decision::Allow {
                trusted_addresses: false,
            },
            Policy::Allow(list) => {
                let found = list.patterns.iter().find(|p| p.matches(&host, ip));
                match found {
                    Some(HostPattern::Wildcard(_)) => Decision::Allow {
                        trusted_addresses: false,
                    },
                    Some(_) => Decision::Allow {
                        trusted_addresses: true,
                    },
                    None if ip.is_some() => Decision::Refuse(format!(
                        "{host} is an IP address the allowlist does not list"
                    )),
                    None => Decision::Refuse(format!("{host} is not on this phase's allowlist")),
                }
            }
        }
    }

    /// Decides on one address the host resolved to (or its literal): loopback, link-local,
    /// private and other non-public addresses only when the task named the host exactly or
    /// listed the address, so a wildcard name cannot be pointed at the host's own services.
    pub fn decide_address(&self, host_decision: &Decision, ip: IpAddr) -> Decision {
        let Decision::Allow { trusted_addresses } = host_decision else {
            return host_decision.clone();
        };
        let listed = matches!(self, Policy::Allow(list) if list.is_listed_address(ip));
        if is_restricted(ip) && !trusted_addresses && !listed {
            return Decision::Refuse(format!(
                "{ip} is a loopback, link-local or private address the task does not list"
            ));
        }
        host_decision.clone()
    }
}

fn strip_brackets(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// Addresses that are not the public internet: the host's own and its networks'.
fn is_restricted(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_restricted_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_restricted_v4(v4),
            None => is_restricted_v6(v6),
        },
    }
}

fn is_restricted_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
        || a >= 240
}

fn is_restricted_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(hosts: &[&str]) -> Policy {
        let hosts: Vec<String> = hosts.iter().map(|h| (*h).to_owned()).collect();
        Policy::Allow(Allowlist::parse(&hosts).unwrap())
    }

    fn allowed(decision: &Decision) -> bool {
        matches!(decision, Decision::Allow { .. })
    }

    #[test]
    fn exact_names_wildcards_and_literals_match_as_harbor_defines_them() {
        let policy = allow(&["PyPI.org.", "*.iana.org", "10.1.2.3"]);
        assert!(allowed(&policy.decide_host("pypi.org")));
        assert!(allowed(&policy.decide_host("PYPI.ORG.")));
        assert!(!allowed(&policy.decide_host("files.pypi.org")));
        assert!(allowed(&policy.decide_host("www.iana.org")));
        assert!(allowed(&policy.decide_host("a.b.iana.org")));
        assert!(
            !allowed(&policy.decide_host("iana.org")),
            "*. needs a label"
        );
        assert!(!allowed(&policy.decide_host("eviliana.org")));
        assert!(allowed(&policy.decide_host("10.1.2.3")));
        assert!(!allowed(&policy.decide_host("10.1.2.4")));
        assert!(!allowed(&policy.decide_host("93.184.216.34")));
        assert!(!allowed(&policy.decide_host("github.com")));
    }

    #[test]
    fn restricted_addresses_need_an_exact_name_or_a_listed_literal() {
        let policy = allow(&["local.test", "*.wild.test", "127.0.0.1"]);
        let exact = policy.decide_host("local.test");
        let wild = policy.decide_host("x.wild.test");
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let private: IpAddr = "192.168.1.1".parse().unwrap();
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        assert!(allowed(&policy.decide_address(&exact, private)));
        assert!(!allowed(&policy.decide_address(&wild, private)));
        assert!(
            allowed(&policy.decide_address(&wild, loopback)),
            "listed literal"
        );
        assert!(allowed(&policy.decide_address(&wild, public)));
        let open = Policy::Open.decide_host("anything.example");
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "169.254.169.254",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "100.64.0.1",
            "0.0.0.0",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(!allowed(&Policy::Open.decide_address(&open, ip)), "{ip}");
        }
        assert!(allowed(&Policy::Open.decide_address(&open, public)));
        assert!(!allowed(&Policy::Closed.decide_host("pypi.org")));
    }

    #[test]
    fn bad_entries_are_refused_with_the_entry_named() {
        assert!(Allowlist::parse(&[]).is_err());
        for bad in [
            "https://pypi.org",
            "pypi.org:443",
            "*.",
            "a..b",
            "-x.org",
            "*x.org",
            "x.org/path",
        ] {
            let err = Allowlist::parse(&[bad.to_owned()]).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
    }
}
