//! The runner's system-call policy (seccomp, through `seccompiler`).
//!
//! Everything is allowed but, failing with EPERM:
//! * new sockets (`socket`, `socketpair`) and `connect`: the runner
//!   already holds its control socket, the only one it needs; `io_uring`
//!   too, whose requests would open sockets and files past this filter;
//! * new processes and programs: `fork`, `vfork`, `clone` without
//!   `CLONE_THREAD` (threads are fine), `execve`, `execveat`; `clone3`,
//!   whose flags a filter cannot read, fails with ENOSYS so that glibc
//!   creates its threads with `clone`;
//! * other processes: `ptrace`, `process_vm_readv/writev`, the `pidfd`
//!   calls, and `kill`, `tgkill`, `rt_sigqueueinfo`, `rt_tgsigqueueinfo`
//!   unless they name this process (libomp and glibc signal their own
//!   threads with `tgkill(getpid(), ...)`), `tkill` always;
//! * namespaces, mounts, keyrings and BPF: `unshare`, `setns`, `mount`,
//!   `umount2`, `pivot_root`, `chroot`, `keyctl`, `add_key`,
//!   `request_key`, `bpf`, `perf_event_open`.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Whether this kernel installs seccomp filters.
pub fn available() -> bool {
    // SAFETY: a query without side effects.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

/// Denied outright.
const DENIED: &[libc::c_long] = &[
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_connect,
    libc::SYS_io_uring_setup,
    libc::SYS_fork,
    libc::SYS_vfork,
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_send_signal,
    libc::SYS_pidfd_getfd,
    libc::SYS_tkill,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
];

/// Signal calls whose first argument must be this process.
const SIGNALS: &[libc::c_long] = &[
    libc::SYS_kill,
    libc::SYS_tgkill,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_tgsigqueueinfo,
];

type Error = Box<dyn std::error::Error>;

fn arch() -> Result<TargetArch, Error> {
    Ok(std::env::consts::ARCH.try_into()?)
}

/// The EPERM filter, for process `pid`.
fn eperm_filter(pid: libc::pid_t) -> Result<BpfProgram, Error> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in DENIED {
        rules.insert(nr, vec![]);
    }
    let other = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, pid as u64)?;
    for &nr in SIGNALS {
        rules.insert(nr, vec![SeccompRule::new(vec![other.clone()])?]);
    }
    let not_thread = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
        0,
    )?;
    rules.insert(libc::SYS_clone, vec![SeccompRule::new(vec![not_thread])?]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch()?,
    )?;
    Ok(filter.try_into()?)
}

/// The ENOSYS filter for `clone3`.
fn enosys_filter() -> Result<BpfProgram, Error> {
    let rules = BTreeMap::from([(libc::SYS_clone3, vec![])]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch()?,
    )?;
    Ok(filter.try_into()?)
}

/// The two compiled filters, for this process.
pub struct Filters {
    eperm: BpfProgram,
    enosys: BpfProgram,
}

/// Compile the filters for this process (its pid is in them).
pub fn prepare() -> Result<Filters, Error> {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    Ok(Filters {
        eperm: eperm_filter(pid)?,
        enosys: enosys_filter()?,
    })
}

/// Install both filters on every thread of this process (the offload
/// runtime may have started threads of its own already).
pub fn enforce(f: &Filters) -> Result<(), Error> {
    seccompiler::apply_filter_all_threads(&f.enosys)?;
    seccompiler::apply_filter_all_threads(&f.eperm)?;
    Ok(())
}
