//! Placement's tests: candidates, forced bases, and `place` against a
//! device that refuses some reservations.

use super::*;
use crate::backend::{Relocation, Reporting};

#[test]
fn candidates_keep_the_offset_and_stay_clear_of_the_recorded_range() {
    let base = 0x7f1a_fde0_0010;
    let c = candidates(base, 1 << 30);
    assert!(!c.is_empty());
    for a in &c {
        assert_eq!(a % ALIGN, base % ALIGN);
        assert!(a + (1 << 30) <= base);
    }
    // A recorded range among the candidates is skipped.
    let c = candidates(0x2000_0000_0010, 4096);
    assert!(c.iter().all(|&a| a != 0x2000_0000_0010));
}

#[test]
fn a_forced_base_must_keep_the_alignment_and_not_overlap() {
    let base = 0x7f1a_fde0_0010;
    assert!(check_target(base, 4096, 0x3000_0000_0010).is_ok());
    let e = check_target(base, 4096, 0x3000_0000_0000).unwrap_err();
    assert!(e.to_string().contains("offset 0x10"), "{e}");
    assert!(e.to_string().contains("use 0x300000000010"), "{e}");
    let e = check_target(base, 1 << 20, base + 0x1_0000).unwrap_err();
    assert!(e.to_string().contains("overlaps"), "{e}");
}

/// A device whose reservations at the bases in `taken` fail (and that
/// records what it was asked for), like a runner whose range is held;
/// with `driver_picks`, a device that puts a reservation it is allowed
/// to place elsewhere there instead (a GPU driver ignoring the hint);
/// with `footprint`, a device that maps zeroed slack up to that many bytes
/// from the base (the host backend), all of it except at the bases in
/// `slack_cut`, where half of it (and so refuses those for a whole
/// footprint).
#[derive(Default)]
struct Device {
    taken: Vec<u64>,
    asked: Vec<u64>,
    driver_picks: Option<u64>,
    allowed: bool,
    elsewhere: Option<u64>,
    footprint: Option<u64>,
    slack_cut: Vec<u64>,
    slack: Option<crate::backend::host::slack::Slack>,
}

impl Backend for Device {
    fn name(&self) -> &'static str {
        "test"
    }
    fn place(
        &mut self,
        req: &ArenaRequest<'_>,
    ) -> Result<crate::backend::rehydrate::Placement, BackendError> {
        self.reserve(req.base, req.size)?;
        self.slack = self.footprint.map(|f| {
            let wanted = f - req.size;
            let cut = self.slack_cut.contains(&req.base);
            crate::backend::host::slack::Slack {
                wanted,
                mapped: if cut { wanted / 2 } else { wanted },
                short: cut.then(|| "occupied".into()),
            }
        });
        let short = self.slack.as_ref().is_some_and(|s| s.mapped < s.wanted);
        if req.whole_footprint && short {
            return Err(BackendError::Reserve {
                base: req.base,
                size: req.size,
                reason: "the slack is short".into(),
            });
        }
        Ok(crate::backend::rehydrate::Placement { base: req.base })
    }
    fn device_description(&self) -> String {
        String::new()
    }
    fn reserve(&mut self, base: u64, size: u64) -> Result<(), BackendError> {
        self.asked.push(base);
        if let (Some(at), true) = (self.driver_picks, self.allowed) {
            self.elsewhere = (at != base).then_some(at);
            return Ok(());
        }
        if self.taken.contains(&base) || self.driver_picks.is_some() {
            return Err(BackendError::Reserve {
                base,
                size,
                reason: "the range is occupied".into(),
            });
        }
        Ok(())
    }
    fn upload(&mut self, _: u64, _: &[u8]) -> Result<(), BackendError> {
        Ok(())
    }
    fn load_image(&mut self, _: &[u8], _: &str) -> Result<(), BackendError> {
        Ok(())
    }
    fn write_global(&mut self, _: &str, _: &[u8]) -> Result<(), BackendError> {
        Ok(())
    }
    fn launch(
        &mut self,
        _: &[u64],
        _: &crate::backend::LaunchParams,
    ) -> Result<std::time::Duration, BackendError> {
        Ok(std::time::Duration::ZERO)
    }
    fn download(&mut self, _: u64, _: &mut [u8]) -> Result<(), BackendError> {
        Ok(())
    }
}

impl Reporting for Device {}

impl Relocation for Device {
    fn allow_elsewhere(&mut self, allow: bool) {
        self.allowed = allow;
    }

    fn placed_elsewhere(&self) -> Option<u64> {
        self.elsewhere
    }

