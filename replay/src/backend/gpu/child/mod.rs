//! A GPU backend run in a child process, so that what the GPU runtime does
//! to its process cannot end rrstore: ROCm's default handler aborts the
//! whole process on a GPU memory fault, and a kernel that never ends cannot
//! be killed. The parent keeps a [`ChildBackend`] that forwards every
//! [`Backend`] call over a socket; the child runs the real backend. When
//! the child dies the call reports [`BackendError::Crashed`] with its
//! signal; when a launch outlives `--timeout` (plus a grace for the child's
//! own timeout reply) the child is killed and the call reports
//! [`BackendError::TimedOut`]. Either way the engine gets a verdict and
//! records it.
//!
//! The input reaches the child through one shared window (an anonymous
//! `MAP_SHARED` mapping made before the fork): the engine decodes into it
//! ([`Backend::staging_window`]) and the child copies it into its pinned
//! staging buffers. The child is forked (see
//! [`crate::backend::host::process::RunnerProcess::fork`]), so this process
//! must be single-threaded when it is started.
//!
//! A device lane may start the child of its next replay early, while the
//! current kernel runs ([`prestart`]): [`open_gpu`] then takes it.

pub mod prestart;
mod wire;

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use self::wire::{recv, send, Reply, Request, Window, WireParams, WireUpload};
use super::driver_guard;
use super::staging::UploadStats;
use crate::backend::host::process::RunnerProcess;
use crate::backend::kind::GpuDriver;
use crate::backend::{Backend, BackendError, BackendKind, LaunchParams, Relocation, Reporting};

/// Bytes of the shared window (the largest piece sent at once).
const WINDOW: usize = 64 << 20;
/// How long past `--timeout` the parent waits for the child's own reply.
const GRACE: Duration = Duration::from_secs(2);

/// The real backend, made in the child.
pub type Factory = Box<dyn FnOnce() -> Result<Box<dyn Backend>, BackendError>>;

/// The child: make the backend, then serve requests until the parent
/// closes the socket. Returns the child's exit status.
fn serve(mut sock: UnixStream, window: *mut u8, make: Factory) -> i32 {
    // Confined before the driver loads; what applied goes into `Ready`.
    let sandbox = crate::sandbox::confine_gpu_child().0;
    // The parent reports the statistics (this process' output is captured).
    crate::settings::update(|s| s.gpu_stats = false);
    let mut win = Window {
        ptr: window,
        len: WINDOW,
    };
    let mut backend = match make() {
        Ok(b) => b,
        Err(error) => {
            let failed: Result<Reply, BackendError> = Ok(Reply::StartFailed { error, sandbox });
            let _ = send(&mut sock, &failed, &[]);
            std::mem::forget(win);
            return 0;
        }
    };
    let ready: Result<Reply, BackendError> = Ok(Reply::Ready {
        name: backend.name().into(),
        description: backend.device_description(),
        uuid: backend.device_uuid(),
        sandbox,
    });
    if send(&mut sock, &ready, &[]).is_err() {
        return 0;
    }
    while let Ok(Some((req, data))) = recv::<Request>(&mut sock) {
        let r: Result<Reply, BackendError> = match req {
            Request::Reserve {
                base,
                size,
                elsewhere,
            } => {
                backend.allow_elsewhere(elsewhere);
                backend.reserve(base, size).map(|()| Reply::Reserved {
                    base: backend.placed_elsewhere().unwrap_or(base),
                })
            }
            Request::Upload { offset, len } => backend
                .upload(offset, win.bytes(len as usize))
                .map(|()| Reply::Done),
            Request::LoadImage { kernel } => {
                backend.load_image(&data, &kernel).map(|()| Reply::Done)
            }
            Request::WriteGlobal { name } => {
                backend.write_global(&name, &data).map(|()| Reply::Done)
            }
            Request::GlobalAddress { name } => backend
                .global_address(&name)
                .map(|address| Reply::Address { address }),
            Request::Launch { args, params } => {
                let p = LaunchParams {
                    num_teams: params.num_teams,
                    num_threads: params.num_threads,
                    shared_memory: params.shared_memory,
                    loop_trip_count: params.loop_trip_count,
                    timeout: params.timeout_ns.map(Duration::from_nanos),
                };
                backend.launch(&args, &p).map(|d| Reply::Kernel {
                    ns: d.as_nanos() as u64,
                    upload: backend.upload_stats().map(|u| WireUpload {
                        bytes: u.bytes,
                        elapsed_ns: u.elapsed.as_nanos() as u64,
                        busy_ns: u.busy.as_nanos() as u64,
                    }),
                })
            }
            Request::Download { offset, len } => backend
                .download(offset, win.bytes(len as usize))
                .map(|()| Reply::Done),
        };
        if send(&mut sock, &r, &[]).is_err() {
            break;
        }
    }
    drop(backend);
    // The parent unmaps the window; this copy goes with the process.
    std::mem::forget(win);
    0
}

