//! The runner's file-system policy (Landlock).
//!
//! Read (and map executable) only: the directories the dynamic loader
//! searches and those of the libraries already loaded (the OpenMP
//! runtime, libLLVM), `LD_LIBRARY_PATH`, the loader's cache, this
//! process' own `/proc` entry and the CPU topology libomp reads, and the
//! pack files the runner fills the arena from; `/dev/null`, `/dev/zero`
//! and the random devices. Write: only the scratch directory, where no
//! device node may be made (`MakeChar`, `MakeBlock` are granted nowhere).
//! For the GPU child also the GPU's device nodes (read-write:
//! `/dev/nvidia*`, `/dev/kfd`, `/dev/dri`, and `/dev/shm`; not the rest
//! of `/dev`: a disk node is writable by its owner, root, with no
//! capability, and a terminal's by its user), `/sys`, `/proc` and `/usr`
//! and `/opt` (CUDA, ROCm). Nothing else: not the store, not `$HOME`, not
//! `/etc` beyond the loader's files. An image's memfd is not on a mounted
//! file system, which Landlock leaves alone. Also handled where the kernel
//! has them: TCP bind/connect (denied) and signals to and abstract sockets
//! of processes outside the sandbox (denied).

use std::ffi::CStr;
use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, RestrictSelfAttr,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
    ABI,
};

/// The oldest Landlock ABI the policy counts as confinement (1: files).
pub const MIN_ABI: i64 = 1;
/// The newest ABI the policy uses (6: TCP, signal and socket scopes).
const ABI_USED: ABI = ABI::V6;

/// The kernel's Landlock ABI version, 0 without Landlock.
pub fn abi() -> i64 {
    // SAFETY: the documented version query: no ruleset, size 0, the flag.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    v.max(0)
}

/// Directories the loader searches by default on x86-64 Linux.
const LIBRARY_DIRS: &[&str] = &[
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
];

/// Single files any runner reads.
const READ_FILES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/proc/self",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/sys/devices/system/cpu",
    "/sys/devices/system/node",
    "/sys/fs/cgroup",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
];

/// What the GPU child reads besides (driver libraries, device information).
const GPU_READ: &[&str] = &[
    "/usr",
    "/opt",
    "/proc",
    "/sys",
    "/etc/OpenCL",
    "/etc/nvidia",
];

/// Device files written as well as read.
const READ_WRITE: &[&str] = &["/dev/null"];
/// The GPU child's besides: shared memory, and the nodes of `/dev` whose
/// names start with one of [`GPU_NODES`] (those present: a rule needs an
/// existing path).
const GPU_READ_WRITE: &[&str] = &["/dev/shm"];
/// NVIDIA's nodes (`nvidiactl`, `nvidia0`..., `nvidia-uvm`,
/// `nvidia-uvm-tools`, `nvidia-modeset`, `nvidia-caps/`: what a container
/// runtime hands a CUDA container) and AMD's (`kfd`, `dri/`: ROCm's).
const GPU_NODES: &[&str] = &["nvidia", "kfd", "dri"];

/// The GPU device nodes present in `/dev` ([`GPU_NODES`]).
fn gpu_nodes() -> Vec<PathBuf> {
    let Ok(dev) = std::fs::read_dir("/dev") else {
        return Vec::new();
    };
    dev.flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            GPU_NODES.iter().any(|p| name.starts_with(p))
        })
        .map(|e| e.path())
        .collect()
}

/// The ruleset with the rules known before the image is loaded (none
/// where the kernel has no Landlock).
pub fn prepare(gpu: bool, scratch: Option<&Path>) -> Result<Option<RulesetCreated>, RulesetError> {
    if abi() < MIN_ABI {
        return Ok(None);
    }
    let read = AccessFs::from_read(ABI_USED);
    let all = AccessFs::from_all(ABI_USED);
    // Handled, and granted nowhere: no device node can be made.
    let write = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let mut read_paths: Vec<PathBuf> = LIBRARY_DIRS.iter().map(PathBuf::from).collect();
    read_paths.extend(
        std::env::var_os("LD_LIBRARY_PATH")
            .map(|v| std::env::split_paths(&v).collect::<Vec<_>>())
            .unwrap_or_default(),
    );
    read_paths.extend(READ_FILES.iter().map(PathBuf::from));
    let mut write_paths: Vec<PathBuf> = READ_WRITE.iter().map(PathBuf::from).collect();
    write_paths.extend(scratch.map(Path::to_path_buf));
    if gpu {
        read_paths.extend(GPU_READ.iter().map(PathBuf::from));
        write_paths.extend(GPU_READ_WRITE.iter().map(PathBuf::from));
        write_paths.extend(gpu_nodes());
    }
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .handle_access(AccessNet::from_all(ABI_USED))?
        .scope(Scope::from_all(ABI_USED))?
        .create()?
        .add_rules(path_beneath_rules(&read_paths, read))?
        .add_rules(path_beneath_rules(&write_paths, write))?;
    Ok(Some(ruleset))
}

/// Add the directories of the libraries loaded by now and `read_files`,
/// and restrict this process; `Ok(false)` where the kernel has no Landlock.
pub fn enforce(
    ruleset: Option<RulesetCreated>,
    gpu: bool,
    read_files: &[PathBuf],
) -> Result<bool, RulesetError> {
    let Some(ruleset) = ruleset else {
        return Ok(false);
    };
    let read = AccessFs::from_read(ABI_USED);
    let mut paths = if gpu {
        Vec::new()
    } else {
        loaded_library_dirs()
    };
    paths.extend(read_files.iter().cloned());
    let status = ruleset
        .add_rules(path_beneath_rules(&paths, read))?
        .all_threads(true)?
        .restrict_self()?;
    Ok(status.ruleset != RulesetStatus::NotEnforced)
}

/// The directories of the shared objects loaded in this process (resolved:
/// a versioned LLVM's `lib` directory is where `libomp.so` leads).
fn loaded_library_dirs() -> Vec<PathBuf> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        names: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `names` is the `Vec` passed below, alive for the whole
        // iteration; `info` is the loader's entry for one object, whose
        // `dlpi_name` is NULL or a NUL-terminated path.
        unsafe {
            let names = &mut *names.cast::<Vec<PathBuf>>();
            let name = (*info).dlpi_name;
            if !name.is_null() {
                let s = CStr::from_ptr(name).to_string_lossy().into_owned();
                if s.starts_with('/') {
                    names.push(PathBuf::from(s));
                }
            }
        }
        0
    }
    let mut names: Vec<PathBuf> = Vec::new();
    // SAFETY: `each` matches the callback type and only uses `names`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut names as *mut Vec<PathBuf>).cast()) };
    let mut dirs: Vec<PathBuf> = Vec::new();
    // Landlock checks the file an open ends at: its directory, once links
    // are followed, is what must be allowed. Libraries named under the
    // fixed directories are left out (already allowed, and resolving each
    // costs several system calls): these directories matter only for the
    // libraries the image pulls in next, found beside those loaded.
    for n in names {
        if LIBRARY_DIRS.iter().any(|l| n.starts_with(l)) {
            continue;
        }
        let resolved = std::fs::canonicalize(&n).ok();
        let Some(d) = resolved.as_deref().and_then(Path::parent) else {
            continue;
        };
        let fixed = LIBRARY_DIRS.iter().any(|l| d.starts_with(l));
        if !fixed && !d.starts_with("/proc") && !dirs.iter().any(|x| x == d) {
            dirs.push(d.to_path_buf());
        }
    }
    dirs
}
