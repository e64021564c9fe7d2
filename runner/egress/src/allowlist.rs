//! Which hosts, ports and addresses a phase may reach: Harbor's `allowed_hosts` patterns (an
//! exact name, `*.suffix`, or an IP literal), optionally with a port (`host:port`, runner's
//! own addition: Harbor's task validation refuses ports, so task entries never carry one), and
//! the rules that keep the host's own network out of reach.
//!
//! Ports: a listed host is reached on the ports its scheme implies (80 and 443) and on any port
//! an entry (or a pin of the resolver, `name:port=ip`) names for it; an address that is
//! loopback, link-local or private only on a named port, so a name pinned to `127.0.0.1` for
//! one service does not open every service of the host.

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

/// One `allowed_hosts` entry: its host pattern and the port it names, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Which hosts the entry covers.
    pub pattern: HostPattern,
    /// `host:port`: this port is listed for the host (beyond 80 and 443, and on restricted
    /// addresses).
    pub port: Option<u16>,
}

/// The ports a listed host is reached on without naming them: what `http://` and `https://`
/// imply.
pub const SCHEME_PORTS: [u16; 2] = [80, 443];

/// A phase's allowed hosts; never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowlist {
    entries: Vec<Entry>,
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
        /// The port asked for is named for this host (an entry's `host:port` or a pin's
        /// `name:port=ip`), so it may be reached on a restricted address too.
        port_listed: bool,
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
    /// An entry is neither a host name, a `*.suffix` pattern nor an IP address, with or
    /// without a `:port` (a URL or a path in it, a malformed label, a bad port).
    #[error(
        "{0:?} is not a host name, a `*.suffix` pattern or an IP address (with an optional :port)"
    )]
    BadEntry(String),
}

impl Entry {
    /// Parses one `allowed_hosts` entry (`host`, `host:port`, `[v6]:port`, a bare IPv6
    /// address); `Err` says what is wrong with it.
    pub fn parse(entry: &str) -> Result<Entry, AllowlistError> {
        let bad = || AllowlistError::BadEntry(entry.to_owned());
        let text = entry.trim();
        if text.parse::<IpAddr>().is_ok() {
            return Ok(Entry {
                pattern: HostPattern::parse(text).map_err(|_| bad())?,
                port: None,
            });
        }
        let (host, port) = match text.strip_prefix('[') {
            Some(rest) => {
                let (v6, after) = rest.split_once(']').ok_or_else(bad)?;
                match after.strip_prefix(':') {
                    Some(port) => (v6, Some(port)),
                    None if after.is_empty() => (v6, None),
                    None => return Err(bad()),
                }
            }
            None => match text.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (text, None),
            },
        };
        let port = match port {
            Some(port) => Some(
                port.parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(bad)?,
            ),
            None => None,
        };
        Ok(Entry {
            pattern: HostPattern::parse(host).map_err(|_| bad())?,
            port,
        })
    }
}

/// A host as the proxy compares it: lower case, without the trailing dot of a fully
/// qualified name (`ALLOWED.TEST.` is `allowed.test`, for the policy and for the pins alike).
pub fn normalise_host(host: &str) -> String {
    host.trim().trim_end_matches('.').to_ascii_lowercase()
}

impl HostPattern {
    /// Parses one `allowed_hosts` host (no port); `Err` says what is wrong with it.
    pub fn parse(entry: &str) -> Result<HostPattern, AllowlistError> {
        let host = normalise_host(entry);
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
        let entries = entries
            .iter()
            .map(|e| Entry::parse(e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Allowlist { entries })
    }

    /// The entries, in the task's order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn is_listed_address(&self, ip: IpAddr) -> bool {
        self.entries
            .iter()
            .any(|e| e.pattern == HostPattern::Ip(ip))
    }
}

impl Policy {
    /// Decides on a request's host (a name or an IP literal) and port before the host is
    /// resolved. `pinned_port`: the resolver's pin for the host names this port.
    pub fn decide_host(&self, host: &str, port: u16, pinned_port: bool) -> Decision {
        let host = normalise_host(host);
        let ip = strip_brackets(&host).parse::<IpAddr>().ok();
        let list = match self {
            Policy::Closed => return Decision::Refuse("this phase has no network".into()),
            Policy::Open => {
                return Decision::Allow {
                    trusted_addresses: false,
                    port_listed: pinned_port,
                };
            }
            Policy::Allow(list) => list,
        };
        let matching: Vec<&Entry> = list
            .entries
            .iter()
            .filter(|e| e.pattern.matches(&host, ip))
            .collect();
        if matching.is_empty() {
            return Decision::Refuse(match ip {
                Some(_) => format!("{host} is an IP address the allowlist does not list"),
                None => format!("{host} is not on this phase's allowlist"),
            });
        }
        let port_listed = pinned_port || matching.iter().any(|e| e.port == Some(port));
        if !port_listed && !SCHEME_PORTS.contains(&port) {
            return Decision::Refuse(format!(
                "port {port} of {host}: a listed host is reached on 80 and 443, or on a port \
                 listed for it (host:port)"
            ));
        }
        let trusted_addresses = matching
            .iter()
            .any(|e| !matches!(e.pattern, HostPattern::Wildcard(_)));
        Decision::Allow {
            trusted_addresses,
            port_listed,
        }
    }

