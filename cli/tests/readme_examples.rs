//! The examples of README.md and docs/store.md, run, so the docs cannot
//! drift from what rrstore does (issue 16).
//!
//! Every line of every code block (fenced or indented) is, after its
//! `# comment` is cut off, one of:
//! - run as written by `bash -eo pipefail -c`, and must exit 0; the `#   `
//!   lines right under it are lines of its output and must appear in its
//!   stdout (`#   ...` stands for lines left out);
//! - listed in [`PLANS`] with the concrete commands that stand for a
//!   synopsis line (`[--json]`, `a|b`, `ID...`), each with the exit status
//!   the docs give for it (`diff` of two different recordings: 1);
//! - listed in [`PLANS`] as skipped, with the reason.
//!
//! A line in none of these, or a [`PLANS`] entry that matches no line,
//! fails the test: a new example has to be runnable or explained here.
//! Each section (heading) runs in a fresh temporary store and working
//! directory, in document order. The working directory has the
//! repository's `tests/` (so `tests/fixtures/llvm22-host` resolves),
//! `build/app.offload.so` (the image of recording d7e4), `img-0.so` ..
//! `img-7.so` (d7e4's image, then from `img-4.so` on an image without its
//! kernel, so `bisect` finds image 4), and `./my_offload_app` (a stand-in
//! program that writes the saxpy recording into its working directory, as
//! libomptarget does). Sections other than "Archives ..." and "The store
//! ..." start with the fixtures imported with label `run1`. The `file://`
//! remote examples run against a temporary directory, the `s3://` one
//! against a moto S3 server on loopback (`remote_common`).
#![cfg(feature = "s3")]

mod remote_common;

use std::path::{Path, PathBuf};
use std::process::Command;

use remote_common::Moto;

/// What to do with a README line other than running it as written.
enum Plan {
    /// Not run, and why.
    Skip(&'static str),
    /// A synopsis line: these commands (with their exit status) stand for it.
    Variants(&'static [(&'static str, i32)]),
}

use Plan::*;

