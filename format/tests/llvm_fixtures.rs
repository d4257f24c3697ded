//! Import and export of every real fixture: generation detection, decoded
//! fields, byte-for-byte lossless export, and cross-layout conversion
//! checked against the corpus' own native files.

mod llvm_common;

use std::fs;

use llvm_common::*;
use rrstore_format::image::ImageTarget;
use rrstore_format::llvm::{self, Layout};
use rrstore_format::{Generation, PartRole};

#[test]
fn every_fixture_loads_with_its_generation_and_no_warnings() {
    for (dir, generation, count) in [
        ("llvm22-host", Generation::KernelNamed, 11),
        ("upstream-native", Generation::Native, 11),
        ("legacy", Generation::KernelNamedLegacy, 1),
    ] {
        let recs = recordings(dir);
        assert_eq!(recs.len(), count, "{dir}: {recs:?}");
        for path in recs {
            let l = llvm::load(&path).unwrap();
            let r = &l.recording;
            assert_eq!(r.generation, generation, "{}", path.display());
            assert!(
                l.warnings.is_empty(),
                "{}: {:?}",
                path.display(),
                l.warnings
            );
            assert_eq!(r.args.len(), r.arg_offsets.len());
            assert_eq!(r.args[0], u64::MAX, "KLE sentinel -1 is all ones");
            assert_eq!(r.descriptor, fs::read(&path).unwrap());
            let input = r.part(PartRole::Input).unwrap();
            assert_eq!(input.len, r.arena.size);
            assert_eq!(r.part(PartRole::Output).unwrap().len, input.len);
            let want_target = match generation {
                Generation::KernelNamedLegacy => ImageTarget::None,
                _ => ImageTarget::X86_64,
            };
            assert_eq!(r.image_target, want_target);
            assert_eq!(
                r.arena.base.is_some(),
                generation != Generation::KernelNamedLegacy
            );
        }
    }
}

#[test]
fn saxpy_fields_are_exact() {
    let p = fixtures().join("llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13.json");
    let r = llvm::load(&p).unwrap().recording;
    assert_eq!(r.kernel, "__omp_offloading_fe00_9ae056_main_l13");
    assert_eq!(
        r.args,
        vec![
            u64::MAX,
            139753905176592,
            1075838976,
            139753906225168,
            262144,
            139753907273744
        ]
    );
    assert_eq!(r.arena.base, Some(139753905176592));
    assert_eq!(r.arena.size, 2097168);
    assert_eq!(r.launch.loop_trip_count, 262144);
    assert_eq!((r.launch.num_teams, r.launch.num_threads), (1, 1));
    assert_eq!(r.device_id, 3);
    assert_eq!(r.arena.offset_of(r.args[3]), Some(1048576));
    assert!(r.globals.is_empty());
    let blake = blake3::hash(&fs::read(p.with_extension("memory")).unwrap());
    assert_eq!(r.part(PartRole::Input).unwrap().blake3, *blake.as_bytes());
}

#[test]
fn globals_of_both_encodings_agree() {
    let kn = llvm::load(
        &fixtures().join("llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13.json"),
    )
    .unwrap()
    .recording;
    let nat = llvm::load(
        &fixtures().join("upstream-native/globals/8213343555634104159_9883226215827474840.json"),
    )
    .unwrap()
    .recording;
    let names: Vec<_> = kn
        .globals
        .iter()
        .map(|g| (g.name.as_str(), g.size))
        .collect();
    assert_eq!(
        names,
        vec![("g_counter", 4), ("g_table", 2048), ("g_scale", 4)]
    );
    let nat_names: Vec<_> = nat
        .globals
        .iter()
        .map(|g| (g.name.as_str(), g.size))
        .collect();
    assert_eq!(names, nat_names);
    // Same data at the stated offsets.
    let a = fs::read(
        fixtures().join("llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13.globals"),
    )
    .unwrap();
    let b = fs::read(
        fixtures().join("upstream-native/globals/8213343555634104159_9883226215827474840.globals"),
    )
    .unwrap();
    for (g, h) in kn.globals.iter().zip(&nat.globals) {
        let ga = &a[g.data_offset as usize..][..g.size as usize];
        let hb = &b[h.data_offset as usize..][..h.size as usize];
        assert_eq!(ga, hb, "{}", g.name);
    }
    assert_eq!(nat.arena.reserved, Some(1 << 30));
    assert_eq!(nat.launch.teams_limits, Some([0, 0]));
    assert_eq!(nat.launch.threads_limits, Some([1, 1]));
}

