//! The spare runner (`prestart`): executed early, it preloads the offload
//! runtime while the recording is opened, and serves the next reservation
//! unless what it loaded does not suit the image or sits in the range;
//! runners are always executed, never forked (`backend::host::process`),
//! whatever the threads of this process.
//!
//! The spare is process-wide, so this file runs without libtest
//! (`harness = false` in Cargo.toml): `main` runs the checks in order and
//! panics on the first failure.

mod common;

use rrstore_format::PartRole;
use rrstore_replay::backend::host::{end_spare, prestart, HostBackend, Preload};
use rrstore_replay::backend::{Backend, Reporting};
use rrstore_replay::{replay, ReplaySource, Verdict};

fn main() {
    every_recording_verifies_in_an_executed_runner();
    globals_and_arguments_reach_the_runner(false);
    globals_and_arguments_reach_the_runner(true);
    a_range_taken_here_is_mapped_in_the_runner();
    a_spare_that_preloaded_what_the_image_does_not_need_is_replaced();
    a_spare_whose_preload_sits_in_the_range_is_replaced();
    an_ended_spare_is_not_used();
    an_image_with_its_own_search_path_gets_a_runner_that_loaded_nothing();
    another_thread_changes_nothing();
    println!("host_spare: all checks passed");
}

/// The engine's replays, one after the other in this process: each must
/// verify.
fn every_recording_verifies_in_an_executed_runner() {
    let mut n = 0;
    for set in ["llvm22-host", "upstream-native"] {
        for d in common::descriptors(set) {
            let mut src = ReplaySource::llvm(&d).unwrap();
            let r = replay(&mut src, &common::options());
            assert_eq!(r.verdict, Verdict::Verified, "{d:?}: {:?}", r.error);
            n += 1;
        }
    }
    assert!(n >= 10, "only {n} fixtures found");
}

/// The backend steps by hand on the recording with globals: the runner
/// (a spare started by `prestart`, or one started when reserving) holds
/// the recorded output after the launch.
fn globals_and_arguments_reach_the_runner(prestarted: bool) {
    let d = common::descriptors("llvm22-host")
        .into_iter()
        .find(|d| d.to_str().unwrap().contains("/globals/"))
        .unwrap();
    let mut src = ReplaySource::llvm(&d).unwrap();
    let rec = src.recording.clone();
    let (image, input, globals) = (
        common::read_part(&mut src, PartRole::Image),
        common::read_part(&mut src, PartRole::Input),
        common::read_part(&mut src, PartRole::Globals),
    );
    assert!(!rec.globals.is_empty());
    if prestarted {
        prestart(&common::host_config());
    }
    let mut b = HostBackend::new(common::host_config());
    b.expect_image(&image);
    b.reserve(rec.arena.base.unwrap(), rec.arena.size).unwrap();
    // The spare started loading the offload runtime this machine has (the
    // one the fixtures were built against) before the arena was known.
    let preloaded = b.runner_preloaded().to_vec();
    if prestarted {
        assert!(
            preloaded
                .iter()
                .any(|l| l.starts_with("libomptarget.so.22")),
            "{preloaded:?}"
        );
    } else {
        assert!(preloaded.is_empty(), "{preloaded:?}");
    }
    b.load_image(&image, &rec.kernel).unwrap();
    b.upload(0, &input).unwrap();
    let out = rec.part(PartRole::Output).unwrap().blake3;
    assert_eq!(
        common::write_globals_and_launch(&mut b, &rec, &globals),
        Some(out)
    );
    assert!(!b.runtime_libraries().is_empty());
}

/// A range this process already uses is no matter: the runner maps it in
/// its own address space.
fn a_range_taken_here_is_mapped_in_the_runner() {
    // Any mapping of this process will do: a fresh anonymous one.
    let len = 1 << 20;
    let p = common::map_anonymous(len);
    let base = p as u64 + 4096;
    let mut b = HostBackend::new(common::host_config());
    b.reserve(base, 8192).unwrap();
    let data: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8).collect();
    b.upload(0, &data).unwrap();
    assert_eq!(
        b.arena_hash().unwrap(),
        Some(*blake3::hash(&data).as_bytes())
    );
    drop(b);
    // SAFETY: the mapping made above, not used any more.
    unsafe { libc::munmap(p, len) };
}

/// The globals recording's image, arena base and input.
fn globals_recording() -> (Vec<u8>, u64, Vec<u8>) {
    let d = common::globals_fixture();
    let mut src = ReplaySource::llvm(&d).unwrap();
    let base = src.recording.arena.base.unwrap();
    let image = common::read_part(&mut src, PartRole::Image);
    let input = common::read_part(&mut src, PartRole::Input);
    (image, base, input)
}

/// The runner `b` reserved in loaded nothing before, and its arena holds
/// what is written to it.
fn check_clean_runner(b: &mut HostBackend, data: &[u8]) {
    assert!(
        b.runner_preloaded().is_empty(),
        "{:?}",
        b.runner_preloaded()
    );
    b.upload(0, data).unwrap();
    assert_eq!(
        b.arena_hash().unwrap(),
        Some(*blake3::hash(data).as_bytes())
    );
}