/// README lines (comment cut off, trimmed) that are not run as written.
const PLANS: &[(&str, Plan)] = &[
    (
        "rrstore replay d7e4 --image app.bc",
        Skip("needs the IR of a JIT build of d7e4's own source file (kernel names embed its inode): cli/tests/ir_replay.rs builds one and runs these"),
    ),
    (
        "rrstore replay d7e4 --image app.bc --toolchain clang-22 --cflags '-O3 -mllvm -unroll-threshold=400'",
        Skip("as above: cli/tests/ir_replay.rs replays IR with --toolchain and --cflags"),
    ),
    (
        "rrstore bisect d7e4 --passes --image app.bc",
        Skip("needs the IR of a JIT build of d7e4's own source file: cli/tests/bisect_passes.rs builds one and bisects its passes"),
    ),
    (
        "rrstore replay d7e4 --from-bitcode",
        Skip("the bundled recordings have no .bc part (LLVM 23+ writes one); cli/tests/ir_replay.rs replays one"),
    ),
    (
        "rrstore check --toolchain clang-22 --cflags -O3",
        Skip("the bundled recordings have no IR; cli/tests/ir_provenance.rs checks one with a .bc part with --toolchain and --cflags"),
    ),
    (
        "./scripts/demo.sh",
        Skip("builds rrstore and runs the examples below on the default store: this test runs them one by one"),
    ),
    (
        "./scripts/test.sh",
        Skip("runs the whole test suite, this test included"),
    ),
    (
        "LIBOMPTARGET_SHARED_MEMORY_SIZE=65536 LIBOMPTARGET_HEAP_SIZE=1073741824 rrstore replay d7e4 --backend hip",
        Skip("needs an AMD GPU and an AMDGPU recording (the bundled ones are host recordings); scripts/gpu-check.sh runs GPU replays"),
    ),
    (
        "rrstore pack tests/fixtures/llvm22-host/saxpy -o saxpy.rra [--level 3]",
        Variants(&[
            ("rrstore pack tests/fixtures/llvm22-host/saxpy -o saxpy.rra", 0),
            ("rrstore pack tests/fixtures/llvm22-host/saxpy -o saxpy3.rra --level 3", 0),
        ]),
    ),
    (
        "rrstore unpack saxpy.rra -o out/ [--layout kernel-named|native]",
        Variants(&[
            ("rrstore unpack saxpy.rra -o out/", 0),
            ("rrstore unpack saxpy.rra -o out-kn/ --layout kernel-named", 0),
            ("rrstore unpack saxpy.rra -o out-native/ --layout native", 0),
        ]),
    ),
    (
        "rrstore inspect saxpy.rra [--json]",
        Variants(&[
            ("rrstore inspect saxpy.rra", 0),
            ("rrstore inspect saxpy.rra --json", 0),
        ]),
    ),
    (
        "rrstore ls --kernel '*main_l13' --target x86_64 --tag app=saxpy --label 'run*' --since 7d --sort size [--json]",
        Variants(&[
            ("rrstore ls --kernel '*main_l13' --target x86_64 --tag app=saxpy --label 'run*' --since 7d --sort size", 0),
            ("rrstore ls --kernel '*main_l13' --target x86_64 --tag app=saxpy --label 'run*' --since 7d --sort size --json", 0),
        ]),
    ),
    (
        "rrstore ls [--kernel GLOB] [--target sm_90|gfx942|x86_64] [--tag K=V] [--label GLOB]",
        Variants(&[
            ("rrstore ls --kernel '*main_l13' --target x86_64 --tag app=saxpy --label 'saxpy*'", 0),
            ("rrstore ls --target sm_90", 0),
            ("rrstore ls --target gfx942", 0),
        ]),
    ),
    (
        // The continuation of the synopsis line above.
        "[--since 2026-11-30|12h|7d] [--sort time|size|name] [--json]",
        Variants(&[
            ("rrstore ls --since 2026-11-30 --sort time", 0),
            ("rrstore ls --since 12h --sort size --json", 0),
            ("rrstore ls --since 7d --sort name", 0),
        ]),
    ),
    (
        "rrstore export d7e4 -o out/ [--layout native]",
        Variants(&[
            ("rrstore export d7e4 -o out/", 0),
            ("rrstore export d7e4 -o out-native/ --layout native", 0),
            ("rrstore export d7e4 -o saxpy.rra", 0),
        ]),
    ),
    (
        "rrstore verify [--full] [ID...]",
        Variants(&[
            ("rrstore verify", 0),
            ("rrstore verify --full", 0),
            ("rrstore verify --full 42ba 585f", 0),
        ]),
    ),
    (
        "rrstore gc [--dry-run] [--max-unused 50]",
        Variants(&[
            ("rrstore gc --dry-run | grep '^dry run, nothing changed: would remove'", 0),
            ("rrstore gc --dry-run --max-unused 50", 0),
            ("rrstore gc --max-unused 50 | grep '^removed '", 0),
            ("rrstore gc", 0),
        ]),
    ),
    (
        // docs/store.md's synopsis of the same command.
        "rrstore gc [--dry-run] [--max-unused PERCENT] [--json]",
        Variants(&[
            ("rrstore gc --dry-run --json | grep '\"dry_run\": true'", 0),
            ("rrstore gc --max-unused 0 --json | grep '\"max_unused_percent\": 0.0'", 0),
            ("rrstore gc --max-unused 100", 0),
            // Outside 0..=100: a usage error, and nothing collected.
            ("rrstore gc --max-unused 101", 2),
        ]),
    ),
    (
        "rrstore repair [--json]",
        Variants(&[
            ("rrstore repair", 0),
            (": > \"$RRSTORE_DIR/index.sqlite\" && rrstore repair --json | grep -E '\"recordings\": [1-9]' >/dev/null", 0),
            ("rrstore verify --full", 0),
        ]),
    ),
    (
        "rrstore stats [--json]",
        Variants(&[("rrstore stats", 0), ("rrstore stats --json", 0)]),
    ),
    (
        "rrstore replay d7e4 --tolerance --dtype f32 --rtol 1e-5 --atol 1e-7 [--max-ulp 4]",
        Variants(&[
            ("rrstore replay d7e4 --tolerance --dtype f32 --rtol 1e-5 --atol 1e-7", 0),
            ("rrstore replay d7e4 --tolerance --dtype f32 --rtol 1e-5 --atol 1e-7 --max-ulp 4", 0),
        ]),
    ),
    (
        "rrstore replay d7e4 --save-output arena.bin --num-teams 4 --num-threads 8 [--ignore-limits] --timeout 10",
        Variants(&[
            ("rrstore replay d7e4 --save-output arena.bin --num-teams 4 --num-threads 8 --timeout 10", 0),
            ("rrstore replay d7e4 --save-output arena2.bin --num-teams 4 --num-threads 8 --ignore-limits --timeout 10", 0),
        ]),
    ),
    (
        // cuda and hip need an NVIDIA or AMD GPU and a device image for it;
        // they are run by scripts/gpu-check.sh on GPU machines.
        "rrstore replay d7e4 --backend host|cuda|hip|auto",
        Variants(&[
            ("rrstore replay d7e4 --backend host", 0),
            ("rrstore replay d7e4 --backend auto", 0),
        ]),
    ),
    (
        "rrstore history [ID] [--json]",
        Variants(&[
            ("rrstore history", 0),
            ("rrstore history d7e4 --json", 0),
        ]),
    ),
    (
        "rrstore devices [--json]",
        Variants(&[("rrstore devices", 0), ("rrstore devices --json", 0)]),
    ),
    (
        "rrstore check --image clang-22.1.8 --label run1 [--repetitions 5] [--tolerance ...] [--json]",
        Variants(&[
            // The image holds one kernel: the other recordings regress.
            ("rrstore check --image clang-22.1.8 --label run1", 1),
            ("rrstore check --image clang-22.1.8 --label run1 --kernel \"$D7E4_KERNEL\" --repetitions 5", 0),
            ("rrstore check --image clang-22.1.8 --label run1 --kernel \"$D7E4_KERNEL\" --repetitions 3 --json | grep '\"repetitions\": 3'", 0),
            ("rrstore check --image clang-22.1.8 --label run1 --kernel \"$D7E4_KERNEL\" --tolerance --dtype f32 --rtol 1e-5 --json", 0),
            ("rrstore check --label run1", 0),
        ]),
    ),
    (
        "rrstore check --shard auto --run n42 --results lab:",
        Variants(&[
            // Two shards of a Slurm array, results to a directory.
            ("SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=2 rrstore check --label run1 --shard auto --run n42 --results results", 0),
            ("rrstore check --collect results --run n42", 3),
            ("SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=2 rrstore check --label run1 --shard auto --run n42 --results results", 0),
        ]),
    ),
    (
        "rrstore check --collect lab: --run n42",
        Variants(&[("rrstore check --collect results --run n42 | grep '2 of 2 shard(s) reported'", 0)]),
    ),
    (
        "rrstore diff d5e5 0b09 [--dtype f32]",
        Variants(&[
            // Two different recordings: exit 1, "diff found differences".
            ("rrstore diff d5e5 0b09", 1),
            ("rrstore diff d5e5 0b09 --dtype f32", 1),
            // Two replay outputs of the same recording and image: equal.
            ("rrstore replay d7e4 && rrstore replay d7e4 && rrstore diff h:1 h:2", 0),
        ]),
    ),
    (
        "rrstore bisect d7e4 --images img-0.so img-1.so ... img-7.so",
        Variants(&[(
            "rrstore bisect d7e4 --images img-0.so img-1.so img-2.so img-3.so img-4.so img-5.so img-6.so img-7.so | grep 'culprit: image 4'",
            0,
        )]),
    ),
    (
        "rrstore bisect --label run1 --images ...",
        Variants(&[("rrstore bisect --label run1 --kernel \"$D7E4_KERNEL\" --images img-0.so img-3.so img-4.so", 0)]),
    ),
    (
        "rrstore image rm clang-22.1.8 [--json]",
        Variants(&[
            ("rrstore image rm clang-22.1.8 --json", 0),
            ("rrstore image add build/app.offload.so --label clang-22.1.8 && rrstore image rm clang-22.1.8", 0),
        ]),
    ),
    (
        "rrstore remote add lab s3://rr-recordings/team-a --endpoint http://minio:9000 --allow-http --region us-east-1",
        Variants(&[(
            "rrstore remote add lab s3://rr-recordings/team-a --endpoint \"$MOTO_ENDPOINT\" --allow-http --region us-east-1",
            0,
        )]),
    ),
    (
        "rrstore remote add nfs file:///mnt/shared/rrstore ; rrstore remote ls ; rrstore remote rm nfs",
        Variants(&[(
            "rrstore remote add nfs \"file://$REMOTE_DIR\" ; rrstore remote ls ; rrstore remote rm nfs",
            0,
        )]),
    ),
    (
        "rrstore push lab --all | ID... | --kernel GLOB | --label GLOB",
        Variants(&[
            ("rrstore push lab d7e4 7519", 0),
            ("rrstore push lab --kernel '*main_l13'", 0),
            ("rrstore push lab --label 'run*'", 0),
            ("rrstore push lab --all", 0),
        ]),
    ),
    (
        "rrstore pull lab --all | ID... | --kernel GLOB | --label GLOB",
        Variants(&[
            ("rrstore rm d7e4 7519 && rrstore pull lab d7e4 7519", 0),
            ("rrstore pull lab --kernel '*main_l13'", 0),
            ("rrstore pull lab --label 'run*'", 0),
            ("rrstore rm 42ba && rrstore pull lab --all && rrstore verify --full", 0),
        ]),
    ),
    (
        "rrstore verify lab: [--read-data]",
        Variants(&[
            ("rrstore verify lab:", 0),
            ("rrstore verify lab: --read-data", 0),
        ]),
    ),
];

