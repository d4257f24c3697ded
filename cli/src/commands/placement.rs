//! `--placement recorded|relocate|auto` and `--relocate-to ADDR`, shared by
//! `replay`, `check`, `bisect` and `diff` (issue 19; the logic is
//! `rrstore_replay::placement`).

use rrstore_replay::placement::Placement;
use rrstore_replay::ReplayOptions;

#[derive(clap::Args, Clone, Debug, Default)]
pub struct PlacementArgs {
    /// Where the arena goes: at its recorded address (recorded; exit 10
    /// when the range cannot be had), at another address with every pointer
    /// into it rebased (relocate), or recorded when the range can be had,
    /// else relocated (auto).
    #[arg(long, value_enum, default_value = "auto")]
    pub placement: PlacementArg,
    /// Place a relocated arena at ADDR (hexadecimal with 0x, or decimal);
    /// it must keep the recorded base's offset within 64 KiB.
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub relocate_to: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, clap::ValueEnum)]
pub enum PlacementArg {
    Recorded,
    Relocate,
    #[default]
    Auto,
}

impl PlacementArgs {
    /// Set the placement options of `opts`.
    pub fn apply(&self, opts: &mut ReplayOptions) -> Result<(), crate::exit::UsageError> {
        opts.placement = match self.placement {
            PlacementArg::Recorded => Placement::Recorded,
            PlacementArg::Relocate => Placement::Relocate,
            PlacementArg::Auto => Placement::Auto,
        };
        if self.relocate_to.is_some() && opts.placement == Placement::Recorded {
            return Err(crate::exit::UsageError(
                "--relocate-to places a relocated arena; it cannot be combined with --placement recorded".into(),
            ));
        }
        opts.relocate_to = self.relocate_to;
        Ok(())
    }
}

fn parse_addr(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("`{s}` is not an address (hexadecimal with 0x, or decimal)"))
}
