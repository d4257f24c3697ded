//! Shared helpers of the replay crate's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rrstore_format::{PartRole, Recording};
use rrstore_replay::backend::host::{ArenaIo, HostConfig, HostSettings, Runner};
use rrstore_replay::backend::{Backend, LaunchParams};
use rrstore_replay::{BackendConfig, ReplayOptions, ReplaySource};

#[allow(unused_imports)] // not every test binary needs it
pub use rrstore_tests::fixtures;

#[allow(unused_imports)] // not every test binary needs it
pub use rrstore_tests::descriptors;

/// Options using this crate's stand-alone runner. OMP_NUM_THREADS=2: the
/// fixtures were recorded with two OpenMP threads and their float
/// reductions are bit-reproducible only with the same count.
pub fn options() -> ReplayOptions {
    ReplayOptions {
        backends: BackendConfig {
            host: HostSettings {
                runner: Some(Runner {
                    program: env!("CARGO_BIN_EXE_rrstore-host-runner").into(),
                    args: vec![],
                }),
                env: vec![("OMP_NUM_THREADS".into(), "2".into())],
                ..HostSettings::default()
            },
            ..BackendConfig::default()
        },
        ..ReplayOptions::default()
    }
}

/// Copy the kernel-named recording `<fixture>/<stem>.*` into `dir`, renamed
/// to `new_name` (files and the descriptor's `Name`). Returns the new .json.
pub fn copy_recording(fixture_json: &Path, dir: &Path, new_name: &str) -> PathBuf {
    let stem = fixture_json
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let src_dir = fixture_json.parent().unwrap();
    for e in std::fs::read_dir(src_dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if let Some(ext) = name.strip_prefix(&format!("{stem}.")) {
            let dst = dir.join(format!("{new_name}.{ext}"));
            if ext == "json" {
                let text = std::fs::read_to_string(&p).unwrap();
                let old = format!("\"Name\":\"{stem}\"");
                assert!(text.contains(&old), "{text}");
                std::fs::write(
                    &dst,
                    text.replace(&old, &format!("\"Name\":\"{new_name}\"")),
                )
                .unwrap();
            } else {
                std::fs::copy(&p, &dst).unwrap();
            }
        }
    }
    dir.join(format!("{new_name}.json"))
}

/// Compile C source into a shared object with the system C compiler (the
/// Rust toolchain's linker, so always present where the tests build).
pub fn build_so(dir: &Path, name: &str, c_src: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(format!("lib{name}.so"));
    let flags: Vec<&str> = ["-O1"].iter().chain(extra).copied().collect();
    rrstore_tests::compile_shared(&dir.join(format!("{name}.c")), c_src, &out, &flags);
    out
}

/// The globals fixture (2 args: KLE, pointer to out[16]).
pub fn globals_fixture() -> PathBuf {
    fixtures().join("llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13.json")
}

pub fn saxpy_fixture() -> PathBuf {
    fixtures().join("llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13.json")
}

pub fn reduction_fixture() -> PathBuf {
    fixtures().join("llvm22-host/reduction/__omp_offloading_fe00_9ae058_main_l10.json")
}

/// A recording of the globals fixture's arena whose image is a C kernel
/// `name(long kle, long out)` with body `body`, and no globals.
pub fn c_kernel_recording(dir: &Path, name: &str, body: &str) -> PathBuf {
    let json = copy_recording(&globals_fixture(), dir, name);
    let so = build_so(
        dir,
        name,
        &format!("void {name}(long kle, long out) {{ {body} }}\n"),
        &[],
    );
    std::fs::copy(so, dir.join(format!("{name}.image"))).unwrap();
    std::fs::write(dir.join(format!("{name}.globals")), b"").unwrap();
    json
}

#[allow(unused_imports)] // not every test binary needs them
pub use rrstore_tests::{encode_globals, parse_globals};

/// A whole part of `src`, decoded.
pub fn read_part(src: &mut ReplaySource, role: PartRole) -> Vec<u8> {
    let len = src.recording.part(role).map_or(0, |p| p.len);
    let mut buf = vec![0u8; len as usize];
    src.parts.read_part_into(role, &mut buf).unwrap();
    buf
}

/// The engine's last steps by hand on a backend whose arena is filled and
/// image loaded: write `rec`'s globals (from its globals part), launch with
/// the recorded arguments and configuration, and return the arena's hash.
pub fn write_globals_and_launch(
    b: &mut dyn Backend,
    rec: &Recording,
    globals: &[u8],
) -> Option<[u8; 32]> {
    for g in &rec.globals {
        let at = g.data_offset as usize;
        b.write_global(&g.name, &globals[at..at + g.size as usize])
            .unwrap();
    }
    let params = LaunchParams {
        num_teams: rec.launch.num_teams,
        num_threads: rec.launch.num_threads,
        shared_memory: rec.launch.shared_memory,
        loop_trip_count: rec.launch.loop_trip_count,
        timeout: None,
    };
    b.launch(&rec.args, &params).unwrap();
    b.arena_hash().unwrap()
}

/// The host backend's settings of [`options`], for tests that drive a
/// `HostBackend` by hand.
pub fn host_config() -> HostConfig {
    let host = options().backends.host;
    HostConfig {
        runner: host.runner.unwrap(),
        env: host.env,
        arena_io: ArenaIo::Auto,
        preload: host.preload,
        arena_cache: host.arena_cache,
    }
}

/// A fresh read-only anonymous mapping of `len` bytes in this process (the
/// caller unmaps it with `libc::munmap`).
pub fn map_anonymous(len: usize) -> *mut libc::c_void {
    // SAFETY: a new private anonymous mapping at an address the kernel
    // picks; nothing existing is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    p
}