/// One runnable code-block line and where it is.
struct Example {
    section: String,
    line_no: usize,
    text: String,
    /// The `#   ` lines right under it: lines of its output (`...` for
    /// lines left out).
    shows: Vec<String>,
}

/// The line without its `# comment` (a `#` after whitespace, outside quotes).
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev_space => return &line[..i],
            _ => {}
        }
        prev_space = c.is_whitespace();
    }
    line
}

/// Every code-block line of `md` with a command on it.
fn examples(md: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    let mut section = String::from("(top)");
    let mut fenced = false;
    let mut indented = false;
    let mut prev_blank = true;
    // Whether the previous code line was a command or its output.
    let mut under_command = false;
    for (i, line) in md.lines().enumerate() {
        let code = if line.trim_start().starts_with("```") {
            fenced = !fenced;
            false
        } else if fenced {
            true
        } else {
            if line.starts_with('#') {
                section = line.trim_start_matches('#').trim().to_string();
            }
            indented = line.starts_with("    ") && (prev_blank || indented);
            indented
        };
        prev_blank = line.trim().is_empty();
        if !code {
            under_command = false;
            continue;
        }
        let text = strip_comment(line).trim();
        if !text.is_empty() {
            out.push(Example {
                section: section.clone(),
                line_no: i + 1,
                text: text.to_string(),
                shows: Vec::new(),
            });
            under_command = true;
        } else if let (true, Some(shown)) = (under_command, line.trim_start().strip_prefix("#   "))
        {
            if let Some(e) = out.last_mut() {
                if shown.trim() != "..." {
                    e.shows.push(shown.trim().to_string());
                }
            }
        } else {
            under_command = false;
        }
    }
    out
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The first file in `dir` whose name ends with `suffix`.
fn file_ending(dir: &Path, suffix: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(suffix))
        .unwrap_or_else(|| panic!("no *{suffix} in {}", dir.display()))
}

