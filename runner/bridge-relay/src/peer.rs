//! `serve --peer-cgroup`: a connection is relayed only when every process that holds its other
//! end is in the relay's own cgroup.
//!
//! The verifier jail's relay (started by the jail's helper, `runner/docker-backend/contain/egress.rs`)
//! listens on the trial's loopback, which the processes the agent left running share: they can
//! read its port from `/proc/net/tcp` and connect. The jail is a container of its own, so its
//! processes (the helper, this relay, the tests and whatever they start) are in the jail's
//! cgroup, and the agent's are in the trial container's; a process cannot move itself into
//! another container's cgroup (the cgroup filesystem is read-only in a container). So the
//! relay finds the client's socket in `/proc/self/net/tcp` by its two ports, the processes
//! holding that socket through `/proc/<pid>/fd`, and compares each one's `/proc/<pid>/cgroup`
//! with its own. It needs `CAP_SYS_PTRACE` and `CAP_DAC_READ_SEARCH` to read other users'
//! descriptors; holding them also keeps every trial process (which has neither) out of its
//! `/proc/<pid>/{root,fd,mem}`.

use std::fs;
use std::net::{SocketAddr, TcpStream};

/// Why a connection is not relayed (written to the relay's log, never to the client).
pub fn check(client: &TcpStream) -> Result<(), String> {
    let peer = client
        .peer_addr()
        .map_err(|e| format!("peer address: {e}"))?;
    let local = client
        .local_addr()
        .map_err(|e| format!("local address: {e}"))?;
    let table = match peer {
        SocketAddr::V4(_) => "/proc/self/net/tcp",
        SocketAddr::V6(_) => "/proc/self/net/tcp6",
    };
    let text = fs::read_to_string(table).map_err(|e| format!("{table}: {e}"))?;
    // The client's own socket: its local end is our peer, its remote end is us.
    let inode = socket_inode(&text, peer, local)
        .ok_or_else(|| format!("the socket of {peer} is not in {table}"))?;
    let holders = holders_of(inode);
    if holders.is_empty() {
        return Err(format!(
            "no process holds the socket of {peer} (inode {inode})"
        ));
    }
    let own = fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("own cgroup: {e}"))?;
    for pid in holders {
        let theirs = fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        if theirs != own {
            return Err(format!(
                "{peer} is held by pid {pid}, outside the relay's cgroup (not one of the tests' processes)"
            ));
        }
    }
    Ok(())
}

/// The inode of the socket whose local address is `local` and remote address `remote`, in the
/// text of `/proc/net/tcp` or `tcp6`.
pub fn socket_inode(table: &str, local: SocketAddr, remote: SocketAddr) -> Option<u64> {
    let (local, remote) = (proc_address(local), proc_address(remote));
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let matches = fields
            .get(1)
            .is_some_and(|l| l.eq_ignore_ascii_case(&local))
            && fields
                .get(2)
                .is_some_and(|r| r.eq_ignore_ascii_case(&remote));
        matches.then(|| fields.get(9)?.parse().ok()).flatten()
    })
}

/// An address as `/proc/net/tcp` prints it: the address's bytes as the kernel's native-endian
/// 32-bit words in hex, then the port in hex.
pub fn proc_address(address: SocketAddr) -> String {
    let words: Vec<u8> = match address {
        SocketAddr::V4(v4) => v4.ip().octets().to_vec(),
        SocketAddr::V6(v6) => v6.ip().octets().to_vec(),
    };
    let hex: String = words
        .chunks(4)
        .map(|word| {
            let value = u32::from_ne_bytes([word[0], word[1], word[2], word[3]]);
            format!("{value:08X}")
        })
        .collect();
    format!("{hex}:{:04X}", address.port())
}

/// Every process with a descriptor on socket `inode` (those whose descriptors cannot be read
/// count as none: the check then fails closed, since the client is then not found at all).
pub fn holders_of(inode: u64) -> Vec<u32> {
    let wanted = format!("socket:[{inode}]");
    let Ok(processes) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    processes
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
                return false;
            };
            fds.filter_map(Result::ok).any(|fd| {
                fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == wanted.as_str())
            })
        })
        .collect()
}
