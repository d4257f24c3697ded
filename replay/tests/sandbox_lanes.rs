//! The sandbox mode is a setting of each replay's backend configuration,
//! not of the process: two replays running at once in one process (the
//! lanes of `check --jobs`) each get the mode they asked for, and each
//! report says how its own runner was confined.

mod common;

use rrstore_replay::sandbox::{Mechanisms, Mode};
use rrstore_replay::{replay, ReplaySource, Verdict};

fn replay_under(mode: Mode) -> Option<Mechanisms> {
    let d = common::fixtures().join("llvm22-host/saxpy");
    let json = common::descriptors("llvm22-host")
        .into_iter()
        .find(|p| p.starts_with(&d))
        .expect("the saxpy fixture");
    let mut opts = common::options();
    opts.backends.sandbox = mode;
    let mut src = ReplaySource::llvm(&json).unwrap();
    let r = replay(&mut src, &opts);
    assert_eq!(r.verdict, Verdict::Verified, "{mode:?}: {:?}", r.error);
    r.sandbox
}

#[test]
fn two_lanes_of_one_process_replay_under_their_own_modes() {
    for _ in 0..2 {
        let off = std::thread::spawn(|| replay_under(Mode::Off));
        let auto = std::thread::spawn(|| replay_under(Mode::Auto));
        let (off, auto) = (off.join().unwrap(), auto.join().unwrap());
        // Off: the runner confines nothing; Auto: at least what needs no
        // kernel support (its environment, its own process group).
        assert_eq!(off, Some(Mechanisms(0)), "off");
        let auto = auto.expect("the runner reported how it was confined");
        assert!(
            auto.has(Mechanisms::ENV | Mechanisms::PROCESS_GROUP | Mechanisms::NO_NEW_PRIVS),
            "auto: {:?}",
            auto.names()
        );
    }
    // Nothing of either is left behind for the next replay of the process.
    assert!(replay_under(Mode::Auto).is_some_and(|m| m.0 != 0));
    assert_eq!(replay_under(Mode::Off), Some(Mechanisms(0)));
}
