//! Kernel names as people read them. LLVM names an offloaded region
//! `__omp_offloading_<device>_<file>_<function>_l<line>`, where `<function>`
//! is the Itanium-mangled C++ name for C++ functions (`_ZL4stepPfS_i`).
//! Human output shows it demangled (`step(float*, float*, int)`), with
//! control and bidirectional characters escaped ([`crate::shown`]: a name
//! comes from a recording someone else made); JSON and every lookup keep
//! the raw name.

use std::borrow::Cow;

use crate::shown::shown;

const PREFIX: &str = "__omp_offloading_";

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// (`__omp_offloading_<dev>_<file>_`, function, `_l<line>`) when `k` has
/// that shape.
fn split(k: &str) -> Option<(&str, &str, &str)> {
    let rest = k.strip_prefix(PREFIX)?;
    let mut it = rest.splitn(3, '_');
    let (dev, file, tail) = (it.next()?, it.next()?, it.next()?);
    if !is_hex(dev) || !is_hex(file) {
        return None;
    }
    let head = &k[..PREFIX.len() + dev.len() + file.len() + 2];
    let at = tail.rfind("_l")?;
    let line = &tail[at + 2..];
    if line.is_empty() || !line.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((head, &tail[..at], &tail[at..]))
}

/// A mangled C++ name demangled, or None if it is not one.
pub fn demangle(sym: &str) -> Option<String> {
    if !sym.starts_with("_Z") {
        return None;
    }
    let s = cpp_demangle::Symbol::new(sym.as_bytes()).ok()?;
    s.demangle(&cpp_demangle::DemangleOptions::default()).ok()
}

/// The full kernel name with its C++ function demangled:
/// `__omp_offloading_fe00_9ae056__ZL4stepPfS_i_l7` ->
/// `__omp_offloading_fe00_9ae056_step(float*, float*, int)_l7`.
pub fn display(kernel: &str) -> Cow<'_, str> {
    match demangled(kernel) {
        Cow::Borrowed(k) => shown(k),
        Cow::Owned(d) => Cow::Owned(shown(&d).into_owned()),
    }
}

fn demangled(kernel: &str) -> Cow<'_, str> {
    match split(kernel) {
        Some((head, func, line)) => match demangle(func) {
            Some(d) => Cow::Owned(format!("{head}{d}{line}")),
            None => Cow::Borrowed(kernel),
        },
        None => demangle(kernel).map_or(Cow::Borrowed(kernel), Cow::Owned),
    }
}

/// The function and line only, demangled: `main_l13`,
/// `step(float*, float*, int)_l7`.
pub fn short(kernel: &str) -> Cow<'_, str> {
    match split(kernel) {
        Some((_, func, line)) => match demangle(func) {
            Some(d) => Cow::Owned(shown(&format!("{d}{line}")).into_owned()),
            None => Cow::Owned(shown(&format!("{func}{line}")).into_owned()),
        },
        None => display(kernel),
    }
}

#[cfg(test)]
mod tests {
    use super::{display, short};

    #[test]
    fn names_of_the_fixtures() {
        let cpp = "__omp_offloading_fe00_9ae056__ZL4stepPfS_i_l7";
        assert_eq!(
            display(cpp),
            "__omp_offloading_fe00_9ae056_step(float*, float*, int)_l7"
        );
        assert_eq!(short(cpp), "step(float*, float*, int)_l7");
        let c = "__omp_offloading_fe00_990821_main_l13";
        assert_eq!(display(c), c);
        assert_eq!(short(c), "main_l13");
        assert_eq!(short("my_kernel"), "my_kernel");
        assert_eq!(display("k\x1b[2J\u{202e}"), "k\\x1b[2J\\u{202e}");
        assert_eq!(short("__omp_offloading_fe00_1_a\nb_l2"), "a\\nb_l2");
        assert_eq!(display("_Z3addPfi"), "add(float*, int)");
        // Not a valid mangled name: left as it is.
        assert_eq!(
            display("__omp_offloading_fe00_1__Zfoo_l2"),
            "__omp_offloading_fe00_1__Zfoo_l2"
        );
    }
}
