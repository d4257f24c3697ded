//! Signed recordings: ed25519 keys (generated, written to and read from a
//! secret key file), public keys as text, and the signature object that
//! says a key vouched for a recording ID (spec/REMOTE.md, "Signatures").
//!
//! Content addressing already proves a recording's integrity: its ID is
//! the blake3 of its manifest, which names every part by its blake3. A
//! signature adds who published it. The signed message binds a context
//! string (so a signature made for something else never passes for one of
//! a recording), the 32-byte recording ID, the signer's public key and the
//! name the signer gave the key.

use std::io::Write;
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use rrstore_format::id::hex;
use rrstore_format::RecordingId;

/// Prefix of every signed message.
pub const CONTEXT: &[u8] = b"rrstore-recording-v1\0";
/// First line of a secret key file.
const SECRET_HEADER: &str = "rrstore secret key v1";
/// A public key as text: this prefix and 64 hex digits.
pub const PUBLIC_PREFIX: &str = "ed25519:";
const SIG_MAGIC: &[u8; 4] = b"RRS1";
/// Longest key name, in bytes.
pub const MAX_NAME: usize = 64;
/// Length of a signature object with an empty name.
const SIG_FIXED: usize = 4 + 32 + 1 + 64;

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("cannot read key file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not an rrstore secret key file: {reason}")]
    BadKeyFile { path: PathBuf, reason: String },
    #[error("key file {path} already exists (it is kept as it was)")]
    Exists { path: PathBuf },
    #[error("cannot write key file {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{text}` is not an rrstore public key: {reason} (a public key is `ed25519:` and 64 hex digits, as `rrstore key show` prints it)")]
    BadPublicKey { text: String, reason: String },
    #[error("`{0}` is not a key name: use 1 to 64 letters, digits, spaces and `.`, `_`, `-`, `@`")]
    BadName(String),
    #[error("cannot get random bytes for a new key: {0}")]
    Random(std::io::Error),
}

pub type Result<T, E = SigningError> = std::result::Result<T, E>;

/// A public key, with its key id (the first 8 bytes of the blake3 of the
/// key, 16 hex digits: short enough to read, the object name on a remote).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PublicKey(pub [u8; 32]);

impl PublicKey {
    pub fn key_id(&self) -> String {
        hex(&blake3::hash(&self.0).as_bytes()[..8])
    }

    /// `ed25519:<64 hex digits>` (bare hex digits are accepted too).
    pub fn parse(text: &str) -> Result<PublicKey> {
        let bad = |reason: &str| SigningError::BadPublicKey {
            text: text.chars().take(100).collect(),
            reason: reason.to_string(),
        };
        let t = text.trim();
        let digits = t.strip_prefix(PUBLIC_PREFIX).unwrap_or(t);
        let bytes =
            rrstore_format::id::parse_hex32(digits).ok_or_else(|| bad("not 64 hex digits"))?;
        VerifyingKey::from_bytes(&bytes).map_err(|_| bad("not a point of the curve"))?;
        Ok(PublicKey(bytes))
    }

    fn verifying(&self) -> Option<VerifyingKey> {
        VerifyingKey::from_bytes(&self.0).ok()
    }
}

impl std::fmt::Display for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{PUBLIC_PREFIX}{}", hex(&self.0))
    }
}

/// A secret key and the name its owner gave it ("" when none).
pub struct SecretKey {
    key: SigningKey,
    pub name: String,
}

impl SecretKey {
    /// A new key from the operating system's random source.
    pub fn generate(name: &str) -> Result<SecretKey> {
        check_name(name)?;
        let mut seed = [0u8; 32];
        let mut got = 0;
        while got < seed.len() {
            let n =
                rustix::rand::getrandom(&mut seed[got..], rustix::rand::GetRandomFlags::empty())
                    .map_err(|e| SigningError::Random(e.into()))?;
            got += n;
        }
        Ok(SecretKey {
            key: SigningKey::from_bytes(&seed),
            name: name.to_string(),
        })
    }

    pub fn public(&self) -> PublicKey {
        PublicKey(self.key.verifying_key().to_bytes())
    }

