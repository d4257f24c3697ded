//! Signatures on a remote: `signatures/<recording ID>/<key id>`, one
//! signature object (store/src/signing.rs) per recording and signer,
//! written after the recording's manifest (spec/REMOTE.md, "Signatures").
//! Push writes them; pull reads those of the recordings it brings, keeps
//! the valid ones, and, when asked to, refuses recordings that no trusted
//! key signed before anything is transferred. Kept out of the data layout
//! (no other object names a signature), so any layout version carries them.

use std::collections::HashMap;

use rrstore_format::RecordingId;

use super::client::Remote;
use super::error::RemoteError;
use crate::signing::{PublicKey, SecretKey, SignatureObject};

pub const SIGNATURES: &str = "signatures/";

/// Up to this many recordings, [`fetch`] lists each one's signatures
/// rather than the whole `signatures/` prefix.
const PER_RECORDING_LISTS: usize = 4;

pub fn signature_key(id: &RecordingId, key: &PublicKey) -> String {
    format!("{SIGNATURES}{}/{}", id.to_hex(), key.key_id())
}

/// The (recording, key id) a `signatures/<id>/<key id>` key names.
fn parse_key(key: &str) -> Option<(RecordingId, &str)> {
    let (id, kid) = key.strip_prefix(SIGNATURES)?.split_once('/')?;
    let ok = kid.len() == 16 && kid.bytes().all(|b| b.is_ascii_hexdigit());
    Some((id.parse().ok()?, kid)).filter(|_| ok)
}

#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// Recordings without a valid signature by any of the required keys;
    /// nothing was transferred.
    #[error("remote `{remote}`: {} recording(s) are not signed by a required key ({}), so nothing was pulled: {}", .refused.len(), .required.join(", "), refusals(.refused))]
    Refused {
        remote: String,
        required: Vec<String>,
        refused: Vec<Refusal>,
    },
    #[error(transparent)]
    Remote(#[from] RemoteError),
}

/// Why one recording was refused.
#[derive(Clone, Debug)]
pub struct Refusal {
    pub id: String,
    pub reason: String,
}

fn refusals(r: &[Refusal]) -> String {
    r.iter()
        .map(|r| format!("recording {}: {}", r.id, r.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What a remote holds for one recording.
#[derive(Clone, Debug, Default)]
pub struct Found {
    pub valid: Vec<SignatureObject>,
    /// Objects that do not verify: their key and why.
    pub invalid: Vec<(String, String)>,
}

/// Sign recordings `ids` on `remote` with `key`. The caller has made sure
/// each manifest is on the remote (push writes them first).
pub fn sign(
    remote: &Remote,
    ids: &[RecordingId],
    key: &SecretKey,
) -> Result<Vec<(RecordingId, SignatureObject)>, RemoteError> {
    let signed: Vec<(RecordingId, SignatureObject)> =
        ids.iter().map(|id| (*id, key.sign(id))).collect();
    let items = signed
        .iter()
        .map(|(id, s)| Ok((signature_key(id, &s.public), s.encode())));
    remote.put_all(items, &mut |_| {})?;
    Ok(signed)
}

/// The signatures `remote` holds of recordings `ids` (a LIST of each
/// recording's `signatures/<id>/`, all at once, or of all of `signatures/` for many
/// recordings, then a GET per object of those recordings), each checked.
pub fn fetch(
    remote: &Remote,
    ids: &[RecordingId],
) -> Result<HashMap<RecordingId, Found>, RemoteError> {
    let mut out: HashMap<RecordingId, Found> = ids.iter().map(|i| (*i, Found::default())).collect();
    if ids.is_empty() {
        return Ok(out);
    }
    // One LIST per recording while that is fewer requests than listing
    // every signature the remote holds: a pull's cost stays in proportion
    // to what it pulls, not to the size of the remote.
    let listed = if ids.len() <= PER_RECORDING_LISTS {
        let dirs: Vec<String> = ids
            .iter()
            .map(|id| format!("{SIGNATURES}{}/", id.to_hex()))
            .collect();
        remote.list_many(&dirs)?
    } else {
        remote.list(SIGNATURES)?
    };
    let keys: Vec<String> = listed
        .into_iter()
        .filter(|k| parse_key(k).is_some_and(|(id, _)| out.contains_key(&id)))
        .collect();
    remote.get_all(keys.into_iter(), &mut |key, body| {
        let Some((id, kid)) = parse_key(&key) else {
            return Ok(());
        };
        let Some(found) = out.get_mut(&id) else {
            return Ok(());
        };
        // Listed, then gone: nothing to check.
        let Some(body) = body else { return Ok(()) };
        match SignatureObject::decode_verified(&body, &id) {
            Ok(s) if s.public.key_id() == kid => found.valid.push(s),
            Ok(s) => found.invalid.push((
                key.clone(),
                format!("it holds a signature by key {}", s.public.key_id()),
            )),
            Err(reason) => found.invalid.push((key.clone(), reason)),
        }
        Ok(())
    })?;
    for f in out.values_mut() {
        f.valid.sort_by_key(|s| s.public.key_id());
        f.invalid.sort();
    }
    Ok(out)
}

/// Check that every recording of `ids` has a valid signature by one of
/// `required` (any of them), given what [`fetch`] found.
pub fn require(
    remote: &Remote,
    ids: &[RecordingId],
    found: &HashMap<RecordingId, Found>,
    required: &[PublicKey],
) -> Result<(), SignatureError> {
    let none = Found::default();
    let mut refused = Vec::new();
    for id in ids {
        let f = found.get(id).unwrap_or(&none);
        if f.valid.iter().any(|s| required.contains(&s.public)) {
            continue;
        }
        let required_ids: Vec<String> = required.iter().map(|k| k.key_id()).collect();
        let bad: Vec<String> = f
            .invalid
            .iter()
            .filter(|(k, _)| required_ids.iter().any(|r| k.ends_with(r.as_str())))
            .map(|(k, why)| format!("its signature {k} is not valid: {why}"))
            .collect();
        let reason = if !bad.is_empty() {
            bad.join("; ")
        } else if f.valid.is_empty() && f.invalid.is_empty() {
            "it is not signed".to_string()
        } else {
            let others: Vec<String> = f.valid.iter().map(|s| s.public.key_id()).collect();
            format!(
                "it is signed only by other keys ({})",
                if others.is_empty() {
                    "none valid".to_string()
                } else {
                    others.join(", ")
                }
            )
        };
        refused.push(Refusal {
            id: id.to_hex(),
            reason,
        });
    }
    if refused.is_empty() {
        return Ok(());
    }
    Err(SignatureError::Refused {
        remote: remote.name.clone(),
        required: required.iter().map(|k| k.key_id()).collect(),
        refused,
    })
}
