//! A store with a real history for the `rrstore report` tests.
#![allow(dead_code)]

use std::path::Path;

use crate::regress_common::*;

/// The regression store plus the host fixtures (label run1), with a real
/// history: check of every recording, check --image build-3 and a bisect.
pub fn history_store(s: &Path) {
    setup(s);
    ok(
        s,
        &[
            "import",
            fixtures().join("llvm22-host").to_str().unwrap(),
            "--label",
            "run1",
        ],
    );
    ok(s, &["check"]);
    run(s, &["check", "--image", "build-3", "--label", "regress"]);
    let mut args = vec!["bisect", "--label", "regress", "--images"];
    let images = all_images();
    args.extend(images.iter().map(String::as_str));
    ok(s, &args);
    ok(s, &["replay", &rec_id(s, SCALE), "--repetitions", "5"]);
}
