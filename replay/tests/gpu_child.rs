//! The GPU child runner with fake device backends: a launch that kills its
//! process (as ROCm's handler does on a GPU memory fault) ends the child,
//! not this process, and is reported as a crash with its signal; a launch
//! that never returns (as `hipEventSynchronize` on a kernel that never
//! ends) is killed after `--timeout` and reported as timed out; the bytes
//! and calls of a normal replay reach the child and come back. A device
//! lane's next child, prestarted while the current kernel runs, opens its
//! device before that kernel ends, survives the current child's crash,
//! reports its own failure to start as the next replay's error, and
//! reports its device's UUID.
//!
//! The runner is forked, which needs a single-threaded process: this file
//! runs without libtest (`harness = false`), on the process' only thread.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use rrstore_replay::backend::gpu::child::prestart::{self, ChildKey};
use rrstore_replay::backend::gpu::child::{open_gpu, ChildBackend};
use rrstore_replay::backend::gpu::staging::UploadStats;
use rrstore_replay::backend::host::process;
use rrstore_replay::backend::{
    Backend, BackendError, BackendKind, LaunchParams, Relocation, Reporting,
};
use rrstore_replay::sandbox::Mechanisms;

#[derive(Clone, Copy)]
enum Launch {
    /// Adds 1 to every arena byte and takes 3 ms.
    Works,
    /// Kills its process, as a fatal GPU fault under ROCm does.
    Aborts,
    /// Never returns, ignoring the timeout.
    Hangs,
    /// Reports its own timeout (as the CUDA backend's polling does).
    TimesOut,
    /// Returns once the next replay's child has opened its device
    /// ([`opened`] is set), a fault when it has not within a minute.
    WaitsForNext,
}

/// A device in host memory.
struct Fake {
    mode: Launch,
    arena: Vec<u8>,
    global: Vec<u8>,
}

/// A flag in memory shared by this process and every child it forks (the
/// children keep no descriptor of the parent's, and may not write files).
fn opened() -> &'static AtomicU32 {
    static AT: OnceLock<usize> = OnceLock::new();
    let at = *AT.get_or_init(|| {
        // SAFETY: a fresh anonymous shared mapping, never unmapped.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p as usize
    });
    // SAFETY: page-aligned, zero-filled, mapped for the whole process (and
    // its forked children) and only ever accessed atomically.
    unsafe { &*(at as *const AtomicU32) }
}

