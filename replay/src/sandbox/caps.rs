//! The runner's capabilities: none, and no way back to them.
//!
//! A runner started by root holds root's capabilities: with them a kernel
//! could set the host name, make device nodes, read the kernel log or
//! pass `reboot`'s check, and a file owned by root would be no obstacle.
//! [`drop_all`] takes every one away before the image is loaded, in the
//! order the kernel requires (each step but the last needs
//! `CAP_SETPCAP`, which the last takes away):
//! 1. the securebits `SECBIT_NOROOT`, `SECBIT_NO_SETUID_FIXUP` and
//!    `SECBIT_NO_CAP_AMBIENT_RAISE`, each locked, and `SECBIT_KEEP_CAPS`
//!    locked: an `execve` as uid 0 grants nothing;
//! 2. the bounding set emptied (`PR_CAPBSET_DROP` of every capability
//!    the kernel knows: it answers `EINVAL` past its last one,
//!    `/proc/sys/kernel/cap_last_cap`);
//! 3. the ambient set cleared;
//! 4. the effective, permitted and inheritable sets cleared (`capset`).
//!
//! A process without `CAP_SETPCAP` (any user but root) can do neither 1
//! nor 2, and needs neither: it holds no capability to lose, and under
//! `no_new_privs` an `execve` grants none (the kernel caps what it gains
//! at what it had), which the seccomp filter forbids anyway.
//!
//! Capabilities belong to a thread: the runner drops them with one
//! thread running, and [`drop_all`] checks every thread of the process
//! (`/proc/self/task`), failing if any still holds one.

use std::io;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const VERSION_3: u32 = 0x2008_0522;
/// linux/capability.h (the libc crate does not have it).
const CAP_SETPCAP: u32 = 8;

/// `SECBIT_NOROOT`, `SECBIT_NO_SETUID_FIXUP`, `SECBIT_NO_CAP_AMBIENT_RAISE`
/// and their locks, and `SECBIT_KEEP_CAPS_LOCKED` (linux/securebits.h).
pub const SECUREBITS: libc::c_ulong = 0b1110_1111;

#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// This thread's effective, permitted and inheritable sets.
fn get() -> io::Result<[Data; 2]> {
    let mut h = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: version 3 reads two `Data` words into `d`, which has them.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) };
    if r == 0 {
        Ok(d)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn any(d: &[Data; 2]) -> bool {
    d.iter()
        .any(|s| s.effective | s.permitted | s.inheritable != 0)
}

fn prctl(op: libc::c_int, a: libc::c_ulong, b: libc::c_ulong) -> io::Result<libc::c_int> {
    // SAFETY: the capability prctl operations take integers only.
    let r = unsafe { libc::prctl(op, a, b, 0 as libc::c_ulong, 0 as libc::c_ulong) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Drop every capability of this thread for good, then check that no
/// thread of the process holds one (see the module comment). Every step
/// is tried even when one before failed (as much as can go goes); the
/// error says the first that failed.
pub fn drop_all() -> Result<(), String> {
    let mut failed: Option<String> = None;
    let mut fail = |what: String| {
        failed.get_or_insert(what);
    };
    let setpcap = match get() {
        Ok(held) => held[0].effective & (1 << CAP_SETPCAP) != 0,
        Err(e) => {
            fail(format!("reading the capabilities: {e}"));
            false
        }
    };
    if setpcap {
        match prctl(libc::PR_GET_SECUREBITS, 0, 0).and_then(|bits| {
            prctl(
                libc::PR_SET_SECUREBITS,
                bits as libc::c_ulong | SECUREBITS,
                0,
            )
        }) {
            Ok(_) => {}
            Err(e) => fail(format!("locking the securebits: {e}")),
        }
        for cap in 0..64 {
            match prctl(libc::PR_CAPBSET_DROP, cap, 0) {
                Ok(_) => {}
                // Past the kernel's last capability.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
                Err(e) => fail(format!(
                    "dropping capability {cap} from the bounding set: {e}"
                )),
            }
        }
    }
    match prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
        0,
    ) {
        // EINVAL: a kernel before 4.3, which has no ambient set.
        Err(e) if e.raw_os_error() != Some(libc::EINVAL) => {
            fail(format!("clearing the ambient capabilities: {e}"))
        }
        _ => {}
    }
    let mut h = Header {
        version: VERSION_3,
        pid: 0,
    };
    let none = [Data::default(); 2];
    // SAFETY: version 3 reads two `Data` words from `none`.
    if unsafe { libc::syscall(libc::SYS_capset, &mut h, none.as_ptr()) } != 0 {
        fail(format!(
            "clearing the capability sets: {}",
            io::Error::last_os_error()
        ));
    }
    if get().map(|d| any(&d)).unwrap_or(true) {
        fail("this thread still holds capabilities".into());
    }
    if let Err(e) = check_threads(setpcap) {
        fail(e);
    }
    failed.map_or(Ok(()), Err)
}

/// Check every thread's sets in `/proc/self/task/*/status` (the bounding
/// set too when it could be dropped); without `/proc`, only this thread
/// was checked, by [`drop_all`].
fn check_threads(bounding: bool) -> Result<(), String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Ok(());
    };
    for t in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            continue; // a thread that ended meanwhile
        };
        if let Some(set) = held_in(&status, bounding) {
            return Err(format!(
                "thread {} still holds capabilities ({set})",
                t.file_name().to_string_lossy()
            ));
        }
    }
    Ok(())
}

/// The first capability set of a `/proc/PID/status` text that is not
/// empty (`CapBnd` only when `bounding`).
fn held_in(status: &str, bounding: bool) -> Option<&'static str> {
    let sets: &[&'static str] = if bounding {
        &["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]
    } else {
        &["CapInh", "CapPrm", "CapEff", "CapAmb"]
    };
    sets.iter().copied().find(|set| {
        status.lines().any(|l| {
            l.strip_prefix(*set)
                .and_then(|v| v.strip_prefix(':'))
                .is_some_and(|v| u64::from_str_radix(v.trim(), 16) != Ok(0))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_with_any_capability_is_held() {
        let none = "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n\
                    CapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\n\
                    CapAmb:\t0000000000000000\n";
        assert_eq!(held_in(none, false), None);
        assert_eq!(held_in(none, true), Some("CapBnd"));
        let eff = none.replace("CapEff:\t0000000000000000", "CapEff:\t0000000000200000");
        assert_eq!(held_in(&eff, false), Some("CapEff"));
    }
}
