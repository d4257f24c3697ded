//! `rrstore record [--label TEXT] [--dir DIR] [--json] -- PROGRAM ARGS...`: run a
//! program with LLVM's record environment in a scratch directory, import
//! every recording it wrote, remove the scratch files, report. The
//! program's stderr passes through; a libomptarget that cannot record
//! ("cannot determine Device Memory Size") is recognised and explained.

use rrstore_report::shown::Shown;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStderr, Command, ExitCode, Stdio};

use rrstore_format::llvm;

use super::import::import_paths;
use crate::errors::RecordError;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Label stored with every imported recording (default: the program name).
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Scratch directory to run in (default: a fresh one inside the store).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Device memory to reserve for recording, in GiB (sets
    /// LIBOMPTARGET_RR_DEVMEM_SIZE and LIBOMPTARGET_RECORD_MEMSIZE).
    #[arg(long, value_name = "GIB")]
    pub mem_size: Option<u64>,
    /// Print what was imported and how the program exited as JSON
    /// (docs/json.md); the program's own stdout then goes to stderr.
    #[arg(long)]
    pub json: bool,
    /// The program and its arguments.
    #[arg(required = true, last = true, value_name = "PROGRAM ARGS")]
    pub command: Vec<OsString>,
}

/// What `record --json` prints: the import summary and how the program
/// exited.
#[derive(serde::Serialize)]
struct RecordJson<'a> {
    #[serde(flatten)]
    summary: &'a super::import::Summary,
    exit_code: Option<i32>,
    signal: Option<i32>,
}

/// What libomptarget prints when the plugin cannot size the record arena
/// (stock LLVM 19-22 on the host target) and records nothing.
const NO_DEVICE_MEMORY_SIZE: &str = "cannot determine Device Memory Size";

/// Copy the program's stderr to ours; whether it said
/// [`NO_DEVICE_MEMORY_SIZE`].
fn relay(from: ChildStderr) -> bool {
    let mut seen = false;
    let mut out = std::io::stderr();
    for line in BufReader::new(from).split(b'\n').map_while(Result::ok) {
        seen |= line
            .windows(NO_DEVICE_MEMORY_SIZE.len())
            .any(|w| w == NO_DEVICE_MEMORY_SIZE.as_bytes());
        let _ = out.write_all(&line);
        let _ = out.write_all(b"\n");
    }
    seen
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let store = super::storeutil::open_or_create(globals)?;
    let (scratch, ours) = match &args.dir {
        Some(d) => (d.clone(), false),
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let d = store
                .dir()
                .join(rrstore_store::layout::TMP_DIR)
                .join(format!("record-{}-{nanos}", std::process::id()));
            (d, true)
        }
    };
    drop(store);
    std::fs::create_dir_all(&scratch)
        .map_err(|e| RecordError(format!("cannot create {}: {e}", scratch.display())))?;
    let scratch = std::fs::canonicalize(&scratch).unwrap_or(scratch);
    let result = record_in(&args, globals, &scratch);
    if ours {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    result
}

fn record_in(args: &Args, globals: &Globals, scratch: &Path) -> anyhow::Result<ExitCode> {
    let mut program = PathBuf::from(&args.command[0]);
    if program.components().count() > 1 {
        program = std::fs::canonicalize(&program)
            .map_err(|e| RecordError(format!("cannot run {}: {e}", program.display())))?;
    }
    let label = args.label.clone().unwrap_or_else(|| {
        program
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    let mut cmd = Command::new(&program);
    cmd.args(&args.command[1..])
        .current_dir(scratch)
        .envs(llvm::layouts::record_env(scratch, args.mem_size))
        .stderr(Stdio::piped());
    if args.json {
        // Our stdout carries only the JSON document.
        use std::os::fd::AsFd;
        let err = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| RecordError(format!("cannot pass stderr to the program: {e}")))?;
        cmd.stdout(Stdio::from(err));
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| RecordError(format!("cannot run {}: {e}", program.display())))?;
    let no_arena = child
        .stderr
        .take()
        .map(|e| std::thread::spawn(move || relay(e)));
    let status = child
        .wait()
        .map_err(|e| RecordError(format!("cannot wait for {}: {e}", program.display())))?;
    let no_arena = no_arena.is_some_and(|t| t.join().unwrap_or(false));
    let found = llvm::find_recordings(scratch)?;
    if found.is_empty() && no_arena {
        return Err(RecordError(format!(
            "{} exited with {status} and wrote no recording: its libomptarget said \
             \"{NO_DEVICE_MEMORY_SIZE}\", so record/replay never started. The offload plugin \
             it ran on cannot record: stock LLVM's host (x86_64) plugin does not report a device \
             memory size. Record on a CUDA or AMD GPU target, or on the host with a libomptarget \
             patched to report one (README, \"Which recordings replay\")",
            program.display()
        ))
        .into());
    }
    if found.is_empty() {
        return Err(RecordError(format!(
            "{} exited with {status} and wrote no recording (is it built with -fopenmp \
             offloading, and does its libomptarget support LIBOMPTARGET_RECORD?)",
            program.display()
        ))
        .into());
    }
    // The OpenMP settings the program ran under, stored with its
    // recordings (a replay applies them by default).
    let environment = rrstore_format::environment::capture(std::env::vars_os());
    let summary = import_paths(
        globals,
        &[scratch.to_path_buf()],
        &label,
        false,
        environment,
    )?;
    // Remove the files of what was imported (the scratch dir itself goes
    // too when rrstore created it).
    for desc in &found {
        if let Ok(rec) = llvm::load(desc) {
            for (_, f) in &rec.files {
                let _ = std::fs::remove_file(f);
            }
            let _ = std::fs::remove_file(desc);
        }
    }
    if args.json {
        use std::os::unix::process::ExitStatusExt;
        let out = RecordJson {
            summary: &summary,
            exit_code: status.code(),
            signal: status.signal(),
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for r in &summary.recordings {
            let state = if r.present { "present " } else { "imported" };
            println!("{state} {} {}", &r.id[..12], Shown(&r.kernel));
        }
        summary.print();
        println!("program exited with {status}");
    }
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(c) => ExitCode::from(c.clamp(1, 255) as u8),
        None => ExitCode::from(crate::exit::CRASHED),
    })
}