/// Open device `device` of the GPU backend `kind` with the recorded arena
/// (`base`, `size`) and reservation, in a child process when its row of
/// [`KINDS`](crate::backend::kind::KINDS) says so for `timeout`
/// ([`BackendKind::runs_in_child`]: HIP always, as a GPU memory fault
/// aborts the process under ROCm; CUDA when a `timeout` is given, so that
/// a kernel that outlives it is killed with the child). In this process
/// when it runs other threads (a child could not be forked safely) or when
/// a driver was initialised here already ([`driver_guard`]).
pub fn open_gpu(
    kind: BackendKind,
    sandbox: crate::sandbox::Mode,
    device: u32,
    arena: Option<(u64, u64)>,
    reserved: Option<u64>,
    timeout: Option<Duration>,
) -> Result<Box<dyn Backend>, BackendError> {
    let name = kind.as_str();
    let in_child = kind.runs_in_child(timeout);
    if in_child {
        let key = prestart::ChildKey {
            name,
            sandbox,
            device,
            arena,
            reserved,
        };
        // Started while the lane's previous kernel ran: its errors (no
        // device, no runtime) are this replay's.
        if let Some(child) = prestart::take(&key) {
            return Ok(Box::new(child?));
        }
    }
    let make = factory(name, device, arena, reserved);
    // A driver initialised here (an earlier in-process replay) rules out
    // forking: the backend runs here too, the only place that driver works.
    let can_fork =
        crate::backend::host::process::single_threaded() && driver_guard::initialised().is_none();
    if in_child && can_fork {
        Ok(Box::new(ChildBackend::spawn(name, sandbox, make)?))
    } else {
        make()
    }
}

/// What makes the real backend `name` (`cuda`, `hip`) on `device` in the
/// child: its row's driver ([`GpuDriver::open`]).
fn factory(
    name: &'static str,
    device: u32,
    arena: Option<(u64, u64)>,
    reserved: Option<u64>,
) -> Factory {
    match driver(name) {
        Some(driver) => {
            let open = driver.open;
            Box::new(move || open(device, arena, reserved))
        }
        None => Box::new(move || {
            Err(BackendError::Internal {
                backend: name.into(),
                what: "it has no GPU driver to open in the runner process".into(),
            })
        }),
    }
}

/// The driver of the GPU backend named `name` (a row of
/// [`KINDS`](crate::backend::kind::KINDS)); `None` for other names (the
/// tests' fake backends).
fn driver(name: &str) -> Option<&'static GpuDriver> {
    BackendKind::named(name)?.spec()?.gpu.as_ref()
}

/// The parent's side: a [`Backend`] whose calls run in the child.
pub struct ChildBackend {
    runner: Option<RunnerProcess>,
    window: Window,
    name: &'static str,
    description: String,
    /// The device's UUID, as the child's backend reported it.
    uuid: Option<String>,
    /// How the child ended, once it has: every later call reports it.
    ended: Option<BackendError>,
    /// Relocation: the replay may relocate, and where the child's driver
    /// placed the arena when not at the address asked.
    allow_elsewhere: bool,
    placed_elsewhere: Option<u64>,
    /// How the child confined itself, as it reported it.
    sandbox: Option<crate::sandbox::Mechanisms>,
    /// The child's last upload round, reported with each launch.
    upload: Option<UploadStats>,
}

/// A child forked by [`ChildBackend::start`] that is still making its
/// backend (opening the device). Dropping it ends the child.
pub struct Starting(ChildBackend, crate::sandbox::Mode);

