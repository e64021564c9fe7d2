//! Name resolution on the proxy's side: the host's resolver, or fixed answers for names an
//! operator (or a test) pins, the way `curl --resolve` does. A pin may name the service's port
//! (`name:port=ip`, as `curl --resolve host:port:addr`): that port is then listed for the name
//! (the only way to reach a name pinned to a loopback or private address, whose other ports
//! are the host's own services).

use std::collections::{BTreeMap, BTreeSet};

use crate::allowlist::normalise_host;
use std::io;
use std::net::{IpAddr, SocketAddr};

/// Why a `RUNNER_EGRESS_RESOLVE` spec cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// An entry has no `=` between the name and the address.
    #[error("{0:?} is not name=ip or name:port=ip")]
    NotNameEqualsIp(String),
    /// The port of a `name:port=ip` entry is not a number from 1 to 65535.
    #[error("{0:?}: bad port")]
    BadPort(String),
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
    /// The ports pins name, by name.
    ports: BTreeMap<String, BTreeSet<u16>>,
}

impl Resolver {
    /// The host's resolver for every name.
    pub fn system() -> Resolver {
        Resolver::default()
    }

    /// Parses `name[:port]=ip[,…]` (a name may be given several times for several addresses
    /// or ports), the format of `RUNNER_EGRESS_RESOLVE`.
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
            let (name, port) = match name.trim().rsplit_once(':') {
                Some((name, port)) => {
                    let port = port
                        .parse::<u16>()
                        .ok()
                        .filter(|p| *p != 0)
                        .ok_or_else(|| PinError::BadPort(pin.to_owned()))?;
                    (name, Some(port))
                }
                None => (name.trim(), None),
            };
            resolver.pin(name, ip);
            if let Some(port) = port {
                resolver.list_port(name, port);
            }
        }
        Ok(resolver)
    }

    /// Answers `name` with `ip` (added to earlier pins of the same name).
    pub fn pin(&mut self, name: &str, ip: IpAddr) {
        let ips = self.pinned.entry(normalise_host(name)).or_default();
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }

    /// Lists `port` for the pinned `name`: the proxy lets the name reach it, on its pinned
    /// (possibly loopback or private) address too.
    pub fn list_port(&mut self, name: &str, port: u16) {
        self.ports
            .entry(normalise_host(name))
            .or_default()
            .insert(port);
    }

    /// True when a pin of `host` names `port`.
    pub fn pinned_port(&self, host: &str, port: u16) -> bool {
        self.ports
            .get(&normalise_host(host))
            .is_some_and(|ports| ports.contains(&port))
    }

    /// The addresses of `host` (an IP literal is its own answer). The name is normalised (case,
    /// trailing dot) first, so `ALLOWED.TEST.` takes `allowed.test`'s pin and never asks the
    /// host's resolver instead.
    pub async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let host = normalise_host(host);
        if let Some(ips) = self.pinned.get(&host) {
            return Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect());
        }
        Ok(tokio::net::lookup_host((host.as_str(), port))
            .await?
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pinned_names_and_literals_resolve_without_the_system() {
        let resolver =
            Resolver::parse_pins("allowed.test=127.0.0.1, Allowed.test.:8080=::1").unwrap();
        let addrs = resolver.resolve("allowed.test", 80).await.unwrap();
        assert_eq!(addrs.len(), 2);
        assert_eq!(addrs[0].to_string(), "127.0.0.1:80");
        // Case and the trailing dot are the same name: the pin answers, not the system.
        let dotted = resolver.resolve("ALLOWED.TEST.", 80).await.unwrap();
        assert_eq!(dotted, addrs);
        assert!(resolver.pinned_port("ALLOWED.test.", 8080));
        assert!(!resolver.pinned_port("allowed.test", 22));
        assert!(
            Resolver::parse_pins("x.test:0=127.0.0.1")
                .unwrap_err()
                .to_string()
                .contains("bad port")
        );
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
