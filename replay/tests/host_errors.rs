//! The host backend's failure paths, on real (copied and edited) recordings
//! and real child processes: mismatch reports, tolerance mode, crashes,
//! timeouts, missing symbols/globals/libraries, target and address errors,
//! legacy recordings, launch limits; plus repetitions and --save-output.

mod common;

use std::time::Duration;

use rrstore_replay::backend::BackendError;
use rrstore_replay::engine::VerifyMode;
use rrstore_replay::verify::tolerance::{DType, Tolerance};
use rrstore_replay::{replay, BackendKind, ReplayError, ReplayOptions, ReplaySource, Verdict};

const SAXPY: &str = "__omp_offloading_fe00_9ae056_main_l13";
const REDUCTION: &str = "__omp_offloading_fe00_9ae058_main_l10";

fn run(json: &std::path::Path, opts: &ReplayOptions) -> rrstore_replay::ReplayReport {
    let mut src = ReplaySource::llvm(json).unwrap();
    replay(&mut src, opts)
}

#[test]
fn modified_output_is_a_mismatch_mapped_to_argument_buffers() {
    let tmp = tempfile::tempdir().unwrap();
    let json = common::copy_recording(&common::saxpy_fixture(), tmp.path(), SAXPY);
    let out = tmp.path().join(format!("{SAXPY}.original.output"));
    let mut b = std::fs::read(&out).unwrap();
    // saxpy args: y = arena+0, x = arena+1 MiB, &on_dev = arena+2 MiB.
    for v in &mut b[100..140] {
        *v ^= 0xff; // 40 bytes inside y
    }
    b[1_048_576 + 8] ^= 1; // 1 byte inside x
    std::fs::write(&out, &b).unwrap();
    let r = run(&json, &common::options());
    assert_eq!(r.verdict, Verdict::Mismatch);
    let m = r.mismatch.as_ref().unwrap();
    assert_eq!(m.differing_bytes, 41);
    assert_eq!(m.first_offset, 100);
    assert_eq!(m.ranges, 2);
    let r0 = m.largest[0];
    assert_eq!((r0.offset, r0.span, r0.differing_bytes), (100, 40, 40));
    assert_eq!(m.largest[0].arg.unwrap().index, 1);
    assert_eq!(m.largest[1].arg.unwrap().index, 3);
    // The output hash is that of the replayed arena, not the edited file.
    assert_ne!(r.output_blake3, Some(*blake3::hash(&b).as_bytes()));
    assert!(r.error.is_none());
}

#[test]
fn tolerance_mode_accepts_last_bit_differences_and_rejects_larger_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let json = common::copy_recording(&common::reduction_fixture(), tmp.path(), REDUCTION);
    let out = tmp.path().join(format!("{REDUCTION}.original.output"));
    let mut b = std::fs::read(&out).unwrap();
    b[1_048_592] ^= 1; // lowest mantissa bit of the first input double
    std::fs::write(&out, &b).unwrap();
    let exact = run(&json, &common::options());
    assert_eq!(exact.verdict, Verdict::Mismatch);
    let tol = |rtol, max_ulp| ReplayOptions {
        tolerance: Some(Tolerance {
            dtype: DType::F64,
            rtol,
            atol: 0.0,
            max_ulp,
        }),
        ..common::options()
    };
    let r = run(&json, &tol(1e-12, Some(1)));
    assert_eq!(r.verdict, Verdict::WithinTolerance, "{:?}", r.tolerance);
    let t = r.tolerance.as_ref().unwrap();
    assert_eq!((t.differing, t.out_of_bounds, t.max_ulp), (1, 0, 1));
    let r = run(&json, &tol(0.0, None));
    assert_eq!(r.verdict, Verdict::Mismatch);
    assert_eq!(
        r.tolerance.as_ref().unwrap().first_out_of_bounds,
        Some(1_048_592)
    );
    // An unmodified recording is simply verified in tolerance mode.
    let r = run(&common::reduction_fixture(), &tol(0.0, None));
    assert_eq!(r.verdict, Verdict::Verified);
}