impl Starting {
    /// Wait until the child's backend is made: the backend, or the error
    /// the child's backend reported while starting.
    pub fn ready(self) -> Result<ChildBackend, BackendError> {
        let (mut b, confinement) = (self.0, self.1);
        // Bounded: a driver initialisation that hangs ends the child.
        let limit = driver_guard::start_timeout();
        if let Some(r) = b.runner.take() {
            if !readable_within(&r.sock, limit) {
                r.kill();
                let _ = r.wait();
                b.ended = Some(BackendError::StartTimedOut {
                    backend: b.name.into(),
                    waited: limit,
                });
                return Err(BackendError::StartTimedOut {
                    backend: b.name.into(),
                    waited: limit,
                });
            }
            b.runner = Some(r);
        }
        match b.reply(None)? {
            Reply::StartFailed { error, sandbox } => {
                return Err(start_failure(b.name, error, sandbox));
            }
            Reply::Ready {
                description,
                uuid,
                sandbox,
                ..
            } => {
                b.description = description;
                b.uuid = uuid;
                // The report says how the GPU child was confined, as it
                // does for the host runner.
                b.sandbox = Some(crate::sandbox::narrowed(confinement, sandbox));
            }
            other => return Err(b.protocol(other)),
        }
        Ok(b)
    }
}

impl ChildBackend {
    /// Fork the child and make the backend there with `make`; `name` is the
    /// backend's name (`cuda`, `hip`). Errors the child's backend reports
    /// while starting (no device, no runtime) come back as they are. This
    /// process must run a single thread (a forked child of a multi-threaded
    /// one may deadlock on a lock another thread held).
    /// The child confines itself as `confinement` asks.
    pub fn spawn(
        name: &'static str,
        confinement: crate::sandbox::Mode,
        make: Factory,
    ) -> Result<Self, BackendError> {
        Self::start(name, confinement, make)?.ready()
    }

    /// [`spawn`](Self::spawn) without waiting for the child's backend: the
    /// child opens its device while this process goes on, and
    /// [`Starting::ready`] waits for it.
    pub fn start(
        name: &'static str,
        confinement: crate::sandbox::Mode,
        make: Factory,
    ) -> Result<Starting, BackendError> {
        if !crate::backend::host::process::single_threaded() {
            return Err(BackendError::Unavailable(format!(
                "cannot fork the {name} runner process: this process runs more than one thread"
            )));
        }
        driver_guard::check_fork(&format!("the {name} runner process"))?;
        let unavailable = |e: io::Error| {
            BackendError::Unavailable(format!(
                "cannot start the {name} runner process: {e}; the machine may be out of memory \
                 or processes"
            ))
        };
        let mut window = Window::new(WINDOW).map_err(unavailable)?;
        let shared = window.bytes(0).as_mut_ptr();
        let mode = [crate::sandbox::env::mode_setting(confinement)];
        let runner = RunnerProcess::fork(&mode, move |sock| serve(sock, shared, make))
            .map_err(unavailable)?;
        Ok(Starting(
            ChildBackend {
                runner: Some(runner),
                window,
                name,
                description: String::new(),
                uuid: None,
                ended: None,
                allow_elsewhere: false,
                placed_elsewhere: None,
                sandbox: None,
                upload: None,
            },
            confinement,
        ))
    }

    fn protocol(&self, r: Reply) -> BackendError {
        BackendError::RunnerReply {
            op: format!("the {} runner's request", self.name),
            reason: format!("unexpected reply {r:?}"),
        }
    }

    /// Send `req` with `data` and wait for the reply, at most `limit` (plus
    /// a grace) when given.
    fn call(
        &mut self,
        req: &Request,
        data: &[u8],
        limit: Option<Duration>,
    ) -> Result<Reply, BackendError> {
        if let Some(e) = &self.ended {
            return Err(clone_error(e));
        }
        let sent = match self.runner.as_mut() {
            Some(r) => send(&mut r.sock, req, data).is_ok(),
            None => false,
        };
        if !sent {
            return Err(self.child_ended());
        }
        self.reply(limit)
    }

