//! The device state LLVM's offload plugins set up when they load an image,
//! recreated by the GPU backends before the recorded globals and the launch.
//!
//! When `GenericDeviceTy::loadBinary` loads an image it writes the device
//! environment global `__omp_rtl_device_environment` (what
//! `omp_get_device_num`, `omp_get_num_devices`, `omp_get_wtime` and the
//! device runtime's debug checks read), sets up the device memory pool, starts
//! the host RPC server when the image has an RPC client, then runs the
//! image's constructors. The backends follow that order from the image's own
//! symbols (looked up through the driver, so PTX and fatbins work too):
//! environment, refusal of images whose code uses the RPC client, constructors (AMDGPU), then the
//! engine's recorded globals and the launch.
//!
//! The environment's layout depends on the LLVM version that built the
//! device runtime; the fields were only ever appended, so the symbol's size
//! says which of them the image has ([`EnvLayout`]).

use crate::backend::BackendError;

/// The device environment global of LLVM's OpenMP device runtime.
pub const DEVICE_ENV_SYMBOL: &str = "__omp_rtl_device_environment";

/// LLVM's RPC client symbols: `__llvm_rpc_client` (LLVM 19 and later; since
/// LLVM 20 defined in every image and removed only when unused at -O1 and
/// above) and `__llvm_libc_rpc_client` (LLVM 17-18). LLVM's plugin starts
/// its RPC server whenever one is in the image; rrstore refuses only an
/// image whose code uses it ([`super::rpc_client`]).
pub const RPC_CLIENT_SYMBOLS: [&str; 2] = ["__llvm_rpc_client", "__llvm_libc_rpc_client"];

/// The AMDGPU kernel that runs an image's `.init_array` (global constructors).
pub const AMDGPU_INIT_KERNEL: &str = "amdgcn.device.init";

/// Which fields of `DeviceEnvironmentTy` an image's device runtime has, by
/// the size of its `__omp_rtl_device_environment` symbol. Every layout
/// starts with `u32 DeviceDebugKind, NumDevices, DeviceNum, DynamicMemSize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnvLayout {
    /// 16 bytes: the four `u32`s only (older device runtimes).
    Base,
    /// 24 bytes: `+ u64 ClockFrequency`.
    Clock,
    /// 40 bytes: `+ u64 IndirectCallTable, IndirectCallTableSize`.
    IndirectCalls,
    /// 48 bytes: `+ u64 HardwareParallelism` (LLVM 19's AMDGPU device
    /// runtime has it, as does today's `Shared/Environment.h`).
    HardwareParallelism,
}

impl EnvLayout {
    /// The layout of a symbol of `size` bytes, or `None` for a size no
    /// LLVM version used.
    pub fn from_size(size: u64) -> Option<Self> {
        match size {
            16 => Some(EnvLayout::Base),
            24 => Some(EnvLayout::Clock),
            40 => Some(EnvLayout::IndirectCalls),
            48 => Some(EnvLayout::HardwareParallelism),
            _ => None,
        }
    }

    pub fn size(self) -> usize {
        match self {
            EnvLayout::Base => 16,
            EnvLayout::Clock => 24,
            EnvLayout::IndirectCalls => 40,
            EnvLayout::HardwareParallelism => 48,
        }
    }
}

/// The values LLVM's plugin writes, for this device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DeviceEnv {
    /// `LIBOMPTARGET_DEVICE_RTL_DEBUG` (0 unless set).
    pub debug_kind: u32,
    /// Devices of this backend on the machine (`omp_get_num_devices`).
    pub num_devices: u32,
    /// The device replayed on (`omp_get_device_num`).
    pub device_num: u32,
    /// `LIBOMPTARGET_SHARED_MEMORY_SIZE` (0 unless set).
    pub dynamic_mem_size: u32,
    /// Ticks per second of the clock `omp_get_wtime` reads: 1 GHz on NVIDIA
    /// (the nanosecond global timer), the constant-rate counter on AMD.
    pub clock_frequency: u64,
    /// Warps (wavefronts) resident on the whole device at once.
    pub hardware_parallelism: u64,
}