#[test]
fn lossless_export_of_every_fixture_is_byte_identical() {
    for dir in ["llvm22-host", "upstream-native", "legacy"] {
        for path in recordings(dir) {
            let mut l = llvm::load(&path).unwrap();
            let rec = l.recording.clone();
            let stem = rec.stem.clone();
            let want = files_of(path.parent().unwrap(), &stem);
            for layout in [None, Some(Layout::of(rec.generation))] {
                let out = tempfile::tempdir().unwrap();
                let written = llvm::export(&rec, &mut l, out.path(), layout).unwrap();
                assert_eq!(written.len(), want.len(), "{}", path.display());
                assert_eq!(written[0], out.path().join(format!("{stem}.json")));
                let got = all_files(out.path());
                assert_eq!(
                    got.keys().collect::<Vec<_>>(),
                    want.keys().collect::<Vec<_>>(),
                    "{}",
                    path.display()
                );
                assert!(got == want, "{}: bytes differ", path.display());
            }
        }
    }
}

/// The upstream-native fixtures were written from the llvm22-host ones by
/// to-upstream-layout.py: our conversion must reproduce them exactly, and
/// converting them back must give the LLVM 22 files exactly.
#[test]
fn cross_layout_export_matches_the_corpus_both_ways() {
    for path in recordings("llvm22-host") {
        let rel = path
            .parent()
            .unwrap()
            .strip_prefix(fixtures().join("llvm22-host"))
            .unwrap()
            .to_path_buf();
        let native_dir = fixtures().join("upstream-native").join(&rel);
        let kn_dir = path.parent().unwrap();

        let mut l = llvm::load(&path).unwrap();
        let rec = l.recording.clone();
        let out = tempfile::tempdir().unwrap();
        let written = llvm::export(&rec, &mut l, out.path(), Some(Layout::Native)).unwrap();
        assert!(written[0].extension().unwrap() == "json");
        let got = all_files(out.path());
        let want = all_files(&native_dir);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{rel:?}"
        );
        for (name, bytes) in &want {
            assert!(&got[name] == bytes, "{rel:?}/{name} differs");
        }

        // The written native files load as native without warnings, and go
        // back to the original LLVM 22 files.
        let mut back = llvm::load(&written[0]).unwrap();
        assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        assert_eq!(back.recording.generation, Generation::Native);
        let nrec = back.recording.clone();
        let out2 = tempfile::tempdir().unwrap();
        llvm::export(&nrec, &mut back, out2.path(), Some(Layout::KernelNamed)).unwrap();
        let got = all_files(out2.path());
        let want = files_of(kn_dir, &rec.stem);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>()
        );
        assert!(got == want, "{rel:?}: native -> kernel-named differs");
    }
}

#[test]
fn legacy_cannot_become_native_and_stays_legacy_as_kernel_named() {
    let path = recordings("legacy").remove(0);
    let mut l = llvm::load(&path).unwrap();
    let rec = l.recording.clone();
    let out = tempfile::tempdir().unwrap();
    let e = llvm::export(&rec, &mut l, out.path(), Some(Layout::Native)).unwrap_err();
    assert!(e.to_string().contains("VAllocAddr"), "{e}");
    let written = llvm::export(&rec, &mut l, out.path(), Some(Layout::KernelNamed)).unwrap();
    assert_eq!(written.len(), 3);
    assert_eq!(fs::read(&written[0]).unwrap(), fs::read(&path).unwrap());
}

#[test]
fn shared_memory_cannot_go_to_kernel_named() {
    let path = recordings("upstream-native").remove(0);
    let mut l = llvm::load(&path).unwrap();
    let mut rec = l.recording.clone();
    rec.launch.shared_memory = 256;
    let out = tempfile::tempdir().unwrap();
    let e = llvm::export(&rec, &mut l, out.path(), Some(Layout::KernelNamed)).unwrap_err();
    assert!(e.to_string().contains("SharedMemorySize is 256"), "{e}");
}

