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
//!   `request_key`, `bpf`, `perf_event_open`;
//! * what only a capability allows ([`PRIVILEGED`]: host name, kernel
//!   log, reboot, kernel modules, clocks, swap, accounting, quotas, file
//!   handles, I/O ports): the runner holds no capability (`caps`), and
//!   the filter says no before the kernel gets to ask;
//! * device nodes: `mknod` and `mknodat` of a character or block device
//!   (FIFOs, sockets and plain files are left to Landlock);
//! * calls that act on another process by its id ([`ON_A_PROCESS`]):
//!   `prlimit64` (with `RLIMIT_FSIZE` 0 on rrstore, rrstore would die of
//!   SIGXFSZ before its verdict), `setpriority`, `ioprio_set`, the
//!   `sched_set*` calls, `migrate_pages`, `move_pages`, unless the id is
//!   0 (the caller) or the runner's pid; `setpriority` and `ioprio_set`
//!   only for one process (never a group or a user: the user's is every
//!   process of the user); `kcmp`, `get_robust_list`,
//!   `process_madvise`, `process_mrelease` always. A filter can compare
//!   an argument with constants only, so it cannot tell this process'
//!   other threads (ids made after it was installed) from other
//!   processes: a thread may set its own affinity and priority (id 0,
//!   as libomp and glibc's `nice` do), not another thread's
//!   (`pthread_setaffinity_np` on another thread fails with EPERM).
//!   Calls that only read (`getpriority`, `sched_get*`) change nothing
//!   and are left.

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

/// Calls only a capability allows, denied outright.
const PRIVILEGED: &[libc::c_long] = &[
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_syslog,
    libc::SYS_reboot,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_iopl,
    libc::SYS_ioperm,
];

/// Calls on another process, denied outright.
const OTHER_PROCESS: &[libc::c_long] = &[
    libc::SYS_kcmp,
    libc::SYS_get_robust_list,
    libc::SYS_process_madvise,
    libc::SYS_process_mrelease,
];

/// Calls whose first argument is a process (or thread) id: allowed for 0
/// (the calling thread or process) and this process' pid only.
const ON_A_PROCESS: &[libc::c_long] = &[
    libc::SYS_prlimit64,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_setparam,
    libc::SYS_sched_setattr,
    libc::SYS_migrate_pages,
    libc::SYS_move_pages,
];

/// `setpriority`'s and `ioprio_set`'s `which` for one process
/// (`PRIO_PROCESS`, `IOPRIO_WHO_PROCESS`); their `who` is its id.
const PRIORITY_CALLS: &[(libc::c_long, u64)] = &[
    (libc::SYS_setpriority, libc::PRIO_PROCESS as u64),
    (libc::SYS_ioprio_set, 1),
];

/// `mknod` and `mknodat` and the argument holding their mode.
const MKNOD_CALLS: &[(libc::c_long, u8)] = &[(libc::SYS_mknod, 1), (libc::SYS_mknodat, 2)];

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
    for &nr in DENIED.iter().chain(PRIVILEGED).chain(OTHER_PROCESS) {
        rules.insert(nr, vec![]);
    }
    let ne = |arg, v: u64| SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, v);
    let other = ne(0, pid as u64)?;
    for &nr in SIGNALS {
        rules.insert(nr, vec![SeccompRule::new(vec![other.clone()])?]);
    }
    // Neither 0 nor this process.
    let not_self = |arg| -> Result<SeccompRule, Error> {
        Ok(SeccompRule::new(vec![ne(arg, 0)?, ne(arg, pid as u64)?])?)
    };
    for &nr in ON_A_PROCESS {
        rules.insert(nr, vec![not_self(0)?]);
    }
    for &(nr, one_process) in PRIORITY_CALLS {
        let which_one =
            SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, one_process)?;
        // Not one process (a group, a user), or one that is not this.
        let group = SeccompRule::new(vec![ne(0, one_process)?])?;
        let other = SeccompRule::new(vec![which_one, ne(1, 0)?, ne(1, pid as u64)?])?;
        rules.insert(nr, vec![group, other]);
    }
    for &(nr, arg) in MKNOD_CALLS {
        let kind = |k: libc::mode_t| {
            SeccompCondition::new(
                arg,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(libc::S_IFMT as u64),
                k as u64,
            )
        };
        rules.insert(
            nr,
            vec![
                SeccompRule::new(vec![kind(libc::S_IFCHR)?])?,
                SeccompRule::new(vec![kind(libc::S_IFBLK)?])?,
            ],
        );
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