    /// The child's next reply, waiting at most `limit` plus a grace.
    fn reply(&mut self, limit: Option<Duration>) -> Result<Reply, BackendError> {
        let Some(runner) = self.runner.as_mut() else {
            return Err(self.child_ended());
        };
        if let Some(limit) = limit {
            if !readable_within(&runner.sock, limit + GRACE) {
                return Err(self.kill_timed_out(limit));
            }
        }
        match recv::<Result<Reply, BackendError>>(&mut runner.sock) {
            Ok(Some((Err(BackendError::TimedOut(d)), _))) => {
                // The kernel may still run in the child: end it there.
                Err(self.kill_timed_out(d))
            }
            Ok(Some((r, _))) => r,
            _ => Err(self.child_ended()),
        }
    }

    fn kill_timed_out(&mut self, limit: Duration) -> BackendError {
        if let Some(r) = self.runner.take() {
            r.kill();
            let _ = r.wait();
        }
        self.ended = Some(BackendError::TimedOut(limit));
        BackendError::TimedOut(limit)
    }

    /// The child closed the socket (or is gone): reap it and say how it
    /// ended.
    fn child_ended(&mut self) -> BackendError {
        use std::os::unix::process::ExitStatusExt;
        if let Some(e) = &self.ended {
            return clone_error(e);
        }
        let e = match self.runner.take().map(|r| r.wait()) {
            Some(Ok(status)) => match status.signal() {
                Some(signal) => BackendError::Crashed { signal },
                None => BackendError::DeviceFault(format!(
                    "the {} runner process exited with status {}",
                    self.name,
                    status.code().unwrap_or(-1)
                )),
            },
            _ => BackendError::Unavailable(format!("the {} runner process is gone", self.name)),
        };
        self.ended = Some(clone_error(&e));
        e
    }

    fn done(&mut self, req: &Request, data: &[u8]) -> Result<(), BackendError> {
        match self.call(req, data, None)? {
            Reply::Done => Ok(()),
            other => Err(self.protocol(other)),
        }
    }
}

/// Why the child's backend could not be made. Under confinement the
/// driver may have been denied something it needs: the same start is then
/// tried without confinement, in a short-lived child
/// ([`driver_guard::in_child`], the device listing), and when that finds
/// the devices the error says confinement is the cause (`--sandbox off`);
/// when it fails too, its error is the real one (no driver, no device).
fn start_failure(name: &str, error: BackendError, sandbox: u64) -> BackendError {
    use crate::sandbox::Mechanisms;
    // The mechanisms that can deny a driver something (the others change
    // the environment, core dumps, the process group).
    let denying = Mechanisms::LANDLOCK | Mechanisms::SECCOMP | Mechanisms::NO_CAPS;
    let mechanisms = Mechanisms(sandbox & denying).names();
    if mechanisms.is_empty() {
        return error;
    }
    let unconfined = match driver(name) {
        Some(driver) => (driver.count)(),
        // Fake backends of the tests: their devices are there.
        None => Ok(1),
    };
    match unconfined {
        Err(e) => e,
        Ok(_) => BackendError::Unavailable(format!(
            "the {name} driver could not be started in the GPU runner process, which was \
             confined with {} ({error}), while it starts without confinement: confinement \
             denies the driver something it needs (a device node, a driver file, a system \
             call); replay with `--sandbox off` (and report the mechanism and driver version)",
            mechanisms.join(", ")
        )),
    }
}

/// `BackendError` is not `Clone` (its variants are plain data, though).
fn clone_error(e: &BackendError) -> BackendError {
    serde_json::to_vec(e)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| BackendError::Unavailable(e.to_string()))
}

/// Whether `sock` has something to read (or was closed) within `limit`.
fn readable_within(sock: &UnixStream, limit: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut fd, 1, ms) };
        if r > 0 {
            return true;
        }
        if r == 0 && left.is_zero() {
            return false;
        }
        if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return true;
        }
    }
}

