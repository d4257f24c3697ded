//! The runner: the child-process half of the host backend.
//!
//! `rrstore __host-runner --control FD --arena-fd FD [--preload LIB]...`
//! (see [`runner_main`]) is executed by [`super::HostBackend`] and serves
//! its requests in order: map the arena at the recorded address (first,
//! before any library is loaded, so nothing the image pulls in can land
//! there; a spare started early may have started loading the offload
//! runtime, under the checks of [`preload`]), fill it from the input's
//! files (`Fill`, see [`fill`]) when asked, load the image from a memfd,
//! write globals, call the kernel, and list the runtime libraries it
//! mapped. A kernel that crashes takes only this process down.
//!
//! **What the runner is never asked:** the result. Once the image is
//! loaded this process runs foreign code, which can take over the control
//! socket and answer anything. So the parent measures the kernel's time
//! around the `Launch` request, stops this process after the last launch
//! and reads and hashes the arena itself (`process_vm_readv`, or its own
//! mapping of a shared arena: [`super::judge`]). The runner reads files
//! only before the image is loaded: a `Fill` after that is refused, and
//! its confinement ([`crate::sandbox::Prepared`], made ready on `Reserve`,
//! applied just before the image is loaded) lets it read no store file.

use std::ffi::{CStr, CString};
use std::io::Write;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use rrstore_format::extents::PartExtents;

use super::arena;
use super::call::call_with_u64_args;
use super::fill;
use super::fill_trace;
use super::launch_path;
use super::preload;
use super::protocol::{recv, ErrKind, Fields, Msg, Op};
use super::slack;

/// Entry point of the hidden `__host-runner` subcommand; `args` are the
/// arguments after it. Returns the process exit code.
pub fn runner_main(args: &[String]) -> i32 {
    let Some(control) = flag(args, "--control") else {
        eprintln!("rrstore __host-runner is internal to `rrstore replay` (usage: --control FD)");
        return 2;
    };
    // The runtime search its parent passed (a test hook).
    super::libraries::adopt_from_parent();
    // Relocation tests (issue 19): take the range away first (the runner
    // reads the variable it inherited: placement::occupy).
    crate::placement::occupy::occupy(crate::placement::occupy::requested());
    let mut state = State::new();
    // SAFETY: the parent passed us this memfd's descriptor and nothing else
    // in this process owns it.
    state.arena_fd = flag(args, "--arena-fd").map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
    // A spare (`prestart`) loads the runtime while the recording is opened.
    let preloaded: Vec<String> = args
        .windows(2)
        .filter(|w| w[0] == "--preload")
        .map(|w| w[1].clone())
        .collect();
    if !preloaded.is_empty() {
        state.preloading = preload::start(&preloaded);
        state.preloaded = preloaded;
    }
    // SAFETY: the parent passed us this socket's descriptor and nothing else
    // in this process owns it.
    serve(unsafe { UnixStream::from_raw_fd(control) }, state)
}

/// Serve the parent's requests on `sock` until it closes; returns the
/// process exit code.
fn serve(mut sock: UnixStream, mut state: State) -> i32 {
    loop {
        let msg = match recv(&mut sock) {
            Ok(Some(m)) => m,
            Ok(None) => return 0,
            Err(e) => {
                eprintln!("rrstore host runner: {e}");
                return 3;
            }
        };
        let reply = state
            .handle(&msg)
            .unwrap_or_else(|e| Msg::err(ErrKind::Other, &e.to_string()));
        if reply.send(&mut sock).is_err() {
            return 3;
        }
    }
}

fn flag(args: &[String], name: &str) -> Option<i32> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1)?.parse().ok()
}