#[test]
fn repetitions_rewrite_input_and_globals_each_time_and_output_can_be_saved() {
    let tmp = tempfile::tempdir().unwrap();
    let save = tmp.path().join("out.bin");
    let opts = ReplayOptions {
        repetitions: 3,
        save_output: Some(save.clone()),
        ..common::options()
    };
    // globals increments g_counter and rescales g_table: only a fresh
    // upload of globals per launch keeps the third launch's output right.
    let r = run(&common::globals_fixture(), &opts);
    assert_eq!(r.verdict, Verdict::Verified, "{:?}", r.mismatch);
    assert_eq!(r.timing.kernel_ns.len(), 3);
    assert_eq!(r.timing.rehydrate_ns.len(), 3);
    assert!(r.timing.kernel_min_ns() <= r.timing.kernel_median_ns());
    let expected = common::globals_fixture().with_extension("original.output");
    assert_eq!(
        std::fs::read(&save).unwrap(),
        std::fs::read(expected).unwrap()
    );
}

#[test]
fn a_crashing_kernel_is_reported_with_its_signal() {
    let tmp = tempfile::tempdir().unwrap();
    let json = common::c_kernel_recording(tmp.path(), "rr_crash", "*(volatile int *)8 = 1;");
    let r = run(&json, &common::options());
    assert_eq!(r.verdict, Verdict::Crashed { signal: 11 }, "{:?}", r.error);
    assert!(r.error.unwrap().to_string().contains("signal 11"));
}

#[test]
fn a_hanging_kernel_is_killed_after_the_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let json =
        common::c_kernel_recording(tmp.path(), "rr_hang", "for (;;) __asm__ volatile(\"\");");
    let opts = ReplayOptions {
        timeout: Some(Duration::from_millis(300)),
        ..common::options()
    };
    let r = run(&json, &opts);
    assert_eq!(r.verdict, Verdict::TimedOut, "{:?}", r.error);
}

#[test]
fn a_kernel_writing_the_arena_through_its_pointer_argument_is_seen_by_the_parent() {
    let tmp = tempfile::tempdir().unwrap();
    let json = common::c_kernel_recording(
        tmp.path(),
        "rr_write",
        "for (int i = 0; i < 16; i++) ((int *)out)[i] = 1000 + i;",
    );
    let r = run(&json, &common::options());
    assert_eq!(r.verdict, Verdict::Mismatch);
    let m = r.mismatch.unwrap();
    assert_eq!(m.largest[0].arg.unwrap().index, 1);
}

#[test]
fn missing_kernel_global_and_wrong_global_size_are_distinct_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let json = common::copy_recording(&common::globals_fixture(), tmp.path(), "no_such_kernel");
    let r = run(&json, &common::options());
    assert!(
        matches!(r.error, Some(ReplayError::Backend(BackendError::MissingKernel(ref k))) if k == "no_such_kernel"),
        "{:?}",
        r.error
    );

    let name = "__omp_offloading_fe00_9ae057_main_l13";
    let g = common::globals_fixture().with_extension("globals");
    let entries = common::parse_globals(&std::fs::read(&g).unwrap());
    let d1 = tmp.path().join("a");
    std::fs::create_dir(&d1).unwrap();
    let json = common::copy_recording(&common::globals_fixture(), &d1, name);
    let mut renamed = entries.clone();
    renamed[0].0 = "g_nothere".into();
    std::fs::write(
        d1.join(format!("{name}.globals")),
        common::encode_globals(&renamed),
    )
    .unwrap();
    let r = run(&json, &common::options());
    assert!(
        matches!(r.error, Some(ReplayError::Backend(BackendError::MissingGlobal { ref name })) if name == "g_nothere"),
        "{:?}",
        r.error
    );

    let d2 = tmp.path().join("b");
    std::fs::create_dir(&d2).unwrap();
    let json = common::copy_recording(&common::globals_fixture(), &d2, name);
    let mut resized = entries.clone();
    let idx = resized.iter().position(|(n, _)| n == "g_counter").unwrap();
    resized[idx].1 = vec![0; 8];
    std::fs::write(
        d2.join(format!("{name}.globals")),
        common::encode_globals(&resized),
    )
    .unwrap();
    let r = run(&json, &common::options());
    assert!(
        matches!(
            r.error,
            Some(ReplayError::Backend(BackendError::GlobalSize {
                recorded: 8,
                actual: 4,
                ..
            }))
        ),
        "{:?}",
        r.error
    );
    assert_eq!(r.verdict, Verdict::Error);
}