    /// Decides on one address the host resolved to (or its literal): loopback, link-local,
    /// private and other non-public addresses only when the task named the host exactly or
    /// listed the address, so a wildcard name cannot be pointed at the host's own services.
    pub fn decide_address(&self, host_decision: &Decision, ip: IpAddr) -> Decision {
        let Decision::Allow {
            trusted_addresses,
            port_listed,
        } = host_decision
        else {
            return host_decision.clone();
        };
        if !is_restricted(ip) {
            return host_decision.clone();
        }
        let listed = matches!(self, Policy::Allow(list) if list.is_listed_address(ip));
        if !trusted_addresses && !listed {
            return Decision::Refuse(format!(
                "{ip} is a loopback, link-local or private address the task does not list"
            ));
        }
        // The host's own services: only the one the entry or the pin names.
        if !port_listed {
            return Decision::Refuse(format!(
                "{ip} is a loopback, link-local or private address, reached only on a port \
                 listed for the host (host:port, or a pin's name:port=ip)"
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

    /// The decision for `host` on 443, unpinned.
    fn https(policy: &Policy, host: &str) -> Decision {
        policy.decide_host(host, 443, false)
    }

    #[test]
    fn exact_names_wildcards_and_literals_match_as_harbor_defines_them() {
        let policy = allow(&["PyPI.org.", "*.iana.org", "10.1.2.3"]);
        assert!(allowed(&https(&policy, "pypi.org")));
        assert!(allowed(&https(&policy, "PYPI.ORG.")));
        assert!(!allowed(&https(&policy, "files.pypi.org")));
        assert!(allowed(&https(&policy, "www.iana.org")));
        assert!(allowed(&https(&policy, "A.B.Iana.Org.")));
        assert!(!allowed(&https(&policy, "iana.org")), "*. needs a label");
        assert!(!allowed(&https(&policy, "eviliana.org")));
        assert!(allowed(&https(&policy, "10.1.2.3")));
        assert!(!allowed(&https(&policy, "10.1.2.4")));
        assert!(!allowed(&https(&policy, "93.184.216.34")));
        assert!(!allowed(&https(&policy, "github.com")));
    }

    #[test]
    fn a_listed_host_is_reached_on_80_443_and_the_ports_listed_for_it() {
        let policy = allow(&["web.test", "api.test:8443", "*.wild.test:9000"]);
        for (host, port, expected) in [
            ("web.test", 80, true),
            ("web.test", 443, true),
            ("web.test", 22, false),
            ("web.test", 8080, false),
            ("api.test", 8443, true),
            ("api.test", 443, true),
            ("api.test", 8444, false),
            ("x.wild.test", 9000, true),
            ("x.wild.test", 9001, false),
        ] {
            assert_eq!(
                allowed(&policy.decide_host(host, port, false)),
                expected,
                "{host}:{port}"
            );
        }
        assert!(
            allowed(&policy.decide_host("web.test", 8080, true)),
            "a pin naming the port lists it"
        );
        // Public phases reach any port of a public address.
        assert!(allowed(&Policy::Open.decide_host("x.example", 8080, false)));
    }

    #[test]
    fn restricted_addresses_need_an_exact_name_or_a_listed_literal_and_a_listed_port() {
        let policy = allow(&["local.test", "svc.test:8080", "*.wild.test", "127.0.0.1"]);
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let private: IpAddr = "192.168.1.1".parse().unwrap();
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        let decide = |host: &str, port: u16, pinned: bool, ip: IpAddr| {
            allowed(&policy.decide_address(&policy.decide_host(host, port, pinned), ip))
        };
        // An exact name pinned to a restricted address: only a port listed for it.
        assert!(!decide("local.test", 443, false, private));
        assert!(decide("local.test", 5000, true, loopback), "pinned port");
        assert!(!decide("local.test", 80, false, loopback));
        assert!(decide("svc.test", 8080, false, loopback), "entry port");
        assert!(!decide("svc.test", 22, false, loopback));
        assert!(!decide("svc.test", 443, false, loopback));
        assert!(decide("svc.test", 443, false, public));
        // A wildcard never reaches a restricted address it does not list.
        assert!(!decide("x.wild.test", 9999, true, private));
        assert!(
            decide("x.wild.test", 9999, true, loopback),
            "listed literal"
        );
        assert!(!decide("x.wild.test", 443, false, loopback));
        assert!(decide("x.wild.test", 443, false, public));
        let open = Policy::Open.decide_host("anything.example", 443, true);
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
        assert!(!allowed(
            &Policy::Closed.decide_host("pypi.org", 443, false)
        ));
    }

    #[test]
    fn entries_with_ports_parse_and_bad_entries_are_refused_with_the_entry_named() {
        let list = Allowlist::parse(&[
            "Svc.Test.:8080".to_owned(),
            "[::1]:9000".to_owned(),
            "::1".to_owned(),
            "10.0.0.1:80".to_owned(),
        ])
        .unwrap();
        let ports: Vec<Option<u16>> = list.entries().iter().map(|e| e.port).collect();
        assert_eq!(ports, [Some(8080), Some(9000), None, Some(80)]);
        assert_eq!(
            list.entries()[0].pattern,
            HostPattern::Exact("svc.test".into())
        );
        assert!(Allowlist::parse(&[]).is_err());
        for bad in [
            "https://pypi.org",
            "pypi.org:0",
            "pypi.org:x",
            "pypi.org:",
            "*.",
            "a..b",
            "-x.org",
            "*x.org",
            "x.org/path",
            "[::1",
        ] {
            let err = Allowlist::parse(&[bad.to_owned()]).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }
}