/// A spare that preloaded a library the image does not link is not used:
/// a fresh runner that loaded nothing runs the replay.
fn a_spare_that_preloaded_what_the_image_does_not_need_is_replaced() {
    let (image, base, input) = globals_recording();
    let mut config = common::host_config();
    config.preload = Preload::Libraries(vec!["libz.so.1".into()]);
    prestart(&config);
    let mut b = HostBackend::new(config);
    b.expect_image(&image);
    b.reserve(base, input.len() as u64).unwrap();
    check_clean_runner(&mut b, &input);
}

/// A library the spare preloaded sits where the arena must go: the spare
/// is dropped and the arena is mapped in a runner that loaded nothing.
fn a_spare_whose_preload_sits_in_the_range_is_replaced() {
    let (image, _, _) = globals_recording();
    let mut config = common::host_config();
    // A library the image needs (so the spare is not refused for that) and
    // that this test process has not loaded (so the range is free here).
    let lib = "libstdc++.so.6";
    assert!(
        !std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .contains("libstdc++"),
        "the test process must not have {lib} loaded"
    );
    config.preload = Preload::Libraries(vec![lib.into()]);
    prestart(&config);
    // Where the spare mapped it (the child of this process that has it).
    let children = format!("/proc/self/task/{}/children", std::process::id());
    let mut base = None;
    for _ in 0..500 {
        let pids = std::fs::read_to_string(&children).unwrap();
        base = pids.split_whitespace().find_map(|pid| {
            let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
            let line = maps.lines().find(|l| l.contains("libstdc++"))?;
            u64::from_str_radix(line.split('-').next()?, 16).ok()
        });
        if base.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let base = base.expect("the spare never mapped libstdc++");
    let mut b = HostBackend::new(config);
    b.expect_image(&image);
    b.reserve(base, 8192).unwrap();
    let data: Vec<u8> = (0..8192u32).map(|i| (i % 241) as u8).collect();
    check_clean_runner(&mut b, &data);
}

/// A spare ended because the replay runs on another backend is gone: the
/// next reservation starts a runner that loaded nothing.
fn an_ended_spare_is_not_used() {
    let (image, base, input) = globals_recording();
    prestart(&common::host_config());
    end_spare();
    let mut b = HostBackend::new(common::host_config());
    b.expect_image(&image);
    b.reserve(base, input.len() as u64).unwrap();
    check_clean_runner(&mut b, &input);
}

/// A shared object linking `libz.so.1`, built with `cc` (and `extra` flags)
/// in `dir`.
fn image_needing_libz(dir: &std::path::Path, name: &str, extra: &[&str]) -> Vec<u8> {
    let c = dir.join("k.c");
    std::fs::write(
        &c,
        "const char *zlibVersion(void);\nconst char *k(void) { return zlibVersion(); }\n",
    )
    .unwrap();
    let out = dir.join(name);
    let st = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&c)
        .args(["-Wl,--no-as-needed", "-l:libz.so.1"])
        .args(extra)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::read(out).unwrap()
}

/// An image that names a library search path of its own could have found
/// another file than the preloaded one under the same soname: a spare that
/// preloaded anything does not serve it, while the same image without the
/// search path is served.
fn an_image_with_its_own_search_path_gets_a_runner_that_loaded_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plain = image_needing_libz(dir.path(), "plain.so", &[]);
    let with_path = image_needing_libz(dir.path(), "rpath.so", &["-Wl,-rpath,/opt/llvm/lib"]);
    let mut config = common::host_config();
    config.preload = Preload::Libraries(vec!["libz.so.1".into()]);
    let base = 0x5e00_0000_0000u64;
    for (image, served) in [(&plain, true), (&with_path, false)] {
        prestart(&config);
        let mut b = HostBackend::new(config.clone());
        b.expect_image(image);
        b.reserve(base, 4096).unwrap();
        let expected = if served { vec!["libz.so.1"] } else { vec![] };
        assert_eq!(b.runner_preloaded(), expected, "served: {served}");
    }
}

/// With a second thread alive the runners start as they do without it.
fn another_thread_changes_nothing() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || rx.recv().ok());
    let base = 0x5f00_0000_0000u64;
    // Both ways of starting a runner execute it now.
    prestart(&common::host_config());
    let mut b = HostBackend::new(common::host_config());
    b.reserve(base, 4096).unwrap();
    drop(b);
    let mut b = HostBackend::new(common::host_config());
    b.reserve(base, 4096).unwrap();
    b.upload(0, &[7u8; 4096]).unwrap();
    assert_eq!(
        b.arena_hash().unwrap(),
        Some(*blake3::hash(&[7u8; 4096]).as_bytes())
    );
    drop(b);
    tx.send(()).unwrap();
    t.join().unwrap();
}