#[test]
fn bitcode_is_optional_and_replay_output_is_ignored() {
    let src =
        fixtures().join("upstream-native/saxpy/15370218017841526287_9883226215827474840.json");
    let tmp = tempfile::tempdir().unwrap();
    let desc = copy_recording(&src, tmp.path());
    let stem = "15370218017841526287_9883226215827474840";
    fs::write(
        tmp.path().join(format!("{stem}.bc")),
        b"BC\xc0\xdedevice ir",
    )
    .unwrap();
    fs::write(
        tmp.path().join(format!("{stem}.replay_output")),
        b"replayed",
    )
    .unwrap();
    let mut l = llvm::load(&desc).unwrap();
    assert_eq!(l.recording.part(PartRole::Bitcode).unwrap().len, 13);
    assert_eq!(l.files.len(), 5);
    let rec = l.recording.clone();
    let out = tempfile::tempdir().unwrap();
    llvm::export(&rec, &mut l, out.path(), None).unwrap();
    let got = all_files(out.path());
    assert!(got.contains_key(&format!("{stem}.bc")));
    assert!(!got.contains_key(&format!("{stem}.replay_output")));
    assert_eq!(got, files_of(tmp.path(), stem));
}

#[test]
fn renamed_native_recording_warns_with_both_hashes() {
    let src =
        fixtures().join("upstream-native/saxpy/15370218017841526287_9883226215827474840.json");
    let tmp = tempfile::tempdir().unwrap();
    let old = "15370218017841526287_9883226215827474840";
    for (name, bytes) in files_of(src.parent().unwrap(), old) {
        fs::write(
            tmp.path().join(name.replace(old, "1_9883226215827474840")),
            bytes,
        )
        .unwrap();
    }
    let l = llvm::load(&tmp.path().join("1_9883226215827474840.json")).unwrap();
    assert_eq!(l.warnings.len(), 1);
    let w = &l.warnings[0];
    assert!(
        w.contains("KernelHash 1 (recomputed 15370218017841526287)"),
        "{w}"
    );
}

#[test]
fn find_recordings_walks_sorted_and_accepts_a_json_path() {
    let all = llvm::find_recordings(&fixtures().join("llvm22-host")).unwrap();
    assert_eq!(all.len(), 11);
    // Other fixture folders (images, ...) may hold more; these 23 are there.
    let everything = llvm::find_recordings(&fixtures()).unwrap();
    assert!(everything.len() >= 23);
    assert!(all.iter().all(|p| everything.contains(p)));
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);
    let one = &all[0];
    assert_eq!(llvm::find_recordings(one).unwrap(), vec![one.clone()]);
    assert!(llvm::find_recordings(&fixtures().join("nope")).is_err());
}

#[test]
fn integers_beyond_2_pow_53_survive_load_and_cross_export_exactly() {
    let src = fixtures().join("llvm22-host/saxpy/__omp_offloading_fe00_9ae056_main_l13.json");
    let tmp = tempfile::tempdir().unwrap();
    let desc = copy_recording(&src, tmp.path());
    let s = fs::read_to_string(&desc).unwrap();
    // The by-value float `a` becomes 2^53 + 1 and n becomes -2.
    let s = s
        .replace(",1075838976,", ",9007199254740993,")
        .replace(",262144,139753907273744]", ",-2,139753907273744]");
    fs::write(&desc, &s).unwrap();
    let mut l = llvm::load(&desc).unwrap();
    assert_eq!(l.recording.args[2], 9007199254740993);
    assert_eq!(l.recording.args[4], (-2i64) as u64);
    let rec = l.recording.clone();
    let out = tempfile::tempdir().unwrap();
    let written = llvm::export(&rec, &mut l, out.path(), Some(Layout::Native)).unwrap();
    let json = fs::read_to_string(&written[0]).unwrap();
    assert!(
        json.contains(
            "\"ArgPtrs\":[-1,139753905176592,9007199254740993,139753906225168,-2,139753907273744]"
        ),
        "{json}"
    );
}
