//! `rrstore key generate [--output FILE] [--name NAME] [--force]` and
//! `rrstore key show FILE`: the ed25519 keys that sign recordings
//! (`push --sign KEY`, `pull --require-signed-by PUBKEY`). Both print the
//! public key alone on stdout, so `$(rrstore key show FILE)` is the key.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rrstore_store::signing::SecretKey;

use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(clap::Subcommand)]
pub enum Sub {
    /// Make a new secret key file (mode 0600) and print its public key.
    Generate(GenerateArgs),
    /// Print the public key of a secret key file.
    Show(ShowArgs),
}

#[derive(clap::Args)]
pub struct GenerateArgs {
    /// Where to write the secret key (default:
    /// $XDG_CONFIG_HOME/rrstore/signing.key, else ~/.config/rrstore/signing.key).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// A name for the key, carried in its signatures and shown by `show`
    /// (letters, digits, spaces, `.`, `_`, `-`, `@`; at most 64).
    #[arg(long)]
    pub name: Option<String>,
    /// Replace an existing key file (its old key is lost).
    #[arg(long)]
    pub force: bool,
}

#[derive(clap::Args)]
pub struct ShowArgs {
    /// A secret key file written by `rrstore key generate`.
    pub file: PathBuf,
}

/// The default secret key file.
fn default_path() -> anyhow::Result<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|d| d.join("rrstore/signing.key"))
        .ok_or_else(|| {
            crate::exit::UsageError(
                "neither $XDG_CONFIG_HOME nor $HOME is set: give the key file with --output FILE"
                    .into(),
            )
            .into()
        })
}

pub fn run(args: Args, _globals: &Globals) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Generate(a) => {
            let path = match a.output {
                Some(p) => p,
                None => default_path()?,
            };
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|source| {
                    rrstore_store::signing::SigningError::Write {
                        path: path.clone(),
                        source,
                    }
                })?;
            }
            let key = SecretKey::generate(a.name.as_deref().unwrap_or(""))?;
            if let Err(e) = key.write(&path, a.force) {
                let exists = matches!(e, rrstore_store::signing::SigningError::Exists { .. });
                let code =
                    crate::exit::report(&anyhow::Error::new(e).context("cannot generate a key"));
                if exists {
                    eprintln!(
                        "hint: write the new key elsewhere with --output FILE, or replace the old one \
                         with --force (the old key is then lost)"
                    );
                }
                return Ok(code);
            }
            eprintln!(
                "wrote secret key {} (key id {}): keep it private, it signs as you",
                path.display(),
                key.public().key_id()
            );
            println!("{}", key.public());
        }
        Sub::Show(a) => {
            let key = read_secret(&a.file)?;
            let name = if key.name.is_empty() {
                String::new()
            } else {
                format!(", name {}", key.name)
            };
            eprintln!("key id {}{name}", key.public().key_id());
            println!("{}", key.public());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Read a secret key file, warning (as ssh does of its keys) when its mode
/// lets its group or others read it: whoever can read it can sign as its
/// owner. A warning, not a refusal: the key was already exposed, and a
/// refused push would not make it private again.
pub fn read_secret(path: &Path) -> anyhow::Result<SecretKey> {
    use std::os::unix::fs::PermissionsExt;
    let key = SecretKey::read(path)?;
    if let Ok(m) = std::fs::metadata(path) {
        let mode = m.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            let shown = rrstore_report::shown::Shown(path.to_string_lossy());
            eprintln!(
                "warning: the secret key file {shown} can be read by others (mode {mode:04o}): \
                 anyone who can read it can sign as you; run `chmod 600 {shown}`"
            );
        }
    }
    Ok(key)
}
