//! The few libc calls std does not wrap.
use std::os::raw::{c_char, c_int, c_long, c_uint, c_ulong, c_void};

pub const CLONE_NEWNS: c_int = 0x0002_0000;
pub const CLONE_NEWUTS: c_int = 0x0400_0000;
pub const CLONE_NEWIPC: c_int = 0x0800_0000;
pub const MS_RDONLY: c_ulong = 1;
pub const MS_NOSUID: c_ulong = 2;
pub const MS_NODEV: c_ulong = 4;
pub const MS_REMOUNT: c_ulong = 32;
pub const MS_BIND: c_ulong = 4096;
pub const MS_REC: c_ulong = 16384;
pub const MS_PRIVATE: c_ulong = 1 << 18;
pub const PR_CAPBSET_DROP: c_int = 24;
pub const PR_SET_SECUREBITS: c_int = 28;
/// `setuid` and friends leave the capability sets alone (`capabilities(7)`, securebits).
pub const SECBIT_NO_SETUID_FIXUP: c_ulong = 1 << 2;
pub const SECBIT_NO_SETUID_FIXUP_LOCKED: c_ulong = 1 << 3;
pub const PR_CAP_AMBIENT: c_int = 47;
pub const PR_CAP_AMBIENT_RAISE: c_ulong = 2;
pub const PR_CAP_AMBIENT_CLEAR_ALL: c_ulong = 4;
pub const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
pub const SYS_OPEN_TREE: c_long = 428;
pub const SYS_MOVE_MOUNT: c_long = 429;
pub const OPEN_TREE_CLONE: c_uint = 1;
pub const OPEN_TREE_CLOEXEC: c_uint = 0o2000000;
pub const AT_FDCWD: c_int = -100;
pub const MOVE_MOUNT_F_EMPTY_PATH: c_uint = 4;

#[repr(C)]
pub struct CapHeader {
    pub version: u32,
    pub pid: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct CapData {
    pub effective: u32,
    pub permitted: u32,
    pub inheritable: u32,
}

unsafe extern "C" {
    pub fn setns(fd: c_int, nstype: c_int) -> c_int;
    pub fn unshare(flags: c_int) -> c_int;
    pub fn mount(
        source: *const c_char,
        target: *const c_char,
        fstype: *const c_char,
        flags: c_ulong,
        data: *const c_void,
    ) -> c_int;
    pub fn prctl(
        option: c_int,
        arg2: c_ulong,
        arg3: c_ulong,
        arg4: c_ulong,
        arg5: c_ulong,
    ) -> c_int;
    pub fn capset(header: *mut CapHeader, data: *const CapData) -> c_int;
    pub fn setgroups(size: usize, list: *const u32) -> c_int;
    pub fn setresgid(r: u32, e: u32, s: u32) -> c_int;
    pub fn setresuid(r: u32, e: u32, s: u32) -> c_int;
    pub fn setsid() -> c_int;
    pub fn kill(pid: c_int, sig: c_int) -> c_int;
    pub fn chroot(path: *const c_char) -> c_int;
    pub fn chdir(path: *const c_char) -> c_int;
    pub fn syscall(number: c_long, ...) -> c_long;
}
