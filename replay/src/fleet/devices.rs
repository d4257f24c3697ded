//! Which devices to replay on: `--device N|UUID` picks one, `--devices
//! 0,2-3|all` (ordinals, ranges and UUIDs, comma-separated) several. A UUID
//! matches case-insensitively, with or without the `GPU-` prefix
//! `nvidia-smi` prints. Resolution is against the list a backend reports
//! ([`crate::backend::devices`]), so an error can name the devices there
//! are.

use super::FleetError;
use crate::backend::devices::{BackendStatus, Device};
use crate::backend::BackendError;

/// One device as given on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceRef {
    Ordinal(u32),
    Uuid(String),
}

/// `--devices`: every device, or the ones listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceList {
    All,
    Listed(Vec<DeviceRef>),
}

/// Ranges longer than this are refused (no node has that many devices).
const MAX_RANGE: u32 = 4096;

/// Read `N` or a UUID.
pub fn parse_device(spec: &str) -> Result<DeviceRef, FleetError> {
    let s = spec.trim();
    if s.is_empty() {
        return Err(bad(spec, "empty"));
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse()
            .map(DeviceRef::Ordinal)
            .map_err(|_| bad(spec, "the ordinal is too large"));
    }
    let hex = strip_gpu(s);
    let hex = hex.strip_prefix("host-").unwrap_or(hex);
    let valid = hex.len() >= 8 && hex.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    if !valid {
        return Err(bad(
            spec,
            "expected an ordinal (0, 1, ...) or a device UUID as `rrstore devices` prints it",
        ));
    }
    Ok(DeviceRef::Uuid(s.to_string()))
}

/// Read `all` or a comma-separated list of ordinals, `A-B` ranges and UUIDs.
pub fn parse_devices(spec: &str) -> Result<DeviceList, FleetError> {
    if spec.trim().eq_ignore_ascii_case("all") {
        return Ok(DeviceList::All);
    }
    let mut out = Vec::new();
    for part in spec.split(',') {
        let p = part.trim();
        let range = p.split_once('-').filter(|(a, b)| {
            !a.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        });
        match range {
            Some((a, b)) => {
                let (lo, hi) = match (a.parse::<u32>(), b.parse::<u32>()) {
                    (Ok(lo), Ok(hi)) if lo <= hi => (lo, hi),
                    _ => return Err(bad(spec, &format!("`{p}` is not a range LOW-HIGH"))),
                };
                if hi - lo >= MAX_RANGE {
                    return Err(bad(spec, &format!("the range `{p}` is too long")));
                }
                out.extend((lo..=hi).map(DeviceRef::Ordinal));
            }
            None => out.push(parse_device(p).map_err(|_| {
                bad(
                    spec,
                    &format!("`{p}` is neither an ordinal, a range LOW-HIGH nor a device UUID"),
                )
            })?),
        }
    }
    Ok(DeviceList::Listed(out))
}

/// The ordinal of `r` among `devices` of `backend`.
pub fn resolve_one(r: &DeviceRef, backend: &str, devices: &[Device]) -> Result<u32, FleetError> {
    let found = devices.iter().find(|d| match r {
        DeviceRef::Ordinal(n) => d.index as u64 == u64::from(*n),
        DeviceRef::Uuid(u) => d
            .uuid
            .as_deref()
            .is_some_and(|du| strip_gpu(du).eq_ignore_ascii_case(strip_gpu(u))),
    });
    match found.and_then(|d| u32::try_from(d.index).ok()) {
        Some(i) => Ok(i),
        None => Err(FleetError::NoDevice {
            backend: backend.to_string(),
            device: match r {
                DeviceRef::Ordinal(n) => n.to_string(),
                DeviceRef::Uuid(u) => u.clone(),
            },
            available: available(devices),
        }),
    }
}