struct State {
    /// The mapped arena `(lo, len)`.
    arena: Option<(u64, u64)>,
    /// The zeroed slack mapped after it `(lo, len)` (see `slack`).
    slack: Option<(u64, u64)>,
    /// The memfd the parent handed us (`--arena-fd`), mapped as the arena
    /// when the parent asks for shared memory.
    arena_fd: Option<OwnedFd>,
    handle: *mut libc::c_void,
    kernel: *const u8,
    /// Libraries loaded before the arena was known (see `preload`).
    preloaded: Vec<String>,
    /// The thread loading them, joined before the image is loaded.
    preloading: Option<std::thread::JoinHandle<()>>,
    /// The thread building a held arena's page tables, joined before a
    /// fill writes the arena.
    populating: Option<std::thread::JoinHandle<()>>,
    /// The confinement, made ready once the runner is in use (`Reserve`).
    prepared: Option<crate::sandbox::Prepared>,
    /// The recording's launch settings a spare was started without
    /// (`Reserve`), set in the environment just before the image loads.
    launch_env: Vec<(CString, CString)>,
}

impl State {
    fn new() -> State {
        State {
            arena: None,
            slack: None,
            arena_fd: None,
            handle: std::ptr::null_mut(),
            kernel: std::ptr::null(),
            preloaded: Vec::new(),
            preloading: None,
            populating: None,
            prepared: None,
            launch_env: Vec::new(),
        }
    }
}

