//! `RRSTORE_DEBUG_OCCUPY=ADDR:LEN` (hexadecimal or decimal): before a
//! replay reserves its arena, map `[ADDR, ADDR + LEN)` (page-rounded) in
//! the replaying process and in every host runner it starts, so the range
//! is taken wherever the arena could be mapped (the spare runner and a
//! forked runner inherit the mapping, an executed runner maps it itself
//! first). Tests use it to replay with the recorded range occupied; it is
//! a debugging switch, not a setting.
//!
//! The replaying process gets the range as `ReplayOptions::occupy` (`rrstore`
//! parses the variable with [`parse`]); an executed runner, a process of its
//! own, reads the variable it inherits ([`requested`], the one read of it
//! here: runner-side, kept in its environment by `sandbox::env`).

use std::sync::Once;

pub const OCCUPY_ENV: &str = "RRSTORE_DEBUG_OCCUPY";

/// The range [`OCCUPY_ENV`] names in an executed runner's environment,
/// when it is set and well formed (runner side only).
pub fn requested() -> Option<(u64, u64)> {
    parse(&std::env::var(OCCUPY_ENV).ok()?)
}

/// The range an `ADDR:LEN` value names, when well formed.
pub fn parse(v: &str) -> Option<(u64, u64)> {
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

/// Map `range` (address, length) in this process, once (the first range
/// given); nothing when it is `None`. A range that cannot be mapped
/// (already taken) is left as it is: it is occupied either way.
pub fn occupy(range: Option<(u64, u64)>) {
    static ONCE: Once = Once::new();
    let Some((addr, len)) = range else {
        return;
    };
    ONCE.call_once(|| {
        if let Some((lo, hi)) = crate::backend::host::arena::page_range(addr, len) {
            let _ = crate::backend::host::arena::map_fixed(lo, hi - lo, None);
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