/// The source of `build/app`: one target region.
const APP: &str = "int main() {\n  int x = 0;\n#pragma omp target map(tofrom : x)\n  x = 1;\n  return x - 1;\n}\n";

/// A fresh store and working directory for one README section.
struct Sandbox {
    root: tempfile::TempDir,
    moto: Option<Moto>,
    d7e4_kernel: String,
}

impl Sandbox {
    fn new(section: &str) -> Sandbox {
        let root = tempfile::tempdir().unwrap();
        let work = root.path().join("work");
        std::fs::create_dir_all(work.join("build")).unwrap();
        std::os::unix::fs::symlink(repo().join("tests"), work.join("tests")).unwrap();
        let fixtures = repo().join("tests/fixtures/llvm22-host");
        let app = work.join("my_offload_app");
        std::fs::write(
            &app,
            format!(
                "#!/bin/sh\n# Stand-in for an OpenMP offload program run with LIBOMPTARGET_RECORD=1.\n\
                 cp {}/* .\n",
                fixtures.join("saxpy").display()
            ),
        )
        .unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&app)
            .status()
            .unwrap();
        let mut sb = Sandbox {
            root,
            moto: None,
            d7e4_kernel: String::new(),
        };
        if !section.starts_with("Archives") && !section.starts_with("The store") {
            sb.sh(
                "rrstore import tests/fixtures/llvm22-host --label run1 >/dev/null",
                0,
            );
            let out = sb.root.path().join("d7e4");
            sb.sh(
                &format!("rrstore export d7e4 -o {} >/dev/null", out.display()),
                0,
            );
            let image = file_ending(&out, ".image");
            let name = image.file_name().unwrap().to_string_lossy().into_owned();
            sb.d7e4_kernel = name.trim_end_matches(".image").to_string();
            std::fs::copy(&image, work.join("build/app.offload.so")).unwrap();
            if section.starts_with("Regressions") {
                // A real offload application (`image add build/app`).
                rrstore_tests::offload::Source::new(&work.join("src"), "app.cpp", APP)
                    .build(&work.join("build/app"), &[]);
            }
            // An image of another kernel: replaying d7e4 with it fails.
            let other = file_ending(&fixtures.join("reduction"), ".image");
            for i in 0..8 {
                let src = if i < 4 { &image } else { &other };
                std::fs::copy(src, work.join(format!("img-{i}.so"))).unwrap();
            }
        }
        sb
    }

    fn work(&self) -> PathBuf {
        self.root.path().join("work")
    }

    /// Run `cmd` with bash in the working directory; it must exit `want`.
    fn sh(&mut self, cmd: &str, want: i32) -> String {
        if cmd.contains("$MOTO_ENDPOINT") && self.moto.is_none() {
            let m = Moto::start(false);
            m.create_bucket("rr-recordings");
            self.moto = Some(m);
        }
        let bin = Path::new(env!("CARGO_BIN_EXE_rrstore"));
        let path = format!(
            "{}:{}",
            bin.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let t = self.root.path();
        let o = Command::new("bash")
            .args(["-eo", "pipefail", "-c", cmd])
            .current_dir(self.work())
            .env("PATH", path)
            .env("RRSTORE_DIR", t.join("store"))
            .env("XDG_DATA_HOME", t.join("xdg"))
            .env("HOME", t)
            // The user's configuration stays out (`$XDG_CONFIG_HOME` wins
            // over HOME).
            .env("XDG_CONFIG_HOME", t.join("config"))
            .env_remove("RRSTORE_CONFIG")
            .env("REMOTE_DIR", t.join("remote"))
            .env("D7E4_KERNEL", &self.d7e4_kernel)
            .env(
                "MOTO_ENDPOINT",
                self.moto.as_ref().map(Moto::endpoint).unwrap_or_default(),
            )
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .env_remove("AWS_ENDPOINT_URL")
            .env_remove("AWS_PROFILE")
            .env_remove("RRSTORE_HOST_PRELOAD")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        assert_eq!(
            o.status.code(),
            Some(want),
            "`{cmd}` exited {:?}, not {want}\nstdout:\n{stdout}\nstderr:\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr)
        );
        stdout
    }
}