fn dlerror_string() -> String {
    // SAFETY: dlerror returns NULL or a valid C string owned by libdl.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        "unknown dynamic loader error".into()
    } else {
        // SAFETY: non-null pointer from dlerror is a NUL-terminated string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl State {
    fn handle(&mut self, msg: &[u8]) -> std::io::Result<Msg> {
        let mut f = Fields::new(msg);
        let op = f.u8()?;
        Ok(match Op::from_u8(op) {
            Some(Op::Reserve) => {
                let (lo, len) = (f.u64()?, f.u64()?);
                let needed = (0..f.u64()?)
                    .map(|_| f.string())
                    .collect::<std::io::Result<Vec<_>>>()?;
                // The held slot to map (`held`), or none.
                let held = f.bytes()?;
                let held = (!held.is_empty()).then(|| {
                    use std::os::unix::ffi::OsStrExt;
                    std::path::PathBuf::from(std::ffi::OsStr::from_bytes(held))
                });
                // Map the parent's sealed memfd (`ArenaMemory::Shared`).
                let shared = f.u64()? != 0;
                let slack_wanted = f.u64()?;
                let mut launch_env = Vec::new();
                for _ in 0..f.u64()? {
                    let (k, v) = (f.string()?, f.string()?);
                    // Launch settings only, as the parent's (a stored
                    // environment is user input: `HostSettings`).
                    let ok = rrstore_format::environment::is_launch_setting(&k)
                        && rrstore_format::environment::valid_value(&v);
                    match (ok, CString::new(k), CString::new(v)) {
                        (true, Ok(k), Ok(v)) => launch_env.push((k, v)),
                        _ => return Ok(Msg::err(ErrKind::Other, "not a launch setting")),
                    }
                }
                self.launch_env = launch_env;
                if self.arena.is_some() {
                    return Ok(Msg::err(ErrKind::Reserve, "the arena is already mapped"));
                }
                if !preload::compatible(&self.preloaded, &needed) {
                    let why = format!(
                        "this runner preloaded {} but the image needs {}",
                        self.preloaded.join(", "),
                        needed.join(", ")
                    );
                    return Ok(Msg::err(ErrKind::Incompatible, &why));
                }
                let mapped = match (shared, self.arena_fd.as_ref()) {
                    (false, _) => arena::map_fixed(lo, len, held.as_deref()),
                    (true, Some(fd)) => {
                        crate::backend::fixed_range::map_file_noreplace(lo, len, fd.as_fd())
                            .map(|()| arena::ArenaMemory::Shared)
                    }
                    (true, None) => Err("no arena memfd was handed to this runner".into()),
                };
                match mapped {
                    Ok(memory) => {
                        self.arena = Some((lo, len));
                        // Before anything else can map there: the image's
                        // libraries are loaded after this reply.
                        let slack = slack::map(lo + len, slack_wanted);
                        self.slack = Some((lo + len, slack.mapped));
                        if memory == arena::ArenaMemory::Held {
                            self.populating = arena::populate_in_background(lo, len);
                        }
                        // sandbox (hD): while the preload thread loads.
                        self.prepared = crate::sandbox::Prepared::new(false);
                        let mut m = Msg::ok();
                        m.u64(self.preloaded.len() as u64);
                        for lib in &self.preloaded {
                            m.bytes(lib.as_bytes());
                        }
                        m.u64(u64::from(memory.to_u8()));
                        m.u64(slack.mapped);
                        m.bytes(slack.short.unwrap_or_default().as_bytes());
                        m
                    }
                    Err(reason) if reason.contains("occupied") => {
                        Msg::err(ErrKind::Occupied, &reason)
                    }
                    Err(reason) => Msg::err(ErrKind::Reserve, &reason),
                }
            }
            Some(Op::LoadImage) => {
                let kernel = f.string()?;
                let image = f.bytes()?;
                self.load(&kernel, image)
            }
            Some(Op::WriteGlobal) => {
                let name = f.string()?;
                let data = f.bytes()?;
                self.write_global(&name, data)
            }
            Some(Op::GlobalAddress) => {
                let name = f.string()?;
                self.global_address(&name)
            }
            Some(Op::Launch) => {
                let n = f.u64()?;
                let mut args = Vec::new();
                for _ in 0..n {
                    args.push(f.u64()?);
                }
                if self.kernel.is_null() {
                    return Ok(Msg::err(
                        ErrKind::Other,
                        "launch before the image was loaded",
                    ));
                }
                let _ = std::io::stderr().flush();
                // SAFETY: `kernel` is the recorded kernel's entry point, which
                // takes one 64-bit value per recorded argument (the host
                // plugin's calling convention); the arena it points into is
                // mapped at the recorded address.
                unsafe { call_with_u64_args(self.kernel, &args) };
                // What the kernel printed through C stdio is still in its
                // buffers: flushed to the capture now, since the runner is
                // stopped and killed, never exits.
                // SAFETY: fflush(NULL) flushes every open output stream.
                unsafe { libc::fflush(std::ptr::null_mut()) };
                // No time in the reply: the parent measures around the
                // request (the image could answer anything here).
                Msg::ok()
            }
            Some(Op::Libraries) => {
                let mut m = Msg::ok();
                let libs = runtime_libraries();
                m.u64(libs.len() as u64);
                for l in &libs {
                    m.bytes(l.as_bytes());
                }
                m
            }
            Some(Op::Fill) => {
                if !self.handle.is_null() {
                    // Files are read only before foreign code runs here.
                    return Ok(Msg::err(
                        ErrKind::Other,
                        "the arena is filled from files only before the image is loaded",
                    ));
                }
                let base = f.u64()?;
                let plan = fill::decode(&mut f)?;
                let rebaser = fill::decode_rebaser(&mut f, base)?;
                // Debugging aid (issue 24): where the fill's time went.
                let preloading = self.preloading.as_ref().is_some_and(|t| !t.is_finished());
                let trace = fill_trace::Trace::start(preloading);
                // The page tables' wait counts as the fill's time.
                let waited = std::time::Instant::now();
                if let Some(t) = self.populating.take() {
                    let _ = t.join();
                }
                let waited = waited.elapsed();
                let filled = self
                    .fill(&plan, base, rebaser.as_ref(), trace.as_ref())
                    .map(|(took, rebased)| (took + waited, rebased));
                if let (Some(t), Some((lo, len))) = (trace, self.arena) {
                    let took = filled.as_ref().map_or(0, |f| f.0.as_nanos() as u64);
                    t.write(took, lo, len);
                }
                match filled {
                    Ok((took, rebased)) => {
                        let mut m = Msg::ok();
                        m.u64(took.as_nanos() as u64).u64(rebased.len() as u64);
                        m
                    }
                    Err((offset, why)) => Msg::err(
                        ErrKind::Other,
                        &format!("at byte {offset} of the input: {why}"),
                    ),
                }
            }
            Some(Op::Release) => {
                if let Some((lo, len)) = self.arena.take() {
                    arena::unmap(lo, len);
                }
                if let Some((lo, len)) = self.slack.take().filter(|&(_, len)| len > 0) {
                    arena::unmap(lo, len);
                }
                Msg::ok()
            }
            Some(Op::ClearSlack) => {
                if let Some((lo, len)) = self.slack {
                    slack::clear(lo, len);
                }
                Msg::ok()
            }
            None => Msg::err(ErrKind::Other, &format!("unknown request {op}")),
        })
    }

    /// Decode `plan` into the arena at `base`, after checking that it fits.
    fn fill(
        &self,
        plan: &PartExtents,
        base: u64,
        rebaser: Option<&crate::placement::Rebaser>,
        trace: Option<&fill_trace::Trace>,
    ) -> Result<fill::Filled, fill::FillError> {
        let total = plan.len();
        let fits = self.arena.is_some_and(|(lo, len)| {
            base >= lo && base.checked_add(total).is_some_and(|e| e <= lo + len)
        });
        if !fits {
            return Err((
                0,
                format!("{total} bytes at {base:#x} are outside the arena"),
            ));
        }
        // SAFETY: checked just above: `base..base + total` lies in the arena
        // mapping, writable and mapped for the life of the process; requests
        // are served one at a time, so nothing else touches it meanwhile.
        unsafe { fill::fill(plan, base, rebaser, trace) }
    }

    fn load(&mut self, kernel: &str, image: &[u8]) -> Msg {
        let fd = match arena::create_memfd("rrstore-image", image.len() as u64) {
            Ok(fd) => fd,
            Err(e) => return Msg::err(ErrKind::Dlopen, &format!("memfd_create: {e}")),
        };
        let mut file = std::fs::File::from(fd);
        if let Err(e) = file.write_all(image) {
            return Msg::err(
                ErrKind::Dlopen,
                &format!("writing the image to a memfd: {e}"),
            );
        }
        // The memfd is written while the preload may still run; the image's
        // dlopen would wait for it anyway (the loader's lock).
        if let Some(t) = self.preloading.take() {
            let _ = t.join();
        }
        // No thread of ours outlives the confinement (the page tables of a
        // held arena without a fill, a parent-copied one).
        if let Some(t) = self.populating.take() {
            let _ = t.join();
        }
        // The recording's launch settings, now that this runner runs one
        // thread (the preload joined above, a fill's threads ended with
        // it) and before anything reads them: the OpenMP runtime reads
        // `OMP_*`/`KMP_*` at its serial initialisation (the image's first
        // call, or `initialise_openmp` below), never when it is loaded, so
        // a spare that preloaded it applies them as a runner started with
        // them would (docs/replay.md, "spare").
        for (k, v) in std::mem::take(&mut self.launch_env) {
            // SAFETY: NUL-terminated strings; no other thread of this
            // process runs (see above), so nothing reads the environment
            // while it changes.
            unsafe { libc::setenv(k.as_ptr(), v.as_ptr(), 1) };
        }
        // sandbox (hD): confined before the image's constructors run.
        let prepared = self
            .prepared
            .take()
            .or_else(|| crate::sandbox::Prepared::new(false));
        // No store file stays readable: every fill is done by now.
        let applied = match prepared.map(|p| p.apply(&[])) {
            None => crate::sandbox::Mechanisms(0),
            Some(Ok(m)) => m,
            Some(Err(why)) => return Msg::err(ErrKind::Other, &why),
        };
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file));
        let Ok(cpath) = CString::new(path) else {
            return Msg::err(ErrKind::Dlopen, "bad image path");
        };
        let h = match super::libraries::open_image(&cpath) {
            Ok(h) => h,
            Err(why) => return Msg::err(ErrKind::Dlopen, &why),
        };
        self.handle = h;
        let Ok(ck) = CString::new(kernel) else {
            return Msg::err(ErrKind::MissingKernel, "kernel name contains NUL");
        };
        // SAFETY: `h` is a live handle from dlopen, `ck` a C string.
        let k = unsafe { libc::dlsym(h, ck.as_ptr()) };
        if k.is_null() {
            return Msg::err(ErrKind::MissingKernel, &dlerror_string());
        }
        self.kernel = k.cast();
        // libomp initialised as libomptarget would have before any launch,
        // not inside the kernel's first fork.
        // SAFETY: `h` is the live handle of the image just loaded.
        unsafe { launch_path::initialise_openmp(h) };
        let mut m = Msg::ok();
        m.u64(applied.0);
        m
    }

    fn global_address(&mut self, name: &str) -> Msg {
        if self.handle.is_null() {
            return Msg::err(
                ErrKind::Other,
                "global looked up before the image was loaded",
            );
        }
        let Ok(cname) = CString::new(name) else {
            return Msg::err(ErrKind::MissingGlobal, "global name contains NUL");
        };
        // SAFETY: live dlopen handle, valid C string.
        let p = unsafe { libc::dlsym(self.handle, cname.as_ptr()) };
        if p.is_null() {
            return Msg::err(ErrKind::MissingGlobal, &dlerror_string());
        }
        let mut m = Msg::ok();
        m.u64(p as u64);
        m
    }

    fn write_global(&mut self, name: &str, data: &[u8]) -> Msg {
        if self.handle.is_null() {
            return Msg::err(ErrKind::Other, "global written before the image was loaded");
        }
        let Ok(cname) = CString::new(name) else {
            return Msg::err(ErrKind::MissingGlobal, "global name contains NUL");
        };
        // SAFETY: live dlopen handle, valid C string.
        let p = unsafe { libc::dlsym(self.handle, cname.as_ptr()) };
        if p.is_null() {
            return Msg::err(ErrKind::MissingGlobal, &dlerror_string());
        }
        // SAFETY: the parent checked that the image's .dynsym gives this
        // symbol at least `data.len()` bytes, and dlsym returned its address
        // in the writable data segment of the loaded image.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p.cast::<u8>(), data.len()) };
        Msg::ok()
    }
}