    /// Write the key file, mode 0600; an existing file is replaced only
    /// when `replace` (through a new file renamed over it, so the old key
    /// stays whole until the new one is complete).
    pub fn write(&self, path: &Path, replace: bool) -> Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let werr = |source| SigningError::Write {
            path: path.to_path_buf(),
            source,
        };
        if !replace && std::fs::symlink_metadata(path).is_ok() {
            return Err(SigningError::Exists {
                path: path.to_path_buf(),
            });
        }
        let text = format!(
            "{SECRET_HEADER}\nname {}\npublic {}\nsecret {}\n",
            self.name,
            self.public(),
            hex(self.key.as_bytes())
        );
        let target = if replace {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            path.with_file_name(format!(
                ".{}.tmp-{}",
                name.unwrap_or_default(),
                std::process::id()
            ))
        } else {
            path.to_path_buf()
        };
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&target)
            .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|_| f.sync_all()));
        let done = written.and_then(|_| {
            if replace {
                std::fs::rename(&target, path)
            } else {
                Ok(())
            }
        });
        if let Err(e) = done {
            if e.kind() == std::io::ErrorKind::AlreadyExists && !replace {
                return Err(SigningError::Exists {
                    path: path.to_path_buf(),
                });
            }
            let _ = std::fs::remove_file(&target);
            return Err(werr(e));
        }
        Ok(())
    }

    /// Read a key file written by [`SecretKey::write`]; its public key line
    /// must match the secret.
    pub fn read(path: &Path) -> Result<SecretKey> {
        let text = std::fs::read_to_string(path).map_err(|source| SigningError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let bad = |reason: &str| SigningError::BadKeyFile {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        };
        let mut lines = text.lines();
        if lines.next() != Some(SECRET_HEADER) {
            return Err(bad(&format!("its first line is not `{SECRET_HEADER}`")));
        }
        let (mut name, mut public, mut secret) = (None, None, None);
        for line in lines {
            let (k, v) = line.split_once(' ').unwrap_or((line, ""));
            match k {
                "name" => name = Some(v.to_string()),
                "public" => public = Some(v.to_string()),
                "secret" => secret = Some(v.to_string()),
                _ => {
                    return Err(bad(&format!(
                        "unknown line `{}`",
                        k.chars().take(40).collect::<String>()
                    )))
                }
            }
        }
        let seed = secret
            .as_deref()
            .and_then(rrstore_format::id::parse_hex32)
            .ok_or_else(|| bad("no `secret` line of 64 hex digits"))?;
        let key = SecretKey {
            key: SigningKey::from_bytes(&seed),
            name: name.unwrap_or_default(),
        };
        check_name(&key.name).map_err(|_| bad("its `name` line is not a valid key name"))?;
        let stated = public.as_deref().map(PublicKey::parse);
        if !matches!(stated, Some(Ok(p)) if p == key.public()) {
            return Err(bad("its `public` line is not the public key of its secret"));
        }
        Ok(key)
    }

    /// The signature object of recording `id`.
    pub fn sign(&self, id: &RecordingId) -> SignatureObject {
        let public = self.public();
        let sig = self.key.sign(&message(id, &public, &self.name));
        SignatureObject {
            public,
            name: self.name.clone(),
            signature: sig.to_bytes(),
        }
    }
}

/// A key name: printable ASCII of a small set, so it is safe on a terminal.
pub fn check_name(name: &str) -> Result<()> {
    let ok = name.len() <= MAX_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " ._-@".contains(c));
    if ok {
        Ok(())
    } else {
        Err(SigningError::BadName(name.chars().take(100).collect()))
    }
}

/// What a signature covers: context | recording ID | public key | name
/// length u8 | name.
pub fn message(id: &RecordingId, public: &PublicKey, name: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(CONTEXT.len() + 65 + name.len());
    m.extend_from_slice(CONTEXT);
    m.extend_from_slice(&id.0);
    m.extend_from_slice(&public.0);
    m.push(name.len() as u8);
    m.extend_from_slice(name.as_bytes());
    m
}

/// A signature of one recording by one key:
/// `"RRS1" | public key (32) | name length u8 | name | signature (64)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignatureObject {
    pub public: PublicKey,
    pub name: String,
    pub signature: [u8; 64],
}

impl SignatureObject {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(SIG_FIXED + self.name.len());
        v.extend_from_slice(SIG_MAGIC);
        v.extend_from_slice(&self.public.0);
        v.push(self.name.len() as u8);
        v.extend_from_slice(self.name.as_bytes());
        v.extend_from_slice(&self.signature);
        v
    }

    /// Parse an object and check its signature of `id`; the reason when it
    /// is malformed or does not verify.
    pub fn decode_verified(body: &[u8], id: &RecordingId) -> std::result::Result<Self, String> {
        if body.len() < SIG_FIXED || &body[..4] != SIG_MAGIC {
            return Err("not a signature object (bad magic or too short)".into());
        }
        let mut public = [0u8; 32];
        public.copy_from_slice(&body[4..36]);
        let n = body[36] as usize;
        if body.len() != SIG_FIXED + n {
            return Err(format!(
                "{} bytes; a signature object with a {n}-byte name has {}",
                body.len(),
                SIG_FIXED + n
            ));
        }
        let name = std::str::from_utf8(&body[37..37 + n])
            .ok()
            .filter(|s| check_name(s).is_ok())
            .ok_or("its key name is not a valid name")?
            .to_string();
        let mut signature = [0u8; 64];
        signature.copy_from_slice(&body[37 + n..]);
        let obj = SignatureObject {
            public: PublicKey(public),
            name,
            signature,
        };
        let key = obj
            .public
            .verifying()
            .ok_or("its public key is not a point of the curve")?;
        key.verify_strict(
            &message(id, &obj.public, &obj.name),
            &Signature::from_bytes(&obj.signature),
        )
        .map_err(|_| {
            format!(
                "the signature does not verify with key {}",
                obj.public.key_id()
            )
        })?;
        Ok(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_for_its_recording_and_bytes() {
        let key = SecretKey::generate("alice").unwrap();
        let id = RecordingId([7; 32]);
        let body = key.sign(&id).encode();
        let got = SignatureObject::decode_verified(&body, &id).unwrap();
        assert_eq!(got.public, key.public());
        assert_eq!(got.name, "alice");
        assert!(SignatureObject::decode_verified(&body, &RecordingId([8; 32])).is_err());
        for i in 0..body.len() {
            let mut b = body.clone();
            b[i] ^= 1;
            assert!(
                SignatureObject::decode_verified(&b, &id).is_err(),
                "byte {i}"
            );
        }
    }
}