impl DeviceEnv {
    /// The bytes of the global in `layout`, little-endian as on every GPU.
    /// The indirect-call table stays empty: it maps the recording process's
    /// host function addresses, which a recording does not hold.
    pub fn encode(&self, layout: EnvLayout) -> Vec<u8> {
        let mut b = Vec::with_capacity(layout.size());
        for v in [
            self.debug_kind,
            self.num_devices,
            self.device_num,
            self.dynamic_mem_size,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let wide = [self.clock_frequency, 0, 0, self.hardware_parallelism];
        for v in wide.iter().take((layout.size() - 16) / 8) {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// The two values LLVM takes from its own environment variables, read
    /// the same way (decimal; unset or unparsable = 0).
    pub fn with_llvm_variables(mut self) -> Self {
        let var = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u32>().ok())
                .unwrap_or(0)
        };
        self.debug_kind = var("LIBOMPTARGET_DEVICE_RTL_DEBUG");
        self.dynamic_mem_size = var("LIBOMPTARGET_SHARED_MEMORY_SIZE");
        self
    }
}

/// The environment bytes for a `__omp_rtl_device_environment` of `size`
/// bytes, or an error naming the size when no known layout has it.
pub fn encode_for_symbol(env: &DeviceEnv, size: u64) -> Result<Vec<u8>, BackendError> {
    EnvLayout::from_size(size)
        .map(|l| env.encode(l))
        .ok_or_else(|| {
            BackendError::Image(format!(
                "its {DEVICE_ENV_SYMBOL} has {size} bytes, a layout no known LLVM version \
                 used (16, 24, 40 or 48 bytes); the device runtime cannot be set up for it"
            ))
        })
}

/// The refusal for an image whose code uses LLVM's RPC client (`symbol`;
/// `evidence` says how it was found, or why its use could not be ruled
/// out): such a kernel calls the host and would wait forever for a server.
pub fn refuse_rpc(symbol: &str, evidence: &str) -> BackendError {
    BackendError::Unavailable(format!(
        "the image calls the host through LLVM's RPC ({symbol}: {evidence}); it needs the RPC \
         server LLVM's offload plugin runs beside the kernel (device printf, fprintf, assert, \
         or libc functions on the GPU), which rrstore's GPU backends do not serve, so the kernel \
         would hang waiting for an answer and is not launched. Rebuild the program without \
         device printf/assert/libc calls to record it, or replay it with LLVM's own replay tool"
    ))
}

/// Ticks per second of AMD's constant-rate counter from
/// `hipDeviceAttributeWallClockRate` (kHz): values outside 1 MHz..10 GHz are
/// not a clock rate and give 100 MHz, the rate of every gfx9 to gfx12 GPU.
pub fn amd_clock_frequency(wall_clock_khz: Option<i32>) -> u64 {
    match wall_clock_khz {
        Some(k) if (1_000..=10_000_000).contains(&k) => k as u64 * 1000,
        _ => 100_000_000,
    }
}

/// `multiprocessors * (max threads per multiprocessor / warp size)`, as
/// LLVM's plugins compute it; 0 when an attribute is unknown.
pub fn hardware_parallelism(multiprocessors: i32, threads_per_mp: i32, warp: i32) -> u64 {
    if multiprocessors <= 0 || threads_per_mp <= 0 || warp <= 0 {
        return 0;
    }
    multiprocessors as u64 * (threads_per_mp / warp) as u64
}

/// The size of the defined symbol `name` in an ELF64 little-endian image
/// (cubin, AMDGPU code object), from `.symtab` or `.dynsym`; `None` when the
/// image is not such an ELF or has no such symbol.
pub fn elf_symbol_size(image: &[u8], name: &str) -> Option<u64> {
    let mut size = None;
    for_each_defined_symbol(image, |n, s| {
        if size.is_none() && n == name.as_bytes() {
            size = Some(s);
        }
    })?;
    size
}

/// Call `f(name, size)` for every defined symbol of an ELF64
/// little-endian image (`.symtab` and `.dynsym`); `None` when the image is
/// not such an ELF or its tables are out of bounds. Bounds-checked: the
/// image is user input.
pub fn for_each_defined_symbol(image: &[u8], mut f: impl FnMut(&[u8], u64)) -> Option<()> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(image.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(image.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(image.get(o..o + 8)?.try_into().ok()?));
    if image.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let shoff = usize::try_from(u64_at(0x28)?).ok()?;
    let shentsize = usize::from(u16_at(0x3a)?);
    let shnum = usize::from(u16_at(0x3c)?);
    if shentsize < 64 {
        return None;
    }
    let section = |i: usize| -> Option<(u32, usize, usize, u32, usize)> {
        let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
        Some((
            u32_at(h + 4)?,
            usize::try_from(u64_at(h + 0x18)?).ok()?,
            usize::try_from(u64_at(h + 0x20)?).ok()?,
            u32_at(h + 0x28)?,
            usize::try_from(u64_at(h + 0x38)?).ok()?,
        ))
    };
    for i in 0..shnum {
        let (kind, off, size, link, entsize) = section(i)?;
        // SHT_SYMTAB, SHT_DYNSYM
        if kind != 2 && kind != 11 {
            continue;
        }
        let (_, stroff, strsize, _, _) = section(usize::try_from(link).ok()?)?;
        let strtab = image.get(stroff..stroff.checked_add(strsize)?)?;
        let entsize = entsize.max(24);
        for s in 0..size / entsize {
            let e = off.checked_add(s * entsize)?;
            let name_off = usize::try_from(u32_at(e)?).ok()?;
            let sym = strtab.get(name_off..)?;
            let end = sym.iter().position(|&c| c == 0)?;
            if u16_at(e + 6)? != 0 {
                f(&sym[..end], u64_at(e + 16)?);
            }
        }
    }
    Some(())
}

/// The kernel the NVPTX backend emits to run an image's constructors, which
/// reads the table LLVM's CUDA plugin builds between `__init_array_start`
/// and `__init_array_end` (nvlink has no `.init_array`).
pub const NVPTX_INIT_KERNEL: &str = "nvptx$device$init";
pub const NVPTX_INIT_START: &str = "__init_array_start";
pub const NVPTX_INIT_END: &str = "__init_array_end";
const NVPTX_CTOR_PREFIX: &str = "__init_array_object_";

/// The constructor-pointer globals of a cubin (`__init_array_object_<name>_<priority>`),
/// in the order LLVM's CUDA plugin calls them: by priority, ties in symbol
/// table order. An image that is not an ELF, or a priority that is not a
/// number, is an error naming it.
pub fn nvptx_constructors(image: &[u8]) -> Result<Vec<String>, BackendError> {
    let mut names = Vec::new();
    for_each_defined_symbol(image, |n, _| {
        if n.starts_with(NVPTX_CTOR_PREFIX.as_bytes()) {
            names.push(String::from_utf8_lossy(n).into_owned());
        }
    })
    .ok_or_else(|| {
        BackendError::Image(format!(
            "it has constructors ({NVPTX_INIT_KERNEL}) but is not an ELF cubin whose symbol \
             table lists them; rebuild it as a cubin"
        ))
    })?;
    constructor_order(names)
}

/// `names` sorted by the priority after their last `_` (stable).
pub fn constructor_order(names: Vec<String>) -> Result<Vec<String>, BackendError> {
    let mut keyed = names
        .into_iter()
        .map(
            |n| match n.rsplit_once('_').map(|(_, p)| p.parse::<u16>()) {
                Some(Ok(p)) => Ok((p, n)),
                _ => Err(BackendError::Image(format!(
                    "constructor symbol `{n}` has no numeric priority after its last `_`"
                ))),
            },
        )
        .collect::<Result<Vec<_>, _>>()?;
    keyed.sort_by_key(|(p, _)| *p);
    Ok(keyed.into_iter().map(|(_, n)| n).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The symbol table of LLVM 19's AMDGPU device runtime for gfx90a
    /// (Debian's libomptarget-amdgpu-gfx90a.bc compiled with clang-19 to a
    /// relocatable object; every section but the symbol and string tables
    /// emptied to keep it small: `tests/gpu/shrink-elf.py`).
    const LLVM19_GFX90A: &[u8] =
        include_bytes!("../../../../tests/fixtures/gpu/llvm19-devicertl-gfx90a.o");

    #[test]
    fn the_layout_of_a_real_device_runtime_is_read_from_its_symbol_table() {
        let size = elf_symbol_size(LLVM19_GFX90A, DEVICE_ENV_SYMBOL).unwrap();
        assert_eq!(size, 48);
        assert_eq!(
            EnvLayout::from_size(size),
            Some(EnvLayout::HardwareParallelism)
        );
        assert_eq!(
            elf_symbol_size(LLVM19_GFX90A, "__omp_rtl_device_memory_pool"),
            Some(16)
        );
        // The device runtime alone calls no host RPC: only an undefined
        // reference to rpc_fprintf, no client symbol.
        for s in RPC_CLIENT_SYMBOLS {
            assert_eq!(elf_symbol_size(LLVM19_GFX90A, s), None);
        }
        assert_eq!(elf_symbol_size(LLVM19_GFX90A, "rpc_fprintf"), None);
        assert_eq!(elf_symbol_size(b"\x7fELF\x02\x01garbage", "x"), None);
        assert_eq!(
            elf_symbol_size(&LLVM19_GFX90A[..200], DEVICE_ENV_SYMBOL),
            None
        );
    }

    #[test]
    fn each_layout_is_encoded_with_its_fields_in_order() {
        let env = DeviceEnv {
            debug_kind: 1,
            num_devices: 8,
            device_num: 3,
            dynamic_mem_size: 4096,
            clock_frequency: 1_000_000_000,
            hardware_parallelism: 132 * 64,
        };
        let full = env.encode(EnvLayout::HardwareParallelism);
        assert_eq!(full.len(), 48);
        let u32s: Vec<u32> = full[..16]
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(u32s, [1, 8, 3, 4096]);
        let u64s: Vec<u64> = full[16..]
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(u64s, [1_000_000_000, 0, 0, 8448]);
        for (layout, len) in [
            (EnvLayout::Base, 16),
            (EnvLayout::Clock, 24),
            (EnvLayout::IndirectCalls, 40),
        ] {
            let b = env.encode(layout);
            assert_eq!(b.len(), len);
            assert_eq!(b[..], full[..len], "a prefix of the newest layout");
            assert_eq!(encode_for_symbol(&env, len as u64).unwrap(), b);
        }
        let e = encode_for_symbol(&env, 32).unwrap_err().to_string();
        assert!(
            e.contains("32 bytes") && e.contains(DEVICE_ENV_SYMBOL),
            "{e}"
        );
    }

    #[test]
    fn clock_and_parallelism_never_leave_a_zero_divisor() {
        assert_eq!(amd_clock_frequency(Some(100_000)), 100_000_000);
        assert_eq!(amd_clock_frequency(Some(25_000)), 25_000_000);
        assert_eq!(amd_clock_frequency(Some(0)), 100_000_000);
        assert_eq!(amd_clock_frequency(Some(1)), 100_000_000);
        assert_eq!(amd_clock_frequency(None), 100_000_000);
        assert_eq!(hardware_parallelism(132, 2048, 32), 8448);
        assert_eq!(hardware_parallelism(304, 2048, 64), 9728);
        assert_eq!(hardware_parallelism(0, 2048, 64), 0);
    }

    #[test]
    fn constructors_run_in_priority_order() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            constructor_order(names(&[
                "__init_array_object_b_65535",
                "__init_array_object_a_101",
                "__init_array_object_c_65535",
                "__init_array_object_d_0",
            ]))
            .unwrap(),
            names(&[
                "__init_array_object_d_0",
                "__init_array_object_a_101",
                "__init_array_object_b_65535",
                "__init_array_object_c_65535",
            ])
        );
        let e = constructor_order(names(&["__init_array_object_x_high"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("__init_array_object_x_high"), "{e}");
        // The real device runtime has none; a non-ELF image is an error.
        assert!(nvptx_constructors(LLVM19_GFX90A).unwrap().is_empty());
        assert!(nvptx_constructors(b"//\n// Generated by LLVM NVPTX Back-End\n").is_err());
    }

    #[test]
    fn rpc_images_are_refused_with_a_sentence() {
        let e = refuse_rpc(
            "__llvm_rpc_client",
            ".rela.text relocates a reference to it",
        );
        assert!(matches!(e, BackendError::Unavailable(_)));
        let m = e.to_string();
        assert!(
            m.contains("__llvm_rpc_client") && m.contains("not launched"),
            "{m}"
        );
    }
}
