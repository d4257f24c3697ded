//! Real OpenMP offload programs built and recorded by the tests: a C++
//! source compiled with Debian's `clang++-22` for LLVM's x86-64 host
//! offload target, run with `LIBOMPTARGET_RECORD=1` against a patched copy
//! of libomptarget (the stock host plugin cannot record: see
//! `fixtures/images/patch_rr.py`, the patch `make-recordings.sh` applies).
//!
//! Kernel symbols embed the source file's device and inode
//! (`__omp_offloading_<dev>_<inode>_main_l<line>`), so two builds of one
//! [`Source`] (ahead-of-time and `-fopenmp-target-jit`, or two compilers)
//! name the same kernels: the file is rewritten in place, never replaced.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The LLVM whose clang, libomptarget and libomp the programs use.
pub const LLVM: &str = "/usr/lib/llvm-22";
/// Arena the patched runtime reports, per host device.
pub const ARENA_BYTES: u64 = 64 << 20;

/// A source file that keeps its inode across rewrites.
pub struct Source {
    pub path: PathBuf,
}

impl Source {
    /// Create `dir/name` holding `code`.
    pub fn new(dir: &Path, name: &str, code: &str) -> Source {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let s = Source {
            path: dir.join(name),
        };
        s.rewrite(code);
        s
    }

