//! What can replay on this machine: every backend, whether it is usable here
//! and why not, and its devices (`rrstore devices`). The host backend needs
//! an OpenMP offload runtime (`libomptarget.so.N`) installed.

use serde::Serialize;

use super::gpu::{cuda, hip};
use super::{BackendError, BackendKind};

/// One device of a backend.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Device {
    pub index: usize,
    pub name: String,
    /// `sm_90`, `gfx942:sramecc+:xnack-`, `x86_64`.
    pub target: String,
    /// A stable identifier: the GPU's UUID; host: derived from
    /// /etc/machine-id and the CPU model ([`host_uuid`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// NVIDIA only: `9.0`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Host only: logical CPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores: Option<usize>,
}

/// One backend as seen from here.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct BackendStatus {
    /// `host`, `cuda`, `hip`.
    pub backend: &'static str,
    pub available: bool,
    /// Driver / runtime version (`CUDA driver 13.0`, `HIP runtime 6.3.42134`,
    /// host: the offload runtimes found).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// Why the backend is not usable, and what to install.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub devices: Vec<Device>,
}

fn unavailable(backend: &'static str, reason: String) -> BackendStatus {
    BackendStatus {
        backend,
        available: false,
        runtime: None,
        reason: Some(reason),
        devices: Vec::new(),
    }
}

/// The host CPU (`model name` from /proc/cpuinfo) and its logical cores.
pub fn host() -> BackendStatus {
    let model = cpu_model();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let platform = cfg!(all(target_arch = "x86_64", target_os = "linux"));
    let runtimes = super::host::libraries::installed();
    let reason = if !platform {
        Some("the host backend replays x86-64 Linux images only".to_string())
    } else if runtimes.is_empty() {
        Some(
            "no OpenMP offload runtime (libomptarget.so.N) in the loader's path or in \
             /usr/lib/llvm-N/lib: install LLVM's for the recordings' version, e.g. \
             `apt-get install -y liboffload-22` (LLVM 22) or `apt-get install -y libomp5-19` (LLVM 19)"
                .to_string(),
        )
    } else {
        None
    };
    let runtime = (!runtimes.is_empty()).then(|| {
        let list: Vec<String> = runtimes
            .iter()
            .map(|r| format!("{} ({})", r.soname, r.dir.display()))
            .collect();
        format!("OpenMP offload runtime {}", list.join(", "))
    });
    BackendStatus {
        backend: BackendKind::Host.as_str(),
        available: reason.is_none(),
        runtime,
        reason,
        devices: vec![Device {
            index: 0,
            uuid: host_uuid(&model),
            name: model,
            target: std::env::consts::ARCH.to_string(),
            compute_capability: None,
            memory_bytes: host_memory(),
            cores: Some(cores),
        }],
    }
}

/// A GPU backend's status from its listing: the runtime line and devices,
/// or why it is unavailable (`none`: what to say when it lists no device).
fn gpu_status(
    backend: &'static str,
    none: &str,
    listed: Result<(String, Vec<Device>), BackendError>,
) -> BackendStatus {
    match listed {
        Ok((runtime, devices)) => BackendStatus {
            backend,
            available: !devices.is_empty(),
            runtime: Some(runtime),
            reason: devices.is_empty().then(|| none.to_string()),
            devices,
        },
        Err(e) => unavailable(backend, e.to_string()),
    }
}

/// The CPU's `model name` (/proc/cpuinfo), else the architecture.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// `host-` and 32 hex digits of the BLAKE3 hash of /etc/machine-id and
/// the CPU model: the same on every boot of this machine, different on
/// another; None without a machine ID.
pub fn host_uuid(cpu_model: &str) -> Option<String> {
    let id = std::fs::read_to_string("/etc/machine-id").ok()?;
    let id = id.trim();
    if id.is_empty() {
        return None;
    }
    let mut h = blake3::Hasher::new();
    h.update(id.as_bytes())
        .update(b"\0")
        .update(cpu_model.as_bytes());
    let hex = rrstore_format::id::hex(h.finalize().as_bytes());
    Some(format!("host-{}", &hex[..32]))
}

/// `MemTotal` of /proc/meminfo, in bytes.
fn host_memory() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

pub fn cuda() -> BackendStatus {
    let listed = cuda::driver::list().map(|(version, devs)| {
        let devices = devs.into_iter().map(|d| Device {
            index: d.ordinal,
            target: d.target().describe(),
            uuid: d.uuid.clone(),
            compute_capability: Some(format!(
                "{}.{}",
                d.compute_capability.0, d.compute_capability.1
            )),
            memory_bytes: Some(d.memory_bytes),
            cores: None,
            name: d.name,
        });
        (format!("CUDA driver {version}"), devices.collect())
    });
    gpu_status(BackendKind::Cuda.as_str(), "no CUDA device", listed)
}

pub fn hip() -> BackendStatus {
    let listed = hip::list().map(|(version, devs)| {
        let devices = devs.into_iter().map(|d| Device {
            index: d.ordinal,
            target: d.gcn_arch_name,
            uuid: d.uuid.clone(),
            compute_capability: None,
            memory_bytes: Some(d.memory_bytes),
            cores: None,
            name: d.name,
        });
        (format!("HIP runtime {version}"), devices.collect())
    });
    gpu_status(BackendKind::Hip.as_str(), "no AMD GPU", listed)
}

/// Every backend of [`KINDS`](super::kind::KINDS), host first. Never
/// fails: a missing driver is a status.
pub fn all() -> Vec<BackendStatus> {
    super::kind::KINDS.iter().map(|k| (k.devices)()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_is_listed_with_cores_and_gpus_report_a_reason_when_absent() {
        let all = all();
        assert_eq!(
            all.iter().map(|b| b.backend).collect::<Vec<_>>(),
            ["host", "cuda", "hip"]
        );
        assert!(all[0].devices[0].cores.unwrap() >= 1);
        for b in &all[1..] {
            assert_eq!(b.available, b.reason.is_none(), "{b:?}");
        }
        let json = serde_json::to_value(&all).unwrap();
        assert_eq!(json[0]["backend"], "host");
    }
}
