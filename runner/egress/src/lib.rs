//! The egress proxy behind a task's network allowlist (`network_mode = "allowlist"` with
//! `allowed_hosts`).
//!
//! A container in an allowlist phase has no route out. Its one way out is this proxy, which
//! runs on the host and listens on a unix socket that the engine bind-mounts into the container
//! beside the static relay (`bridge-relay`) that turns `127.0.0.1:<port>` inside into that
//! socket; the container's `HTTP_PROXY`/`HTTPS_PROXY` point there. So nothing listens on a host
//! network address, and tools that ignore proxies simply cannot connect.
//!
//! The proxy speaks the two things HTTP proxies are asked for: `CONNECT host:port` (HTTPS and
//! anything tunnelled) and plain HTTP requests in absolute form (`GET http://host/path`). It
//! resolves names itself, so DNS from the container is never needed, and checks every address
//! it would connect to ([`Allowlist::decide`]). Each attempt, allowed or refused, is one JSON
//! line in the current phase's log; bodies are never recorded.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use egress::{Allowlist, EgressProxy, Policy, Resolver, Side};
//! let (agent, tests) = (tempfile::tempdir()?, tempfile::tempdir()?);
//! let proxy = EgressProxy::start(agent.path(), tests.path(), Resolver::system()).await?;
//! let hosts = Allowlist::parse(&["pypi.org".into(), "*.pythonhosted.org".into()]).unwrap();
//! let log = Some("trial/agent/network.jsonl".into());
//! proxy.set_phase(Side::Agent, "agent", Policy::Allow(hosts), log);
//! // bind-mount proxy.socket_dir(Side::Agent) into the container, start the relay, run the
//! // agent; proxy.socket_dir(Side::Verifier) goes only where the tests run ...
//! let counts = proxy.counts();
//! # Ok(()) }
//! ```

mod allowlist;
mod attempt_log;
mod proxy;
mod request;
mod resolver;

pub use allowlist::{
    Allowlist, AllowlistError, Decision, Entry, HostPattern, Policy, SCHEME_PORTS, normalise_host,
};
pub use attempt_log::{Attempt, PhaseCounts};
pub use proxy::{EgressProxy, SOCKET_FILE_NAME, Side};
pub use resolver::{PinError, Resolver};
