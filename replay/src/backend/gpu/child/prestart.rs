//! The prestarted GPU child of a device lane (issue 21, fleet lookahead):
//! while a lane's kernel runs, the child of its next replay is forked and
//! opens the device (driver and context initialization, its pinned
//! staging), so that the next replay starts with a device ready. One slot
//! per thread: a lane runs on one thread, and a forked child dies with the
//! thread that forked it (`PR_SET_PDEATHSIG`), so a child must not outlive
//! its thread's slot anyway.
//!
//! The child is not tied to a recording, only to what its backend was
//! opened with ([`ChildKey`]): any replay with the same key may take it,
//! and one with another key ends it and starts its own, as without a
//! prestart. Nothing but the device is opened ahead: the arena is reserved
//! and uploaded by the replay that takes it (see docs/fleet.md for why).

use std::cell::RefCell;

use super::{factory, ChildBackend, Factory, Starting};
use crate::backend::BackendError;

/// What a GPU child's backend is opened with ([`super::open_gpu`]'s
/// arguments but the timeout, which goes with each launch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildKey {
    /// `cuda` or `hip`.
    pub name: &'static str,
    /// How the child confines itself (each replay's own setting).
    pub sandbox: crate::sandbox::Mode,
    pub device: u32,
    /// The recorded arena (base, size), held or checked in the child.
    pub arena: Option<(u64, u64)>,
    /// The recorder's reservation size.
    pub reserved: Option<u64>,
}

thread_local! {
    static SLOT: RefCell<Option<(ChildKey, Starting)>> = const { RefCell::new(None) };
}

/// Fork the child for `key` now (the real CUDA or HIP backend) and keep it
/// for the next [`super::open_gpu`] with that key on this thread. `false`
/// when it cannot be forked (this process runs other threads, out of
/// processes): the next replay then starts its own as usual.
pub fn prestart(key: ChildKey) -> bool {
    let make = factory(key.name, key.device, key.arena, key.reserved);
    prestart_with(key, make)
}

/// [`prestart`] with the backend made by `make` (tests: fake devices).
/// Replaces (and ends) a child prestarted before.
pub fn prestart_with(key: ChildKey, make: Factory) -> bool {
    discard();
    match ChildBackend::start(key.name, key.sandbox, make) {
        Ok(child) => {
            SLOT.with(|s| *s.borrow_mut() = Some((key, child)));
            true
        }
        Err(_) => false,
    }
}

/// The child prestarted for `key` on this thread, once its backend is made
/// (its error when it could not be: the replay's own). `None` when there
/// is none; a child prestarted for another key is ended.
pub fn take(key: &ChildKey) -> Option<Result<ChildBackend, BackendError>> {
    let (k, child) = SLOT.with(|s| s.borrow_mut().take())?;
    if &k != key {
        drop(child);
        return None;
    }
    Some(child.ready())
}

/// Whether a child is prestarted on this thread (and for which key).
pub fn pending() -> Option<ChildKey> {
    SLOT.with(|s| s.borrow().as_ref().map(|(k, _)| k.clone()))
}

/// End the child prestarted on this thread, if any (the lane is done, or
/// its next replay will not need it).
pub fn discard() {
    let old = SLOT.with(|s| s.borrow_mut().take());
    drop(old);
}