/// The ordinals `list` names among `devices`, each once, in the order given
/// (`all`: every device, by ordinal).
pub fn resolve(
    list: &DeviceList,
    backend: &str,
    devices: &[Device],
) -> Result<Vec<u32>, FleetError> {
    let mut out: Vec<u32> = Vec::new();
    match list {
        DeviceList::All => {
            out.extend(devices.iter().filter_map(|d| u32::try_from(d.index).ok()));
            if out.is_empty() {
                return Err(FleetError::NoDevice {
                    backend: backend.to_string(),
                    device: "all".into(),
                    available: available(devices),
                });
            }
        }
        DeviceList::Listed(refs) => {
            for r in refs {
                let i = resolve_one(r, backend, devices)?;
                if !out.contains(&i) {
                    out.push(i);
                }
            }
        }
    }
    Ok(out)
}

/// The backend whose devices ordinals refer to: the first usable GPU
/// backend of `all` (CUDA before HIP), else the host.
fn target(all: &[BackendStatus]) -> Option<&BackendStatus> {
    all.iter()
        .find(|b| b.backend != "host" && b.available)
        .or_else(|| all.iter().find(|b| b.backend == "host"))
}

/// `--device`: the ordinal on this machine's replay backend (a UUID is
/// looked up on every backend).
pub fn pick_one(r: &DeviceRef, all: &[BackendStatus]) -> Result<u32, FleetError> {
    if let DeviceRef::Uuid(_) = r {
        if let Some(i) = all
            .iter()
            .find_map(|b| resolve_one(r, b.backend, &b.devices).ok())
        {
            return Ok(i);
        }
    }
    match target(all) {
        Some(b) => resolve_one(r, b.backend, &b.devices),
        None => resolve_one(r, "this machine", &[]),
    }
}

/// `--devices`: the ordinals on this machine's replay backend.
pub fn pick(list: &DeviceList, all: &[BackendStatus]) -> Result<Vec<u32>, FleetError> {
    let Some(b) = target(all) else {
        return resolve(list, "this machine", &[]);
    };
    match list {
        DeviceList::All => resolve(list, b.backend, &b.devices),
        DeviceList::Listed(refs) => {
            let mut out = Vec::new();
            for r in refs {
                let i = pick_one(r, all)?;
                if !out.contains(&i) {
                    out.push(i);
                }
            }
            Ok(out)
        }
    }
}

/// The UUID of device `ordinal` of `backend` for a history row when the
/// backend reported none: the host's (computed once per process); '' for
/// GPUs (their backend reports theirs, read where the driver is
/// initialized: [`crate::backend::Reporting::device_uuid`]).
pub fn uuid_of(backend: &str, ordinal: u32) -> String {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    if backend != "host" || ordinal != 0 {
        return String::new();
    }
    HOST.get_or_init(|| {
        let model = crate::backend::devices::cpu_model();
        crate::backend::devices::host_uuid(&model).unwrap_or_default()
    })
    .clone()
}

/// The host backend's one device is the CPU, ordinal 0.
pub fn host_only(device: u32) -> Result<(), BackendError> {
    if device == 0 {
        return Ok(());
    }
    Err(BackendError::Unavailable(format!(
        "the host backend has one device, 0 (the CPU: {}); there is no device {device}",
        crate::backend::host::host_description()
    )))
}

