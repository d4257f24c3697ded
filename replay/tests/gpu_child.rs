//! The GPU child runner with fake device backends: a launch that kills its
//! process (as ROCm's handler does on a GPU memory fault) ends the child,
//! not this process, and is reported as a crash with its signal; a launch
//! that never returns (as `hipEventSynchronize` on a kernel that never
//! ends) is killed after `--timeout` and reported as timed out; the bytes
//! and calls of a normal replay reach the child and come back.
//!
//! The runner is forked, which needs a single-threaded process: this file
//! runs without libtest (`harness = false`), on the process' only thread.

use std::time::Duration;

use rrstore_replay::backend::gpu_child::{open_gpu, ChildBackend};
use rrstore_replay::backend::host::process;
use rrstore_replay::backend::{Backend, BackendError, LaunchParams};

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
}

/// A device in host memory.
struct Fake {
    mode: Launch,
    arena: Vec<u8>,
    global: Vec<u8>,
}

impl Backend for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn device_description(&self) -> String {
        format!("fake device in process {}", std::process::id())
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
        }
    }
    fn download(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), BackendError> {
        let o = offset as usize;
        dst.copy_from_slice(&self.arena[o..o + dst.len()]);
        Ok(())
    }
}

fn spawn(mode: Launch) -> ChildBackend {
    ChildBackend::spawn(
        "fake",
        rrstore_replay::sandbox::Mode::Auto,
        Box::new(move || {
            Ok(Box::new(Fake {
                mode,
                arena: Vec::new(),
                global: Vec::new(),
            }) as Box<dyn Backend>)
        }),
    )
    .unwrap()
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
    the_real_gpu_backends_report_a_missing_runtime_from_the_child();
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
    assert_ne!(
        b.device_description(),
        format!("fake device in process {}", std::process::id()),
        "the device is opened in another process"
    );
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
    let e = ChildBackend::spawn(
        "fake",
        rrstore_replay::sandbox::Mode::Auto,
        Box::new(|| Err(BackendError::Unavailable("no fake device here".into()))),
    )
    .err()
    .unwrap();
    assert!(
        matches!(&e, BackendError::Unavailable(m) if m == "no fake device here"),
        "{e}"
    );
}

fn the_real_gpu_backends_report_a_missing_runtime_from_the_child() {
    // On a machine without ROCm / the NVIDIA driver (like CI), the real
    // backends fail to start in the child and say why, as in process.
    let hip = open_gpu(
        "hip",
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
        "cuda",
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