impl Backend for ChildBackend {
    fn name(&self) -> &'static str {
        self.name
    }

    fn device_description(&self) -> String {
        self.description.clone()
    }

    fn reserve(&mut self, base: u64, size: u64) -> Result<(), BackendError> {
        let req = Request::Reserve {
            base,
            size,
            elsewhere: self.allow_elsewhere,
        };
        match self.call(&req, &[], None)? {
            Reply::Reserved { base: placed } => {
                self.placed_elsewhere = (placed != base).then_some(placed);
                Ok(())
            }
            other => Err(self.protocol(other)),
        }
    }

    fn upload(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
        let mut at = 0usize;
        while at < data.len() {
            let n = (data.len() - at).min(WINDOW);
            self.window.bytes(n).copy_from_slice(&data[at..at + n]);
            self.done(
                &Request::Upload {
                    offset: offset + at as u64,
                    len: n as u64,
                },
                &[],
            )?;
            at += n;
        }
        Ok(())
    }

    fn staging_window(&mut self, max_len: usize) -> Result<Option<&mut [u8]>, BackendError> {
        Ok(Some(self.window.bytes(max_len)))
    }

    fn commit_staging(&mut self, offset: u64, len: usize) -> Result<(), BackendError> {
        let len = len.min(WINDOW) as u64;
        self.done(&Request::Upload { offset, len }, &[])
    }

    fn load_image(&mut self, image: &[u8], kernel: &str) -> Result<(), BackendError> {
        self.done(
            &Request::LoadImage {
                kernel: kernel.into(),
            },
            image,
        )
    }

    fn write_global(&mut self, name: &str, data: &[u8]) -> Result<(), BackendError> {
        self.done(&Request::WriteGlobal { name: name.into() }, data)
    }

    fn global_address(&mut self, name: &str) -> Result<Option<u64>, BackendError> {
        match self.call(&Request::GlobalAddress { name: name.into() }, &[], None)? {
            Reply::Address { address } => Ok(address),
            other => Err(self.protocol(other)),
        }
    }

    fn launch(&mut self, args: &[u64], params: &LaunchParams) -> Result<Duration, BackendError> {
        let req = Request::Launch {
            args: args.to_vec(),
            params: WireParams {
                num_teams: params.num_teams,
                num_threads: params.num_threads,
                shared_memory: params.shared_memory,
                loop_trip_count: params.loop_trip_count,
                timeout_ns: params.timeout.map(|t| t.as_nanos() as u64),
            },
        };
        match self.call(&req, &[], params.timeout)? {
            Reply::Kernel { ns, upload } => {
                self.upload = upload.map(|u| UploadStats {
                    bytes: u.bytes,
                    elapsed: Duration::from_nanos(u.elapsed_ns),
                    busy: Duration::from_nanos(u.busy_ns),
                });
                if let Some(u) = &self.upload {
                    super::staging::print_stats(u);
                }
                Ok(Duration::from_nanos(ns))
            }
            other => Err(self.protocol(other)),
        }
    }

    fn download(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), BackendError> {
        let mut at = 0usize;
        while at < dst.len() {
            let n = (dst.len() - at).min(WINDOW);
            self.done(
                &Request::Download {
                    offset: offset + at as u64,
                    len: n as u64,
                },
                &[],
            )?;
            dst[at..at + n].copy_from_slice(self.window.bytes(n));
            at += n;
        }
        Ok(())
    }
}

impl Reporting for ChildBackend {
    fn sandbox_applied(&self) -> Option<crate::sandbox::Mechanisms> {
        self.sandbox
    }

    fn upload_stats(&self) -> Option<UploadStats> {
        self.upload
    }

    fn device_uuid(&self) -> Option<String> {
        self.uuid.clone()
    }
}

impl Relocation for ChildBackend {
    fn allow_elsewhere(&mut self, allow: bool) {
        self.allow_elsewhere = allow;
    }

    fn placed_elsewhere(&self) -> Option<u64> {
        self.placed_elsewhere
    }
}

impl Drop for ChildBackend {
    fn drop(&mut self) {
        // Closing the socket ends the child's loop; it releases the device
        // in order and exits. A child that does not (a wedged runtime) is
        // killed rather than waited for.
        if let Some(r) = self.runner.take() {
            let _ = r.sock.shutdown(std::net::Shutdown::Write);
            if readable_within(&r.sock, GRACE) {
                let _ = r.wait();
            } else {
                r.end();
            }
        }
    }
}
