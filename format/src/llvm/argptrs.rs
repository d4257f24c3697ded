//! The `ArgPtrs` signature of stock LLVM 19-22: `saveKernelDescr()` writes
//! `LaunchParams.Ptrs[i]`, the addresses of the recording process' stack
//! slots that hold the kernel's arguments, instead of the argument values
//! (`LaunchParams.Data[i]`). Such a descriptor lists consecutive addresses
//! 8 bytes apart (one pointer-sized slot each) that lie outside the arena;
//! a replay would hand those dead stack addresses to the kernel.

use crate::model::Generation;

use super::Fields;

/// Below this, a value is taken for a scalar, not a stack address.
const MIN_ADDRESS: u64 = 1 << 16;

/// The warning for a descriptor whose `ArgPtrs` look like slot addresses;
/// `None` when they do not (or when the arena's address is unknown). Needs
/// two arguments at least: one address proves no spacing.
pub fn slot_address_warning(generation: Generation, f: &Fields, arena_size: u64) -> Option<String> {
    if !super::layouts::of(generation).may_record_slot_addresses() || f.args.len() < 2 {
        return None;
    }
    let base = f.arena_base?;
    let end = base.saturating_add(arena_size);
    let first = f.args[0];
    let consecutive = f.args.windows(2).all(|w| w[0].checked_add(8) == Some(w[1]));
    let outside = f.args.iter().all(|&a| a < base || a >= end);
    if first < MIN_ADDRESS || !consecutive || !outside {
        return None;
    }
    let last = f.args[f.args.len() - 1];
    Some(format!(
        "ArgPtrs holds {} consecutive addresses 8 bytes apart ({first:#x}..={last:#x}) outside \
         the arena ({base:#x}, {arena_size} bytes): stock LLVM 19-22 recorded the addresses of \
         the stack slots holding the kernel arguments (LaunchParams.Ptrs) instead of their values \
         (LaunchParams.Data), so a replay would pass the kernel dead stack addresses; record it \
         again with a libomptarget whose saveKernelDescr() writes LaunchParams.Data into ArgPtrs \
         (README: \"Which recordings replay\")",
        f.args.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LaunchConfig;

    fn fields(args: Vec<u64>) -> Fields {
        Fields {
            kernel: "k".into(),
            num_args: args.len() as u64,
            arg_offsets: vec![0; args.len()],
            args,
            launch: LaunchConfig::default(),
            device_id: 0,
            arena_base: Some(0x7f00_0000_0000),
            memory_size: None,
            reserved: None,
        }
    }

    #[test]
    fn recognises_slot_addresses_and_nothing_else() {
        let g = Generation::KernelNamed;
        let slots = fields(vec![0x7ffd_1000_0010, 0x7ffd_1000_0018, 0x7ffd_1000_0020]);
        let w = slot_address_warning(g, &slots, 4096).unwrap();
        assert!(w.contains("LaunchParams.Data"), "{w}");
        assert_eq!(slot_address_warning(Generation::Native, &slots, 4096), None);
        // Real values: a pointer into the arena, scalars, -1.
        let real = fields(vec![u64::MAX, 0x7f00_0000_0000, 262_144]);
        assert_eq!(slot_address_warning(g, &real, 4096), None);
        // Small consecutive scalars, one argument, a slot run into the arena.
        assert_eq!(slot_address_warning(g, &fields(vec![0, 8, 16]), 4096), None);
        assert_eq!(
            slot_address_warning(g, &fields(vec![0x7ffd_1000_0010]), 4096),
            None
        );
        let into = fields(vec![0x7f00_0000_0ff8, 0x7f00_0000_1000]);
        assert_eq!(slot_address_warning(g, &into, 4096), None);
        let mut unknown = slots.clone();
        unknown.arena_base = None;
        assert_eq!(slot_address_warning(g, &unknown, 4096), None);
    }
}