    fn slack_footprint(&self, _: u64) -> Option<u64> {
        self.footprint
    }

    fn arena_slack(&self) -> Option<crate::backend::host::slack::Slack> {
        self.slack.clone()
    }
}

#[test]
fn a_relocated_arena_goes_where_its_whole_footprint_fits_and_rebases_into_it() {
    let base = 0x7f1a_fde0_0010;
    let (size, fp) = (4096, 64 << 20);
    let c = candidates(base, fp);
    // The first candidate's slack is cut short: the second one is taken,
    // and the rebase range is the whole footprint.
    let mut d = Device {
        footprint: Some(fp),
        slack_cut: vec![c[0]],
        ..Device::default()
    };
    let p = place(&mut d, Placement::Relocate, base, size, None, &[]).unwrap();
    assert_eq!(p.base, c[1]);
    assert_eq!(d.asked, vec![c[0], c[1]]);
    assert_eq!(p.rebaser.map(|r| r.span), Some(fp));
    // Every candidate cut short: the first one with room for the arena,
    // rebasing only into what was mapped.
    let mut d = Device {
        footprint: Some(fp),
        slack_cut: candidates(base, size),
        ..Device::default()
    };
    let p = place(&mut d, Placement::Relocate, base, size, None, &[]).unwrap();
    assert_eq!(p.base, c[0]);
    let missing = (fp - size) / 2;
    assert_eq!(p.rebaser.map(|r| r.span), Some(fp - missing));
    // A forced base is taken as it is: the slack there is best effort.
    let to = 0x3000_0000_0010;
    let mut d = Device {
        footprint: Some(fp),
        slack_cut: vec![to],
        ..Device::default()
    };
    let p = place(&mut d, Placement::Relocate, base, size, Some(to), &[]).unwrap();
    assert_eq!(p.base, to);
    // No slack (a GPU backend): the recorded bytes, as before.
    let mut d = Device::default();
    let p = place(&mut d, Placement::Relocate, base, size, None, &[]).unwrap();
    assert_eq!(p.rebaser.map(|r| r.span), Some(size));
}

#[test]
fn a_driver_that_places_the_arena_elsewhere_relocates_it_unless_recorded() {
    let base = 0x7f1a_fde0_0010;
    let at = 0x7e00_0020_0010;
    let mut d = Device {
        driver_picks: Some(at),
        ..Device::default()
    };
    let p = place(&mut d, Placement::Auto, base, 4096, None, &[]).unwrap();
    assert_eq!(p.base, at);
    assert_eq!(p.rebaser.map(|r| r.new_base), Some(at));
    let e = place(&mut d, Placement::Recorded, base, 4096, None, &[]).unwrap_err();
    assert!(matches!(e, BackendError::Reserve { .. }));
}

#[test]
fn auto_falls_back_to_the_first_free_candidate_and_recorded_does_not() {
    let base = 0x7f1a_fde0_0010;
    let size = 1 << 20;
    let first = candidates(base, size)[0];
    // The recorded range and the first candidate are taken.
    let mut d = Device {
        taken: vec![base, first],
        ..Device::default()
    };
    let p = place(&mut d, Placement::Auto, base, size, None, &[]).unwrap();
    let second = candidates(base, size)[1];
    assert_eq!(d.asked, vec![base, first, second]);
    assert_eq!(p.base, second);
    assert_eq!(
        p.rebaser,
        Some(Rebaser {
            old_base: base,
            new_base: second,
            span: size
        })
    );
    let e = place(&mut d, Placement::Recorded, base, size, None, &[]).unwrap_err();
    assert!(matches!(e, BackendError::Reserve { base: b, .. } if b == base));
    // Free: auto keeps the recorded address, relocate never tries it.
    let mut d = Device::default();
    let p = place(&mut d, Placement::Auto, base, size, None, &[]).unwrap();
    assert_eq!((p.base, p.rebaser), (base, None));
    let to = 0x3000_0000_0010;
    let p = place(&mut d, Placement::Relocate, base, size, Some(to), &[]).unwrap();
    assert_eq!(p.base, to);
    assert_eq!(d.asked, vec![base, to]);
}

#[test]
fn summary_names_the_placement() {
    let r = PlacementReport {
        mode: "relocated",
        address: 0x3000_0000_0010,
        recorded_address: 0x7f00_0000_0010,
        rebased_pointers: 3,
        rebased_args: 1,
        scan: true,
        ..Default::default()
    };
    assert!(r.summary().starts_with("relocated 0x300000000010"));
    assert!(r.summary().contains("3 stored pointer(s)"));
}
