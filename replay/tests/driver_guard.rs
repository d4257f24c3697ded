//! No GPU child is forked after a driver initialisation in this process,
//! and device listings query the driver in a short-lived child, so the
//! process that forks GPU children never initialises a driver itself.
//!
//! The guard is process-wide and cannot be unset, so this file is its own
//! test binary; it forks, which needs the process' only thread
//! (`harness = false`).

use rrstore_replay::backend::gpu::child::ChildBackend;
use rrstore_replay::backend::gpu::driver_guard::{self, check_fork, in_child, note_driver_init};
use rrstore_replay::backend::host::process;
use rrstore_replay::backend::{devices, BackendError};

fn main() {
    assert!(process::single_threaded(), "one thread at the start");
    a_listing_runs_its_driver_calls_in_a_child();
    a_listing_that_hangs_is_bounded();
    no_gpu_child_is_forked_after_a_driver_initialisation();
    println!("driver_guard: all checks passed");
}

fn a_listing_runs_its_driver_calls_in_a_child() {
    // The query "initialises a driver" and says where it ran: in another
    // process, which leaves this one free to fork.
    let pid = in_child("fake", || {
        note_driver_init("fake");
        Ok(std::process::id())
    })
    .unwrap();
    assert_ne!(pid, std::process::id());
    assert_eq!(driver_guard::initialised(), None);
    // The real listings go the same way: whatever this machine has, the
    // process is still driver-free afterwards.
    let all = devices::all();
    assert_eq!(all.len(), 3);
    assert_eq!(driver_guard::initialised(), None, "{all:?}");
    // Errors come back as they are.
    let e = in_child::<u32>("fake", || Err(BackendError::Unavailable("none".into())));
    assert!(matches!(e, Err(BackendError::Unavailable(ref m)) if m == "none"));
}

fn a_listing_that_hangs_is_bounded() {
    let before = rrstore_replay::settings::get();
    rrstore_replay::settings::update(|s| {
        s.gpu_start_timeout = std::time::Duration::from_secs_f64(0.5)
    });
    let e = in_child::<u32>("fake", || loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    })
    .unwrap_err();
    rrstore_replay::settings::install(before);
    assert!(matches!(e, BackendError::StartTimedOut { .. }), "{e}");
}

fn no_gpu_child_is_forked_after_a_driver_initialisation() {
    assert!(check_fork("a test child").is_ok());
    note_driver_init("cuda");
    let e = check_fork("a test child").unwrap_err().to_string();
    assert!(
        e.contains("cuda driver was initialised in this process"),
        "{e}"
    );
    let e = ChildBackend::spawn(
        "fake",
        rrstore_replay::sandbox::Mode::Auto,
        Box::new(|| unreachable!("no child may be forked")),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("cannot fork the fake runner process"), "{e}");
    // A listing now runs here (forking would not help any more).
    let pid = in_child("fake", || Ok(std::process::id())).unwrap();
    assert_eq!(pid, std::process::id());
}
