//! Running the compiler on untrusted IR: in a scratch directory it alone
//! may write, without TCP, under a time limit, its stderr kept for the
//! error.
//!
//! Bitcode from a pulled recording is input to a large C++ program; a
//! crafted module that exploits it must not reach the user's files or the
//! network. The compiler is started as `rrstore __compile-confined
//! --scratch DIR -- CLANG ARGS...` ([`confined_main`]), which restricts
//! itself with Landlock (read and execute anywhere, write only the scratch
//! directory and `/dev/null`, no TCP bind or connect, no signals or
//! abstract sockets outside), sets `no_new_privs`, drops every capability
//! and then executes the compiler, whose children inherit all of it. The
//! compiler's temporary files go to the scratch directory (`TMPDIR`).

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, ABI,
};

use super::command::Plan;
use super::{CompileError, CompileOptions, Toolchain, DEFAULT_TIMEOUT};

/// The hidden subcommand that confines and then executes the compiler.
pub const SUBCOMMAND: &str = "__compile-confined";

/// The most of a compiler's stderr kept: `-opt-bisect-limit` prints a line
/// per pass run (tens of thousands for a large module).
const MAX_LOG: u64 = 32 << 20;
/// The tail of the stderr an error message shows.
const ERROR_TAIL: usize = 16 << 10;

/// Compile `ir` with `tc` as `plan` says; returns the output's bytes and
/// what the compiler printed on stderr.
pub fn run(
    tc: &Toolchain,
    plan: &Plan,
    ir: &[u8],
    opts: &CompileOptions,
) -> Result<(Vec<u8>, String), CompileError> {
    let io = |what, path: &Path, source| CompileError::Io {
        what,
        path: path.to_path_buf(),
        source,
    };
    let parent = match &opts.cache_dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| io("creating", d, e))?;
            d.clone()
        }
        None => std::env::temp_dir(),
    };
    let scratch = tempfile::Builder::new()
        .prefix("compile-")
        .tempdir_in(&parent)
        .map_err(|e| io("creating a scratch directory in", &parent, e))?;
    let input = scratch.path().join("in.bc");
    let output = scratch.path().join("out");
    std::fs::write(&input, ir).map_err(|e| io("writing", &input, e))?;
    let args = plan.args(&input, &output);
    let mut cmd = if opts.unconfined {
        let mut c = Command::new(&tc.clang);
        c.args(&args);
        c
    } else {
        let exe = std::env::current_exe().map_err(|e| io("finding", Path::new("rrstore"), e))?;
        let mut c = Command::new(exe);
        c.arg(SUBCOMMAND)
            .arg("--scratch")
            .arg(scratch.path())
            .arg("--")
            .arg(&tc.clang)
            .args(&args);
        c
    };
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    cmd.env("TMPDIR", scratch.path())
        .current_dir(scratch.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| io("running", &tc.clang, e))?;
    let mut err = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(e) = err.as_mut() {
            let _ = e.take(MAX_LOG).read_to_end(&mut s);
            let _ = std::io::copy(e, &mut std::io::sink());
        }
        String::from_utf8_lossy(&s).into_owned()
    });
    let limit = opts.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let t = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if t.elapsed() >= limit => {
                // SAFETY: kill(2) on the process group the compiler leads
                // (process_group(0) above): the compiler and its children.
                unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
                let _ = child.wait();
                return Err(CompileError::TimedOut {
                    compiler: tc.clang.clone(),
                    secs: limit.as_secs(),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(io("waiting for", &tc.clang, e)),
        }
    };
    let log = reader.join().unwrap_or_default();
    if !status.success() {
        let stderr = tail(&log, ERROR_TAIL);
        let rejected = stderr.contains("unknown argument")
            || stderr.contains("unsupported option")
            || stderr.contains("Unknown command line argument");
        if rejected {
            return Err(CompileError::FlagsRejected {
                compiler: tc.clang.clone(),
                flags: opts.cflags.clone(),
                stderr,
            });
        }
        return Err(CompileError::Failed {
            compiler: tc.clang.clone(),
            status: status.to_string(),
            stderr,
        });
    }
    let bytes =
        std::fs::read(&output).map_err(|e| io("reading the compiler's output", &output, e))?;
    Ok((bytes, log))
}

/// The last `max` bytes of `s` (at a character boundary), marked as cut.
fn tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("[... {start} bytes left out ...]\n{}", &s[start..])
}

/// Entry point of `rrstore __compile-confined --scratch DIR -- PROGRAM
/// ARGS...`: confine this process, then execute PROGRAM. Returns the exit
/// code when it could not (the compiler's own status otherwise).
pub fn confined_main(args: &[OsString]) -> i32 {
    let mut it = args.iter();
    let (Some(flag), Some(scratch), Some(dashes)) = (it.next(), it.next(), it.next()) else {
        eprintln!("rrstore {SUBCOMMAND} is internal to compiling IR images");
        return 2;
    };
    if flag != "--scratch" || dashes != "--" {
        eprintln!("rrstore {SUBCOMMAND} is internal to compiling IR images");
        return 2;
    }
    let rest: Vec<&OsString> = it.collect();
    let Some((program, program_args)) = rest.split_first() else {
        eprintln!("rrstore {SUBCOMMAND}: no compiler given");
        return 2;
    };
    if let Err(e) = confine(Path::new(scratch)) {
        eprintln!("rrstore: cannot confine the compiler: {e}; run with the sandbox off to compile unconfined");
        return 3;
    }
    use std::os::unix::process::CommandExt;
    let e = Command::new(program).args(program_args).exec();
    eprintln!(
        "rrstore: cannot run {}: {e}",
        PathBuf::from(program).display()
    );
    127
}

/// Landlock, `no_new_privs` and no capabilities for this process and what
/// it executes (best effort where the kernel lacks a Landlock feature).
fn confine(scratch: &Path) -> Result<(), String> {
    let abi = ABI::V6;
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let write = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
        .and_then(|r| r.scope(Scope::from_all(abi)))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], read)))
        .and_then(|r| r.add_rules(path_beneath_rules([scratch, Path::new("/dev/null")], write)))
        .and_then(|r| r.restrict_self())
        .map_err(|e| e.to_string())?;
    crate::sandbox::caps::drop_all()?;
    Ok(())
}
