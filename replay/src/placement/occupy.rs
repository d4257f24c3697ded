//! `RRSTORE_DEBUG_OCCUPY=ADDR:LEN` (hexadecimal or decimal): before a
//! replay reserves its arena, map `[ADDR, ADDR + LEN)` (page-rounded) in
//! the replaying process and in every host runner it starts, so the range
//! is taken wherever the arena could be mapped (the spare runner and a
//! forked runner inherit the mapping, an executed runner maps it itself
//! first). Tests use it to replay with the recorded range occupied; it is
//! a debugging switch, not a setting.

use std::sync::Once;

pub const OCCUPY_ENV: &str = "RRSTORE_DEBUG_OCCUPY";

/// The range [`OCCUPY_ENV`] names, when it is set and well formed.
pub fn requested() -> Option<(u64, u64)> {
    let v = std::env::var(OCCUPY_ENV).ok()?;
    let (a, l) = v.split_once(':')?;
    Some((number(a)?, number(l)?))
}

fn number(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Map the range [`OCCUPY_ENV`] names in this process, once; nothing when
/// it is unset. A range that cannot be mapped (already taken) is left as
/// it is: it is occupied either way.
pub fn occupy_from_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Some((addr, len)) = requested() {
            if let Some((lo, hi)) = crate::backend::host::arena::page_range(addr, len) {
                let _ = crate::backend::host::arena::map_fixed(lo, hi - lo, None);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hex_and_decimal() {
        assert_eq!(number("0x7f00"), Some(0x7f00));
        assert_eq!(number("4096"), Some(4096));
        assert_eq!(number("zz"), None);
    }
}