#[test]
fn a_missing_runtime_library_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let dep = common::build_so(tmp.path(), "rrgone", "int rrgone_value = 1;\n", &[]);
    let json = common::c_kernel_recording(tmp.path(), "rr_dep", "");
    let so = common::build_so(
        tmp.path(),
        "rr_dep2",
        "extern int rrgone_value; void rr_dep(long a, long b) { rrgone_value++; }\n",
        &["-L", tmp.path().to_str().unwrap(), "-lrrgone"],
    );
    std::fs::copy(so, tmp.path().join("rr_dep.image")).unwrap();
    std::fs::remove_file(dep).unwrap();
    let r = run(&json, &common::options());
    match &r.error {
        Some(ReplayError::Backend(BackendError::MissingLibrary { library, .. })) => {
            assert_eq!(library, "librrgone.so")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn output_snapshot_is_required_only_when_verify_is_explicit() {
    let tmp = tempfile::tempdir().unwrap();
    let json = common::copy_recording(&common::saxpy_fixture(), tmp.path(), SAXPY);
    std::fs::remove_file(tmp.path().join(format!("{SAXPY}.original.output"))).unwrap();
    let r = run(&json, &common::options());
    assert_eq!(r.verdict, Verdict::Unverified, "{:?}", r.error);
    assert!(r.output_blake3.is_some());
    let r = run(
        &json,
        &ReplayOptions {
            verify: VerifyMode::On,
            ..common::options()
        },
    );
    assert!(
        matches!(r.error, Some(ReplayError::NoOutput { .. })),
        "{:?}",
        r.error
    );
}

#[test]
fn legacy_recordings_cannot_be_replayed() {
    let json = common::fixtures().join("legacy/globals/__omp_offloading_fe00_9ae057_main_l13.json");
    let r = run(&json, &common::options());
    assert!(
        matches!(r.error, Some(ReplayError::NotReplayable { .. })),
        "{:?}",
        r.error
    );
    assert!(r.error.unwrap().to_string().contains("arena address"));
}

#[test]
fn another_targets_image_is_refused_naming_both() {
    let tmp = tempfile::tempdir().unwrap();
    let json = common::copy_recording(&common::saxpy_fixture(), tmp.path(), "cubin_rec");
    let elf = rrstore_tests::elf_header(rrstore_tests::elf::EM_CUDA, 90, 0);
    std::fs::write(tmp.path().join("cubin_rec.image"), elf).unwrap();
    let r = run(
        &json,
        &ReplayOptions {
            backend: BackendKind::Host,
            ..common::options()
        },
    );
    match &r.error {
        Some(ReplayError::Backend(BackendError::TargetMismatch { image, device })) => {
            assert_eq!(image, "sm_90");
            assert!(device.contains("host"), "{device}");
        }
        other => panic!("{other:?}"),
    }
    // auto picks the CUDA backend for it; without a usable GPU that is an error too.
    let r = run(&json, &common::options());
    assert_ne!(r.verdict, Verdict::Verified);
}

#[test]
fn an_arena_outside_the_address_space_is_a_reserve_error() {
    let tmp = tempfile::tempdir().unwrap();
    let json = common::copy_recording(&common::globals_fixture(), tmp.path(), "far_away");
    let text = std::fs::read_to_string(&json).unwrap();
    let base = rrstore_tests::descriptor_u64(&text, "BumpAllocVAStart");
    let far = 1u64 << 57;
    std::fs::write(&json, text.replace(&base.to_string(), &far.to_string())).unwrap();
    // At the recorded address only: `auto` would relocate it.
    let opts = ReplayOptions {
        placement: rrstore_replay::placement::Placement::Recorded,
        ..common::options()
    };
    let r = run(&json, &opts);
    match &r.error {
        Some(ReplayError::Backend(BackendError::Reserve { base, reason, .. })) => {
            assert_eq!(*base, far);
            assert!(reason.contains("address space"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn launch_overrides_are_checked_against_recorded_limits() {
    let json = common::fixtures()
        .join("upstream-native/saxpy/15370218017841526287_9883226215827474840.json");
    let opts = ReplayOptions {
        num_threads: Some(2),
        ..common::options()
    };
    let r = run(&json, &opts);
    assert!(
        matches!(
            r.error,
            Some(ReplayError::Limits {
                key: "ThreadsLimits",
                ..
            })
        ),
        "{:?}",
        r.error
    );
    let r = run(
        &json,
        &ReplayOptions {
            ignore_limits: true,
            ..opts
        },
    );
    assert_eq!(r.verdict, Verdict::Verified, "{:?}", r.error);
    assert_eq!(r.num_threads, 2);
}