/// `0 NAME (UUID), 1 ...`, or `none`.
fn available(devices: &[Device]) -> String {
    if devices.is_empty() {
        return "none".into();
    }
    devices
        .iter()
        .map(|d| match &d.uuid {
            Some(u) => format!("{} {} ({u})", d.index, d.name),
            None => format!("{} {}", d.index, d.name),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn strip_gpu(s: &str) -> &str {
    s.strip_prefix("GPU-")
        .or_else(|| s.strip_prefix("gpu-"))
        .unwrap_or(s)
}

fn bad(spec: &str, why: &str) -> FleetError {
    FleetError::BadDevice {
        spec: spec.to_string(),
        why: why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(n: usize) -> Vec<Device> {
        (0..n)
            .map(|i| Device {
                index: i,
                name: format!("Fake GPU {i}"),
                target: "sm_90".into(),
                uuid: Some(format!("GPU-{i:08x}-1111-2222-3333-444455556666")),
                compute_capability: None,
                memory_bytes: Some(80 << 30),
                cores: None,
            })
            .collect()
    }

    #[test]
    fn lists_ranges_and_all_parse_and_resolve_in_the_order_given() {
        let devs = fake(4);
        let l = parse_devices("0,2-3").unwrap();
        assert_eq!(resolve(&l, "cuda", &devs).unwrap(), [0, 2, 3]);
        let l = parse_devices("3, 1,1").unwrap();
        assert_eq!(resolve(&l, "cuda", &devs).unwrap(), [3, 1]);
        assert_eq!(parse_devices("ALL").unwrap(), DeviceList::All);
        assert_eq!(
            resolve(&DeviceList::All, "cuda", &devs).unwrap(),
            [0, 1, 2, 3]
        );
        let l = parse_devices("00000002-1111-2222-3333-444455556666,0").unwrap();
        assert_eq!(resolve(&l, "cuda", &devs).unwrap(), [2, 0]);
        let one = parse_device("gpu-00000001-1111-2222-3333-444455556666").unwrap();
        assert_eq!(resolve_one(&one, "cuda", &devs).unwrap(), 1);
    }

    #[test]
    fn bad_lists_and_absent_devices_are_errors_that_list_the_devices() {
        for s in ["", "1,,2", "3-1", "x", "0-99999", "1-2-3"] {
            assert!(parse_devices(s).is_err(), "{s}");
        }
        let e = resolve(&parse_devices("0,4").unwrap(), "cuda", &fake(2)).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("no device 4"), "{m}");
        assert!(
            m.contains("0 Fake GPU 0") && m.contains("1 Fake GPU 1"),
            "{m}"
        );
        let e = resolve(&DeviceList::All, "hip", &[]).unwrap_err();
        assert!(e.to_string().contains("none"), "{e}");
        let u = parse_device("deadbeef-0000").unwrap();
        assert!(resolve_one(&u, "cuda", &fake(2)).is_err());
    }

    fn status(backend: &'static str, available: bool, devices: Vec<Device>) -> BackendStatus {
        BackendStatus {
            backend,
            available,
            runtime: None,
            reason: None,
            devices,
        }
    }

    #[test]
    fn ordinals_refer_to_the_gpu_backend_when_there_is_one_else_the_host() {
        let mut host = fake(1);
        host[0].uuid = Some("host-0123456789abcdef0123456789abcdef".into());
        let gpus = vec![
            status("host", true, host.clone()),
            status("cuda", true, fake(4)),
            status("hip", false, Vec::new()),
        ];
        assert_eq!(pick(&DeviceList::All, &gpus).unwrap(), [0, 1, 2, 3]);
        assert_eq!(pick(&parse_devices("1-2").unwrap(), &gpus).unwrap(), [1, 2]);
        let cpu_only = vec![
            status("host", true, host),
            status("cuda", false, Vec::new()),
        ];
        assert_eq!(pick(&DeviceList::All, &cpu_only).unwrap(), [0]);
        let e = pick_one(&DeviceRef::Ordinal(1), &cpu_only)
            .unwrap_err()
            .to_string();
        assert!(e.contains("host has no device 1"), "{e}");
        let u = parse_device("host-0123456789ABCDEF0123456789abcdef").unwrap();
        assert_eq!(pick_one(&u, &gpus).unwrap(), 0);
    }

    #[test]
    fn the_host_has_device_zero_only() {
        assert!(host_only(0).is_ok());
        let e = host_only(1).unwrap_err().to_string();
        assert!(
            e.contains("one device, 0") && e.contains("no device 1"),
            "{e}"
        );
    }
}
