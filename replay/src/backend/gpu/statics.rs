//! Device statics between repetitions: the state an image keeps in its own
//! writable globals that the recording does not hold.
//!
//! A repetition rewrites the arena and the recorded globals, but a device
//! static the kernel changes (a counter, the device runtime's own state, the
//! AMDGPU pool's allocation tracker) would keep the previous launch's value,
//! so the second launch would not see what the recorded one saw. The
//! backend therefore reloads the image before the next repetition's globals
//! or launch (`GpuBackend::reset_device_state`) when the image has any
//! writable object that no recorded global overwrites, and always when the
//! image cannot be read for them (PTX, fatbin). A reload is what LLVM does
//! between two runs of the program: a fresh module, the device environment
//! and memory pool written again, the constructors run again.

use std::collections::BTreeSet;

use crate::backend::gpu::elf_read::{Elf, SHF_ALLOC, SHF_WRITE};

/// `STT_OBJECT`, `STT_TLS`: symbols that name data.
fn is_data(info: u8) -> bool {
    matches!(info & 0xf, 1 | 6)
}

/// The writable data objects of `image` (defined, non-empty) that are not
/// in `rewritten`; `None` when the image is not an ELF whose sections and
/// symbols can be read (then every static must be assumed to change).
pub fn unrecorded_statics(image: &[u8], rewritten: &BTreeSet<String>) -> Option<Vec<String>> {
    if !image.starts_with(b"\x7fELF") {
        return None;
    }
    let elf = Elf::parse(image)?;
    let mut out = Vec::new();
    for s in elf.symbols() {
        let Some(sec) = elf.sections.get(usize::from(s.shndx)) else {
            continue;
        };
        let writable = sec.flags & (SHF_WRITE | SHF_ALLOC) == SHF_WRITE | SHF_ALLOC;
        if s.shndx == 0 || s.size == 0 || !is_data(s.info) || !writable {
            continue;
        }
        let name = String::from_utf8_lossy(s.name).into_owned();
        if !rewritten.contains(&name) && !out.contains(&name) {
            out.push(name);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::gpu::rpc_client::build::image_with_client;

    #[test]
    fn writable_objects_not_rewritten_are_statics() {
        // `counter` in .bss (writable), `k` in .text (not).
        let img = image_with_client(224, "counter", vec![0; 16], false);
        let none = BTreeSet::new();
        assert_eq!(
            unrecorded_statics(&img, &none),
            Some(vec!["counter".into()])
        );
        let recorded: BTreeSet<String> = ["counter".to_string()].into();
        assert_eq!(unrecorded_statics(&img, &recorded), Some(vec![]));
        assert_eq!(unrecorded_statics(b".version 8.0", &none), None);
    }
}
