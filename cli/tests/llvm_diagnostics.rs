//! What rrstore says about recordings stock LLVM cannot make replayable,
//! through the real binary: `record` on a libomptarget that cannot size its
//! record arena ("cannot determine Device Memory Size"), and `import` of a
//! descriptor whose `ArgPtrs` are stack-slot addresses (stock LLVM 19-22).

#[path = "store_common/mod.rs"]
mod store_common;

use std::path::Path;

use store_common::*;

#[test]
fn record_explains_a_host_plugin_that_cannot_record() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("s");
    // What a program linked with stock LLVM 22's host plugin prints.
    let prog = t.path().join("prog.sh");
    rrstore_tests::write_script(
        &prog,
        "#!/bin/sh\necho 'omptarget message: WARNING RR did not initialize RR-properly with \
         2147483648 bytesError: cannot determine Device Memory Size' >&2\n\
         echo 'other output' >&2\nexit 0\n",
    );
    let (code, err) = fails(&s, &["record", "--", prog.to_str().unwrap()]);
    assert_eq!(code, 15, "{err}");
    // The program's own stderr still reaches the user, then the diagnosis.
    assert!(err.contains("other output"), "{err}");
    assert!(
        err.contains("wrote no recording")
            && err.contains("cannot record")
            && err.contains("host (x86_64) plugin")
            && err.contains("Which recordings replay"),
        "{err}"
    );
    // A program that writes nothing for another reason gets the general message.
    let (code, err) = fails(&s, &["record", "--", "true"]);
    assert_eq!(code, 15);
    assert!(!err.contains("host (x86_64) plugin"), "{err}");
}

/// Copy a recording's files into `dir`, its descriptor's `ArgPtrs`
/// replaced by `args` (JSON text).
fn copy_with_argptrs(src: &Path, dir: &Path, args: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut json = None;
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        let dst = dir.join(p.file_name().unwrap());
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p).unwrap();
            let start = text.find("\"ArgPtrs\":[").unwrap() + "\"ArgPtrs\":[".len();
            let end = start + text[start..].find(']').unwrap();
            std::fs::write(&dst, format!("{}{args}{}", &text[..start], &text[end..])).unwrap();
            json = Some(dst);
        } else {
            std::fs::copy(&p, &dst).unwrap();
        }
    }
    json.unwrap()
}

#[test]
fn import_warns_about_argptrs_that_are_stack_slot_addresses() {
    let t = tempfile::tempdir().unwrap();
    let s = t.path().join("s");
    // The saxpy fixture (6 arguments) as stock LLVM would have written it:
    // the addresses of six consecutive 8-byte stack slots.
    let src = fixtures().join("llvm22-host/saxpy");
    let slots = "140737488346000,140737488346008,140737488346016,140737488346024,\
                 140737488346032,140737488346040";
    let stock = copy_with_argptrs(&src, &t.path().join("stock"), slots);
    let o = run(&s, &["import", stock.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("warning:")
            && err.contains("ArgPtrs holds 6 consecutive addresses 8 bytes apart")
            && err.contains("LaunchParams.Data"),
        "{err}"
    );
    // The real fixture: no such warning.
    let o = run(&s, &["import", src.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("ArgPtrs"),
        "{o:?}"
    );
}
