//! The exact names of rrstore's own objects and temporary files on a
//! remote: the only keys rrstore ever deletes there (spec/REMOTE.md,
//! "Links and names"). A listing can hold anything someone with write
//! access put there; a key is deleted only when it is byte for byte the
//! name rrstore itself gives such an object, so a foreign file (or one
//! reached through a link a listing did follow) is never a candidate.

use rrstore_format::RecordingId;

use super::v2::layout;
use super::{history, lock, signature, temp, v3};

/// Fan-out directories of objects named `<dir><ab>/<64 hex>`.
const FANNED: [&str; 6] = [
    layout::CHUNKS,
    layout::LISTS,
    layout::PARTS,
    layout::IMAGES,
    v3::PACKS,
    history::HISTORY,
];

/// Lowercase hex digits only, as rrstore writes them.
fn lower_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `key` is an object rrstore writes: a fanned object, a manifest, an
/// index object, a signature or a lock.
pub fn is_object(key: &str) -> bool {
    if let Some(dir) = FANNED.iter().find(|d| key.starts_with(*d)) {
        return key[dir.len()..].split_once('/').is_some_and(|(fan, name)| {
            lower_hex(name, 64) && fan.len() == 2 && name.starts_with(fan)
        });
    }
    if let Some(id) = key.strip_prefix(layout::RECORDINGS) {
        return lower_hex(id, 64) && id.parse::<RecordingId>().is_ok();
    }
    if let Some(name) = key.strip_prefix(v3::INDEX) {
        return lower_hex(name, 64);
    }
    if let Some(rest) = key.strip_prefix(signature::SIGNATURES) {
        return rest
            .split_once('/')
            .is_some_and(|(id, kid)| lower_hex(id, 64) && lower_hex(kid, 16));
    }
    lock::is_lock_key(key)
}

/// `key` is a temporary file of a file:// remote: `tmp/<host>.<pid>.<n>`,
/// or the staging name `<object key>#<n>` older versions wrote.
pub fn is_temporary(key: &str) -> bool {
    if let Some(name) = key
        .strip_prefix(temp::TMP_DIR)
        .and_then(|k| k.strip_prefix('/'))
    {
        return temp::parse_name(name).is_some();
    }
    key.rsplit_once('#').is_some_and(|(object, n)| {
        !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && is_object(object)
    })
}

/// `key` may be deleted by rrstore.
pub fn deletable(key: &str) -> bool {
    is_object(key) || is_temporary(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_rrstores_own_names_may_be_deleted() {
        let h = "ab".to_string() + &"0".repeat(62);
        for ok in [
            format!("packs/ab/{h}"),
            format!("chunks/ab/{h}"),
            format!("history/ab/{h}"),
            format!("index/{h}"),
            format!("recordings/{h}"),
            format!("signatures/{h}/0123456789abcdef"),
            "locks/exclusive".to_string(),
            "locks/shared-my-host_1-42-0".to_string(),
            "tmp/my.host.example.42.7".to_string(),
            format!("packs/ab/{h}#12"),
        ] {
            assert!(deletable(&ok), "{ok}");
        }
        for bad in [
            format!("packs/ff/{h}"),
            format!("packs/AB/{}", h.to_uppercase()),
            format!("packs/ab/{h}/x"),
            format!("index/{h}x"),
            "packs/ff/readme.txt".to_string(),
            format!("signatures/{h}/notes.txt"),
            format!("signatures/{h}/0123456789abcdef/x"),
            "locks/shared-x".to_string(),
            "locks/other".to_string(),
            "tmp/victim".to_string(),
            "tmp/a.b".to_string(),
            "tmp/sub/h.1.2".to_string(),
            "tmp/.1.2".to_string(),
            format!("packs/ab/{h}#"),
            "notes#1".to_string(),
            format!("recordings/{h}/../x"),
        ] {
            assert!(!deletable(&bad), "{bad}");
        }
    }
}