/// The OpenMP runtime libraries (and LLVM) loaded in this process, sorted,
/// as resolved paths (the links followed: `libomp.so.5` says which
/// LLVM's runtime it is only through where it points). From the dynamic
/// loader's list (`dl_iterate_phdr`), which costs microseconds where reading
/// `/proc/self/maps` of a process with libLLVM mapped costs ~0.1 ms.
fn runtime_libraries() -> Vec<String> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        names: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `names` is the `Vec` passed below, alive for the whole
        // iteration; `info` is the loader's entry for one object, whose
        // `dlpi_name` is NULL or a NUL-terminated path.
        unsafe {
            let names = &mut *names.cast::<Vec<String>>();
            let name = (*info).dlpi_name;
            if !name.is_null() {
                names.push(CStr::from_ptr(name).to_string_lossy().into_owned());
            }
        }
        0
    }
    let mut names: Vec<String> = Vec::new();
    // SAFETY: `each` matches the callback type and only uses `names`.
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut names as *mut Vec<String>).cast()) };
    let mut out: Vec<String> = Vec::new();
    for name in names {
        let file = name.rsplit('/').next().unwrap_or(&name);
        let wanted = ["libomp.", "libomptarget.", "libLLVM"]
            .iter()
            .any(|p| file.starts_with(p));
        if !wanted {
            continue;
        }
        let path = std::fs::canonicalize(&name)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or(name);
        if !out.contains(&path) {
            out.push(path);
        }
    }
    // Sorted, not in load order: that order depends on whether a spare
    // preloaded the runtime, and the history should read alike either way.
    out.sort();
    out
}