    /// Replace the text, keeping the inode (so the kernel names).
    pub fn rewrite(&self, code: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&self.path)
            .unwrap_or_else(|e| panic!("{}: {e}", self.path.display()));
        f.write_all(code.as_bytes())
            .unwrap_or_else(|e| panic!("{}: {e}", self.path.display()));
    }

    /// Compile to `out` for the host offload target with `-O2` and
    /// `extra` flags (`-fopenmp-target-jit` for an IR image).
    pub fn build(&self, out: &Path, extra: &[&str]) {
        let mut cmd = Command::new(format!("{LLVM}/bin/clang++"));
        cmd.args(["-O2", "-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"]);
        if extra.contains(&"-fopenmp-target-jit") {
            // The device link of an IR image runs clang with an LTO
            // option only lld knows.
            cmd.args(["-fuse-ld=lld", "-Xlinker", "--device-compiler=-fuse-ld=lld"]);
        }
        let o = cmd
            .args(extra)
            .arg(&self.path)
            .arg("-o")
            .arg(out)
            .output()
            .unwrap_or_else(|e| panic!("running clang++ from {LLVM}: {e}"));
        assert!(
            o.status.success(),
            "clang++ failed for {}: {}",
            self.path.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

impl Source {
    /// The device IR of the host offload target as `clang` (a clang++
    /// binary of any LLVM) emits it, unlinked (`--offload-device-only
    /// -emit-llvm`): what a JIT build embeds, without the packager or a
    /// linker of that LLVM.
    pub fn device_ir(&self, clang: &str, out: &Path) {
        self.device_ir_with(clang, &[], out);
    }

    /// [`Source::device_ir`] with `extra` flags (`-ffast-math`, or
    /// `-Xclang -disable-llvm-passes` to leave every optimization to the
    /// compile that reads the IR).
    pub fn device_ir_with(&self, clang: &str, extra: &[&str], out: &Path) {
        let o = Command::new(clang)
            .args(["-O2", "-fopenmp", "-fopenmp-targets=x86_64-pc-linux-gnu"])
            .args(["--offload-device-only", "-emit-llvm", "-c"])
            .args(extra)
            .arg(&self.path)
            .arg("-o")
            .arg(out)
            .output()
            .unwrap_or_else(|e| panic!("running {clang}: {e}"));
        assert!(
            o.status.success(),
            "{clang} failed for {}: {}",
            self.path.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// A directory holding the patched libomptarget, made once per `dir`.
pub fn recording_runtime(dir: &Path) -> PathBuf {
    let lib = dir.join("rr-lib");
    let so = lib.join("libomptarget.so.22.1");
    if !so.exists() {
        std::fs::create_dir_all(&lib).unwrap_or_else(|e| panic!("{}: {e}", lib.display()));
        let o = Command::new("python3")
            .arg(crate::fixtures().join("images/patch_rr.py"))
            .arg(format!("{LLVM}/lib/libomptarget.so.22.1"))
            .arg(&so)
            .arg(ARENA_BYTES.to_string())
            .output()
            .unwrap_or_else(|e| panic!("running patch_rr.py: {e}"));
        assert!(
            o.status.success(),
            "patch_rr.py: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    lib
}

/// The environment a program records under: the patched runtime first on
/// the library path, recording and the output snapshot on.
pub fn record_env(runtime: &Path) -> Vec<(String, String)> {
    vec![
        (
            "LD_LIBRARY_PATH".into(),
            format!("{}:{LLVM}/lib", runtime.display()),
        ),
        ("LIBOMPTARGET_RECORD".into(), "1".into()),
        ("LIBOMPTARGET_RR_SAVE_OUTPUT".into(), "1".into()),
    ]
}

/// Run `program` in `dir` (created) with recording on and `env` added;
/// returns what it printed and the descriptors it wrote, sorted.
/// Programs should end with `fflush` and `_Exit(0)`: the host plugin
/// crashes freeing its record arenas at a normal exit.
pub fn record(
    program: &Path,
    dir: &Path,
    runtime: &Path,
    env: &[(&str, &str)],
) -> (Output, Vec<PathBuf>) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut cmd = Command::new(program);
    cmd.current_dir(dir).envs(record_env(runtime));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", program.display()));
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    found.sort();
    (o, found)
}

/// [`record`] a program that launches one kernel once: it must succeed
/// and write one descriptor; what it printed and that descriptor.
pub fn record_one(
    program: &Path,
    dir: &Path,
    runtime: &Path,
    env: &[(&str, &str)],
) -> (Output, PathBuf) {
    let (o, mut found) = record(program, dir, runtime, env);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(found.len(), 1, "{found:?}");
    (o, found.remove(0))
}

/// Extract the `triple` device image of the offload application `app`
/// into `out` with LLVM's own tools (`llvm-objcopy`, `llvm-offload-binary`):
/// the IR of a `-fopenmp-target-jit` build, the ELF of an ahead-of-time one.
pub fn extract_image(app: &Path, triple: &str, out: &Path) {
    let section = out.with_extension("offloading");
    let st = Command::new(format!("{LLVM}/bin/llvm-objcopy"))
        .arg(format!(
            "--dump-section=.llvm.offloading={}",
            section.display()
        ))
        .arg(app)
        .arg("/dev/null")
        .status()
        .unwrap_or_else(|e| panic!("running llvm-objcopy: {e}"));
    assert!(st.success(), "llvm-objcopy failed on {}", app.display());
    let st = Command::new(format!("{LLVM}/bin/llvm-offload-binary"))
        .arg(&section)
        .arg(format!("--image=file={},triple={triple}", out.display()))
        .status()
        .unwrap_or_else(|e| panic!("running llvm-offload-binary: {e}"));
    assert!(
        st.success(),
        "llvm-offload-binary failed on {}",
        app.display()
    );
}

/// A program's two builds from one source file (kernel names depend on
/// the file): the ahead-of-time one recorded on the host, and the device IR
/// of its `-fopenmp-target-jit` build. Files under `dir`, named after
/// `src`'s file stem; returns the recording's descriptor and the IR.
pub fn recorded_with_ir(dir: &Path, src: &Source, stem: &str) -> (PathBuf, PathBuf) {
    let aot = dir.join(stem);
    let jit = dir.join(format!("{stem}-jit"));
    src.build(&aot, &[]);
    src.build(&jit, &["-fopenmp-target-jit"]);
    let runtime = recording_runtime(dir);
    let (_, descriptor) = record_one(&aot, &dir.join("rec"), &runtime, &[]);
    let ir = dir.join(format!("{stem}.bc"));
    extract_image(&jit, "x86_64-pc-linux-gnu", &ir);
    (descriptor, ir)
}