impl Backend for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn device_description(&self) -> String {
        // With the capability sets of the process that opened it.
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let caps: Vec<&str> = status.lines().filter(|l| l.starts_with("Cap")).collect();
        format!(
            "fake device in process {} ({})",
            std::process::id(),
            caps.join(", ")
        )
    }
    fn reserve(&mut self, _: u64, size: u64) -> Result<(), BackendError> {
        self.arena = vec![0; size as usize];
        Ok(())
    }
    fn upload(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
        let o = offset as usize;
        self.arena[o..o + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn load_image(&mut self, image: &[u8], kernel: &str) -> Result<(), BackendError> {
        if image != b"IMAGE" || kernel != "k" {
            return Err(BackendError::MissingKernel(kernel.into()));
        }
        Ok(())
    }
    fn write_global(&mut self, _: &str, data: &[u8]) -> Result<(), BackendError> {
        self.global = data.to_vec();
        Ok(())
    }
    fn launch(&mut self, args: &[u64], p: &LaunchParams) -> Result<Duration, BackendError> {
        match self.mode {
            Launch::Works => {
                let add = (args[0] + u64::from(self.global[0])) as u8;
                self.arena.iter_mut().for_each(|b| *b = b.wrapping_add(add));
                Ok(Duration::from_millis(3))
            }
            Launch::Aborts => std::process::abort(),
            Launch::Hangs => loop {
                std::thread::sleep(Duration::from_secs(1));
            },
            Launch::TimesOut => Err(BackendError::TimedOut(p.timeout.unwrap_or_default())),
            Launch::WaitsForNext => {
                // Not a timing check: a generous bound on an event that
                // must come before this launch can end.
                for _ in 0..6000 {
                    if opened().load(Ordering::SeqCst) == 1 {
                        return Ok(Duration::from_millis(1));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(BackendError::DeviceFault(
                    "the next replay's child never opened its device".into(),
                ))
            }
        }
    }
    fn download(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), BackendError> {
        let o = offset as usize;
        dst.copy_from_slice(&self.arena[o..o + dst.len()]);
        Ok(())
    }
}

impl Reporting for Fake {
    fn device_uuid(&self) -> Option<String> {
        Some("GPU-fa4e0000-0000-0000-0000-000000000001".into())
    }

    fn upload_stats(&self) -> Option<UploadStats> {
        Some(UploadStats {
            bytes: self.arena.len() as u64,
            elapsed: Duration::from_millis(7),
            busy: Duration::from_millis(5),
        })
    }
}

impl Relocation for Fake {}

fn spawn(mode: Launch) -> ChildBackend {
    ChildBackend::spawn(
        "fake",
        rrstore_replay::sandbox::Mode::Auto,
        factory(mode, false),
    )
    .unwrap()
}

/// A fake backend in `mode`; with `signals`, making it sets [`opened`].
fn factory(mode: Launch, signals: bool) -> rrstore_replay::backend::gpu::child::Factory {
    Box::new(move || {
        if signals {
            opened().store(1, Ordering::SeqCst);
        }
        Ok(Box::new(Fake {
            mode,
            arena: Vec::new(),
            global: Vec::new(),
        }) as Box<dyn Backend>)
    })
}

fn key(device: u32) -> ChildKey {
    ChildKey {
        name: "fake",
        sandbox: rrstore_replay::sandbox::Mode::Auto,
        device,
        arena: Some((0x7e00_0000_0000, 64)),
        reserved: None,
    }
}

fn params(timeout: Option<Duration>) -> LaunchParams {
    LaunchParams {
        num_teams: 1,
        num_threads: 1,
        shared_memory: 0,
        loop_trip_count: 0,
        timeout,
    }
}

fn main() {
    assert!(
        process::single_threaded(),
        "the test must start with one thread"
    );
    a_replay_runs_in_the_child();
    a_fault_that_kills_the_child_is_a_crash_with_its_signal();
    a_launch_that_never_returns_is_killed_after_the_timeout();
    a_timeout_the_child_reports_ends_the_child();
    a_backend_that_cannot_start_says_why();
    a_driver_start_that_hangs_ends_with_its_own_error();
    the_real_gpu_backends_report_a_missing_runtime_from_the_child();
    the_next_child_opens_its_device_while_the_current_kernel_runs();
    a_crash_of_the_current_kernel_does_not_lose_the_next_child();
    a_next_child_that_cannot_start_is_the_next_replays_error();
    a_prestarted_child_serves_only_its_own_key();
    assert!(process::single_threaded(), "no thread left behind");
    println!("gpu_child: all checks passed");
}

fn a_replay_runs_in_the_child() {
    let mut b = spawn(Launch::Works);
    // The child says how it was confined, for the replay's report.
    assert!(
        b.sandbox_applied().is_some(),
        "the GPU child did not report its confinement"
    );
    let description = b.device_description();
    assert!(
        !description.starts_with(&format!("fake device in process {} ", std::process::id())),
        "the device is opened in another process: {description}"
    );
    // The child holds no capability, even when this test runs as root
    // (the driver needs none); its bounding set is empty when it could
    // empty it (CAP_SETPCAP: root).
    let applied = b.sandbox_applied().unwrap();
    assert!(applied.has(Mechanisms::NO_CAPS), "{:?}", applied.names());
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        let empty = format!("{set}:\t0000000000000000");
        assert!(description.contains(&empty), "{empty}: {description}");
    }
    let ours = std::fs::read_to_string("/proc/self/status").unwrap();
    let root = ours
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|eff| eff & (1 << 8) != 0);
    if root {
        assert!(
            description.contains("CapBnd:\t0000000000000000"),
            "{description}"
        );
    }
    let size = (70 << 20) + 5; // more than one window
    b.reserve(0x7e00_0000_0000, size as u64).unwrap();
    let input: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let w = b.staging_window(1000).unwrap().unwrap();
    w.copy_from_slice(&input[..1000]);
    b.commit_staging(0, 1000).unwrap();
    b.upload(1000, &input[1000..]).unwrap();
    b.load_image(b"IMAGE", "k").unwrap();
    let e = b.load_image(b"OTHER", "k").unwrap_err();
    assert!(matches!(e, BackendError::MissingKernel(_)), "{e}");
    b.write_global("g", &[2]).unwrap();
    assert_eq!(
        b.launch(&[1], &params(None)).unwrap(),
        Duration::from_millis(3)
    );
    let mut out = vec![0u8; size];
    b.download(0, &mut out).unwrap();
    assert!(out.iter().zip(&input).all(|(o, i)| *o == i.wrapping_add(3)));
    // The upload statistics come back with the launch (the child's
    // environment has no RRSTORE_GPU_STATS, and its stderr is captured).
    let u = b.upload_stats().expect("the child's upload statistics");
    assert_eq!(
        (u.bytes, u.elapsed, u.busy),
        (
            size as u64,
            Duration::from_millis(7),
            Duration::from_millis(5)
        )
    );
}

fn a_fault_that_kills_the_child_is_a_crash_with_its_signal() {
    let mut b = spawn(Launch::Aborts);
    b.reserve(0x7e00_0000_0000, 64).unwrap();
    let e = b
        .launch(&[0], &params(Some(Duration::from_secs(60))))
        .unwrap_err();
    assert!(
        matches!(e, BackendError::Crashed { signal } if signal == libc::SIGABRT),
        "{e}"
    );
    // Every later call says the same, and dropping does not wait.
    let mut out = [0u8; 8];
    let again = b.download(0, &mut out).unwrap_err();
    assert!(matches!(again, BackendError::Crashed { .. }), "{again}");
}

fn a_launch_that_never_returns_is_killed_after_the_timeout() {
    let mut b = spawn(Launch::Hangs);
    b.reserve(0x7e00_0000_0000, 64).unwrap();
    let limit = Duration::from_millis(100);
    let e = b.launch(&[0], &params(Some(limit))).unwrap_err();
    assert!(matches!(e, BackendError::TimedOut(d) if d == limit), "{e}");
    let mut out = [0u8; 8];
    assert!(matches!(
        b.download(0, &mut out),
        Err(BackendError::TimedOut(_))
    ));
}

fn a_timeout_the_child_reports_ends_the_child() {
    let mut b = spawn(Launch::TimesOut);
    b.reserve(0x7e00_0000_0000, 64).unwrap();
    let e = b
        .launch(&[0], &params(Some(Duration::from_millis(50))))
        .unwrap_err();
    assert!(matches!(e, BackendError::TimedOut(_)), "{e}");
}

fn a_backend_that_cannot_start_says_why() {
    use rrstore_replay::sandbox::{Mode, Probe};
    let fail = || -> rrstore_replay::backend::gpu::child::Factory {
        Box::new(|| Err(BackendError::Unavailable("no fake device here".into())))
    };
    // Unconfined: the backend's own error.
    let e = ChildBackend::spawn("fake", Mode::Off, fail())
        .err()
        .unwrap();
    assert!(
        matches!(&e, BackendError::Unavailable(m) if m == "no fake device here"),
        "{e}"
    );
    // Confined (where this kernel can): the error names the mechanisms and
    // suggests --sandbox off, since the device starts unconfined (a fake
    // device always does); not the "no driver" sentence.
    let e = ChildBackend::spawn("fake", Mode::Auto, fail())
        .err()
        .unwrap();
    use rrstore_replay::sandbox::Mechanisms;
    let all = Probe::current().mechanisms(Mode::Auto).0;
    let applied = Mechanisms(all & (Mechanisms::LANDLOCK | Mechanisms::SECCOMP));
    let m = e.to_string();
    if applied.names().is_empty() {
        assert_eq!(m, "no fake device here");
    } else {
        assert!(matches!(e, BackendError::Unavailable(_)), "{e}");
        assert!(
            m.contains("--sandbox off") && m.contains("no fake device here"),
            "{m}"
        );
        for name in applied.names() {
            assert!(m.contains(name), "{name} not named: {m}");
        }
    }
}

fn a_driver_start_that_hangs_ends_with_its_own_error() {
    // A child whose driver initialisation never returns is killed after
    // the start timeout (the process' settings, RRSTORE_GPU_START_TIMEOUT
    // in the CLI) and reported as such (exit 22), not waited for forever.
    let before = rrstore_replay::settings::get();
    rrstore_replay::settings::update(|s| s.gpu_start_timeout = Duration::from_secs(1));
    let t = std::time::Instant::now();
    let e = ChildBackend::spawn(
        "fake",
        rrstore_replay::sandbox::Mode::Auto,
        Box::new(|| loop {
            std::thread::sleep(Duration::from_secs(1));
        }),
    )
    .err()
    .unwrap();
    rrstore_replay::settings::install(before);
    assert!(
        matches!(&e, BackendError::StartTimedOut { backend, waited }
            if backend == "fake" && *waited == Duration::from_secs(1)),
        "{e}"
    );
    assert!(e.to_string().contains("RRSTORE_GPU_START_TIMEOUT"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

fn the_real_gpu_backends_report_a_missing_runtime_from_the_child() {
    // On a machine without ROCm / the NVIDIA driver (like CI), the real
    // backends fail to start in the child and say why, as in process.
    let hip = open_gpu(
        BackendKind::Hip,
        rrstore_replay::sandbox::Mode::Auto,
        0,
        Some((0x7e00_0000_0000, 1 << 20)),
        Some(1 << 30),
        None,
    );
    match hip {
        Err(BackendError::Unavailable(m)) => assert!(m.contains("libamdhip64"), "{m}"),
        Err(e) => panic!("unexpected error: {e}"),
        Ok(b) => eprintln!(
            "HIP present here ({}): nothing to check",
            b.device_description()
        ),
    }
    let timeout = Some(Duration::from_secs(2));
    match open_gpu(
        BackendKind::Cuda,
        rrstore_replay::sandbox::Mode::Auto,
        0,
        Some((0x7e00_0000_0000, 1 << 20)),
        None,
        timeout,
    ) {
        Err(BackendError::Unavailable(m)) => assert!(m.contains("libcuda"), "{m}"),
        Err(e) => panic!("unexpected error: {e}"),
        Ok(b) => eprintln!(
            "CUDA present here ({}): nothing to check",
            b.device_description()
        ),
    }
}

/// A small replay in `b`: the input comes back with the kernel's 1 added.
fn replays(b: &mut ChildBackend) {
    b.reserve(0x7e00_0000_0000, 64).unwrap();
    b.upload(0, &[5; 64]).unwrap();
    b.load_image(b"IMAGE", "k").unwrap();
    b.write_global("g", &[0]).unwrap();
    b.launch(&[1], &params(None)).unwrap();
    let mut out = [0u8; 64];
    b.download(0, &mut out).unwrap();
    assert_eq!(out, [6; 64]);
}

fn the_next_child_opens_its_device_while_the_current_kernel_runs() {
    opened().store(0, Ordering::SeqCst);
    let mut current = spawn(Launch::WaitsForNext);
    current.reserve(0x7e00_0000_0000, 64).unwrap();
    // What the engine does at the current replay's first launch: the
    // next child is forked (its device opens in the background), then
    // the launch is sent.
    assert!(prestart::prestart_with(
        key(0),
        factory(Launch::Works, true)
    ));
    // This launch ends only once the next child has opened its device: the
    // preparation overlapped it.
    current
        .launch(&[0], &params(Some(Duration::from_secs(120))))
        .unwrap();
    drop(current);
    let mut next = prestart::take(&key(0)).expect("prestarted").unwrap();
    assert_eq!(
        next.device_uuid().as_deref(),
        Some("GPU-fa4e0000-0000-0000-0000-000000000001"),
        "the child reports its device's UUID"
    );
    replays(&mut next);
    assert!(prestart::take(&key(0)).is_none(), "taken once");
}

fn a_crash_of_the_current_kernel_does_not_lose_the_next_child() {
    let mut current = spawn(Launch::Aborts);
    current.reserve(0x7e00_0000_0000, 64).unwrap();
    assert!(prestart::prestart_with(
        key(0),
        factory(Launch::Works, false)
    ));
    let e = current
        .launch(&[0], &params(Some(Duration::from_secs(60))))
        .unwrap_err();
    assert!(matches!(e, BackendError::Crashed { .. }), "{e}");
    drop(current);
    let mut next = prestart::take(&key(0)).expect("prestarted").unwrap();
    replays(&mut next);
    // And a timed-out one (its child killed) neither.
    let mut current = spawn(Launch::Hangs);
    current.reserve(0x7e00_0000_0000, 64).unwrap();
    assert!(prestart::prestart_with(
        key(0),
        factory(Launch::Works, false)
    ));
    let e = current
        .launch(&[0], &params(Some(Duration::from_millis(100))))
        .unwrap_err();
    assert!(matches!(e, BackendError::TimedOut(_)), "{e}");
    drop(current);
    replays(&mut prestart::take(&key(0)).unwrap().unwrap());
}

fn a_next_child_that_cannot_start_is_the_next_replays_error() {
    assert!(prestart::prestart_with(
        key(1),
        Box::new(|| Err(BackendError::Unavailable("no fake device 1 here".into())))
    ));
    match prestart::take(&key(1)) {
        // Under confinement, with the mechanisms and `--sandbox off` around it.
        Some(Err(BackendError::Unavailable(m))) => {
            assert!(m.contains("no fake device 1 here"), "{m}")
        }
        Some(Err(e)) => panic!("unexpected error: {e}"),
        Some(Ok(_)) => panic!("a child that failed to start was handed out"),
        None => panic!("the failure was lost"),
    }
}

fn a_prestarted_child_serves_only_its_own_key() {
    assert!(prestart::prestart_with(
        key(0),
        factory(Launch::Works, false)
    ));
    assert_eq!(prestart::pending(), Some(key(0)));
    // Another device: not this child, which is ended.
    assert!(prestart::take(&key(3)).is_none());
    assert_eq!(prestart::pending(), None);
    assert!(prestart::prestart_with(
        key(0),
        factory(Launch::Works, false)
    ));
    prestart::discard();
    assert!(prestart::take(&key(0)).is_none());
}
