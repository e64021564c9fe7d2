//! Name resolution on the proxy's side: the host's resolver, or fixed answers for names an
//! operator (or a test) pins, the way `curl --resolve` does.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr};

/// Why a `RUNNER_EGRESS_RESOLVE` spec cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// An entry has no `=` between the name and the address.
    #[error("{0:?} is not name=ip")]
    NotNameEqualsIp(String),
    /// The part after `=` is not an IPv4 or IPv6 address.
    #[error("{pin:?}: {ip:?} is not an IP address")]
    BadAddress {
        /// The whole `name=ip` entry.
        pin: String,
        /// The text that should have been an address.
        ip: String,
        /// Why it is not one.
        #[source]
        source: std::net::AddrParseError,
    },
}

/// Resolves the names requests ask for. Pinned names never reach the system resolver.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    pinned: BTreeMap<String, Vec<IpAddr>>,
}

impl Resolver {
    /// The host's resolver for every name.
    pub fn system() -> Resolver {
        Resolver::default()
    }

    /// Parses `name=ip[,name=ip…]` (a name may be given several times for several addresses),
    /// the format of `RUNNER_EGRESS_RESOLVE`.
    pub fn parse_pins(spec: &str) -> Result<Resolver, PinError> {
        let mut resolver = Resolver::system();
        for pin in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, ip) = pin
                .split_once('=')
                .ok_or_else(|| PinError::NotNameEqualsIp(pin.to_owned()))?;
            let ip = ip
                .trim()
                .parse::<IpAddr>()
                .map_err(|source| PinError::BadAddress {
                    pin: pin.to_owned(),
                    ip: ip.to_owned(),
                    source,
                })?;
            resolver.pin(name.trim(), ip);
        }
        Ok(resolver)
    }

    /// Answers `name` with `ip` (added to earlier pins of the same name).
    pub fn pin(&mut self, name: &str, ip: IpAddr) {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        self.pinned.entry(name).or_default().push(ip);
    }

    /// The addresses of `host` (an IP literal is its own answer).
    pub async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        if let Some(ips) = self.pinned.get(host) {
            return Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect());
        }
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pinned_names_and_literals_resolve_without_the_system() {
        let resolver = Resolver::parse_pins("allowed.test=127.0.0.1, Allowed.test.=::1").unwrap();
        let addrs = resolver.resolve("allowed.test", 80).await.unwrap();
        assert_eq!(addrs.len(), 2);
        assert_eq!(addrs[0].to_string(), "127.0.0.1:80");
        let literal = resolver.resolve("10.0.0.1", 443).await.unwrap();
        assert_eq!(literal[0].to_string(), "10.0.0.1:443");
        assert!(
            Resolver::parse_pins("x.test")
                .unwrap_err()
                .to_string()
                .contains("name=ip")
        );
        assert!(
            Resolver::parse_pins("x.test=nope")
                .unwrap_err()
                .to_string()
                .contains("nope")
        );
    }
}