fn plan(text: &str) -> Option<&'static Plan> {
    PLANS.iter().find(|(l, _)| *l == text).map(|(_, p)| p)
}

/// The documents whose code blocks are run, in order.
const DOCS: &[&str] = &["README.md", "docs/store.md"];

fn all_examples() -> Vec<(&'static str, Example)> {
    DOCS.iter()
        .flat_map(|d| {
            let md = std::fs::read_to_string(repo().join(d)).unwrap();
            examples(&md).into_iter().map(move |e| (*d, e))
        })
        .collect()
}

#[test]
fn every_plan_names_a_doc_line() {
    let lines: Vec<String> = all_examples().into_iter().map(|(_, e)| e.text).collect();
    for (l, _) in PLANS {
        assert!(
            lines.iter().any(|x| x == l),
            "PLANS names `{l}`, which is no longer an example line of {DOCS:?}: update PLANS"
        );
    }
}

#[test]
fn doc_examples_run() {
    let examples = all_examples();
    let readme = examples.iter().filter(|(d, _)| *d == "README.md").count();
    assert!(readme >= 30, "found only {readme} README examples");
    let mut sandbox: Option<(String, Sandbox)> = None;
    let mut skipped = Vec::new();
    for (doc, e) in &examples {
        if let Some(Skip(why)) = plan(&e.text) {
            skipped.push(format!("{doc}:{} `{}`: {why}", e.line_no, e.text));
            continue;
        }
        let key = format!("{doc}#{}", e.section);
        if sandbox.as_ref().is_none_or(|(s, _)| *s != key) {
            sandbox = Some((key, Sandbox::new(&e.section)));
        }
        let sb = &mut sandbox.as_mut().unwrap().1;
        let runs: Vec<(&str, i32)> = match plan(&e.text) {
            Some(Variants(v)) => v.to_vec(),
            Some(Skip(_)) => unreachable!(),
            None => vec![(e.text.as_str(), 0)],
        };
        assert!(
            e.shows.is_empty() || plan(&e.text).is_none(),
            "{doc}:{}: output shown under a line that is not run as written",
            e.line_no
        );
        for (cmd, want) in runs {
            eprintln!("{doc}:{} [{}] {cmd}", e.line_no, e.section);
            let stdout = sb.sh(cmd, want);
            for shown in &e.shows {
                assert!(
                    stdout.lines().any(|l| l.contains(shown.as_str())),
                    "{doc}:{}: `{cmd}` does not print the line the doc shows:\n  {shown}\nstdout:\n{stdout}",
                    e.line_no
                );
            }
        }
    }
    for s in &skipped {
        eprintln!("not run: {s}");
    }
}
