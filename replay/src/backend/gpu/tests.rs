//! The generic GPU sequence over a fake device API that keeps device memory
//! in host memory and records every call, so the order of the steps, the
//! shared-memory opt-in, the reservation fallbacks, the staging overlap and
//! the teardown are checked without a GPU.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::rc::Rc;
use std::time::Duration;

use rrstore_tests::elf::{EM_AMDGPU, EM_CUDA};
use rrstore_tests::{elf_header, elf_with_symbols};

use super::heap::{
    encode_pool, initial_tracker, DeviceHeap, DEFAULT_POOL_SIZE, POOL_SYMBOL, TRACKER_SYMBOL,
};
use super::{ApiResult, ArgPtrs, DeviceApi, GpuBackend, LoadFailure, PluginVariables};
use crate::backend::gpu::args::LaunchDims;
use crate::backend::gpu::device_env::{
    encode_for_symbol, DeviceEnv, AMDGPU_INIT_KERNEL, DEVICE_ENV_SYMBOL, NVPTX_INIT_END,
    NVPTX_INIT_KERNEL, NVPTX_INIT_START,
};
use crate::backend::gpu::placeholder::Placeholder;
use crate::backend::gpu::target::DeviceTarget;
use crate::backend::gpu::wait::Poll;
use crate::backend::{Backend, BackendError, LaunchParams, Relocation, Reporting};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const GRANULARITY: u64 = 2 * MIB;
/// Where the fake puts reservations whose hint it does not honour.
const ELSEWHERE: u64 = 0x7f00_0000_0000;

type Log = Rc<RefCell<Vec<String>>>;

/// What the next opened fake device is like.
#[derive(Clone)]
struct Config {
    /// An NVIDIA-like device (sm_90, a 227 KiB shared-memory opt-in);
    /// otherwise AMD-like (gfx90a, no opt-in).
    nvidia: bool,
    functions: Vec<String>,
    /// Globals of the loaded module: name, address, initial bytes.
    globals: Vec<(String, u64, Vec<u8>)>,
    /// Reservations of at least this many bytes land on the hint.
    honours_from: u64,
    static_shared: u32,
    /// The kernel never ends.
    hang: bool,
    /// The kernel faults with this driver error.
    fault: Option<String>,
}

impl Config {
    fn amd() -> Self {
        Config {
            nvidia: false,
            functions: vec!["k".into()],
            globals: Vec::new(),
            honours_from: 0,
            static_shared: 0,
            hang: false,
            fault: None,
        }
    }

    fn nvidia() -> Self {
        Config {
            nvidia: true,
            ..Config::amd()
        }
    }

    fn image(&self) -> Vec<u8> {
        if self.nvidia {
            elf_header(EM_CUDA, 90 << 8, 8)
        } else {
            elf_header(EM_AMDGPU, 0x03f, 2)
        }
    }
}

thread_local! {
    static NEXT: RefCell<Option<(Config, Log)>> = const { RefCell::new(None) };
}

/// A device in host memory. `HOLD` is [`DeviceApi::HOLDS_PLACEHOLDER`].
struct Fake<const HOLD: bool> {
    cfg: Config,
    log: Log,
    /// Device memory: regions by start address.
    mem: RefCell<BTreeMap<u64, Vec<u8>>>,
    pinned: RefCell<Vec<Box<[u8]>>>,
    events: Cell<usize>,
    allocations: Cell<u64>,
}

type HipLike = Fake<true>;
type CudaLike = Fake<false>;

impl<const HOLD: bool> Fake<HOLD> {
    fn note(&self, s: impl Into<String>) {
        self.log.borrow_mut().push(s.into());
    }

    fn with_region<R>(&self, at: u64, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut mem = self.mem.borrow_mut();
        let (start, region) = mem
            .range_mut(..=at)
            .next_back()
            .expect("an address inside device memory");
        let off = (at - start) as usize;
        f(&mut region[off..off + len])
    }

    fn read(&self, at: u64, len: usize) -> Vec<u8> {
        self.with_region(at, len, |r| r.to_vec())
    }
}

/// Open a backend over the fake `D` configured by `cfg`; the log it writes.
fn open<D: DeviceApi>(cfg: &Config, arena: Option<(u64, u64)>) -> (GpuBackend<D>, Log) {
    open_on(0, None, cfg, arena)
}

/// [`open`] on device `device`, with `LIBOMPTARGET_HEAP_SIZE` = `heap`.
fn open_on<D: DeviceApi>(
    device: u32,
    heap: Option<u64>,
    cfg: &Config,
    arena: Option<(u64, u64)>,
) -> (GpuBackend<D>, Log) {
    let vars = PluginVariables {
        heap_size: heap,
        ..PluginVariables::default()
    };
    open_with_vars(device, vars, cfg, arena)
}

fn open_with_vars<D: DeviceApi>(
    device: u32,
    vars: PluginVariables,
    cfg: &Config,
    arena: Option<(u64, u64)>,
) -> (GpuBackend<D>, Log) {
    let log = Log::default();
    NEXT.with(|n| *n.borrow_mut() = Some((cfg.clone(), log.clone())));
    let b = GpuBackend::<D>::open_with(device, arena, vars).expect("the fake opens");
    (b, log)
}

impl<const HOLD: bool> DeviceApi for Fake<HOLD> {
    type Module = u32;
    type Function = usize;
    type Event = usize;
    type Memory = u64;

    const NAME: &'static str = "fake";
    const RUNTIME: &'static str = "the fake driver";
    const HOLDS_PLACEHOLDER: bool = HOLD;
    // HIP-like devices get LLVM's AMDGPU pool, CUDA-like ones a driver limit.
    const HEAP: DeviceHeap = if HOLD {
        DeviceHeap::Pool
    } else {
        DeviceHeap::DriverLimit
    };

    fn open(device: u32) -> ApiResult<Self> {
        let (cfg, log) = NEXT
            .with(|n| n.borrow_mut().take())
            .ok_or_else(|| BackendError::Unavailable("no fake configured".into()))?;
        let fake = Fake {
            cfg,
            log,
            mem: RefCell::default(),
            pinned: RefCell::default(),
            events: Cell::new(0),
            allocations: Cell::new(0x5000_0000),
        };
        fake.note(format!("open {device}"));
        Ok(fake)
    }

    fn description(&self) -> String {
        "a fake GPU".into()
    }

    // NVIDIA-like fakes have a UUID, AMD-like ones none (a runtime that
    // gives none).
    fn uuid(&self) -> Option<String> {
        self.cfg
            .nvidia
            .then(|| "GPU-00112233-4455-6677-8899-aabbccddeeff".into())
    }

    fn target(&self) -> DeviceTarget {
        if self.cfg.nvidia {
            DeviceTarget::Cuda { major: 9, minor: 0 }
        } else {
            DeviceTarget::from_gcn_arch_name("gfx90a")
        }
    }

    fn make_current(&self) -> ApiResult<()> {
        Ok(())
    }

    fn device_env(&self) -> ApiResult<DeviceEnv> {
        Ok(DeviceEnv {
            num_devices: 3,
            // Deliberately not the ordinal opened: the backend sets it.
            device_num: 0,
            clock_frequency: 100_000_000,
            hardware_parallelism: 1728,
            ..DeviceEnv::default()
        })
    }

    fn set_heap_limit(&self, bytes: u64) -> ApiResult<()> {
        self.note(format!("heap_limit {bytes}"));
        Ok(())
    }

    fn set_stack_limit(&self, bytes: u64) -> ApiResult<()> {
        self.note(format!("stack_limit {bytes}"));
        Ok(())
    }

    fn granularity(&self) -> ApiResult<u64> {
        Ok(GRANULARITY)
    }

    fn reserve_va(&self, len: u64, hint: u64) -> Result<u64, String> {
        // Whether this process still holds the range (a placeholder) when
        // the driver is asked for it.
        let free = Placeholder::new(hint, 4096).is_ok();
        self.note(format!("reserve_va {len:#x} free={free}"));
        Ok(if len >= self.cfg.honours_from {
            hint
        } else {
            ELSEWHERE
        })
    }

    unsafe fn free_va(&self, at: u64, len: u64) {
        self.note(format!("free_va {at:#x} {len:#x}"));
    }

    fn create_memory(&self, len: u64) -> ApiResult<u64> {
        self.note("create_memory");
        Ok(len)
    }

    fn map_memory(&self, start: u64, len: u64, mem: &u64) -> ApiResult<()> {
        assert_eq!(len, *mem);
        self.note(format!("map {start:#x} {len:#x}"));
        self.mem.borrow_mut().insert(start, vec![0; len as usize]);
        Ok(())
    }

    unsafe fn unmap_memory(&self, start: u64, _len: u64) {
        self.note(format!("unmap {start:#x}"));
    }

    unsafe fn release_memory(&self, _mem: u64) {
        self.note("release_memory");
    }

    fn alloc_device(&self, len: usize) -> ApiResult<u64> {
        let at = self.allocations.get();
        self.allocations.set(at + 0x1000);
        self.mem.borrow_mut().insert(at, vec![0; len]);
        self.note(format!("alloc_device {at:#x} {len}"));
        Ok(at)
    }

    unsafe fn free_device(&self, ptr: u64) {
        self.note(format!("free_device {ptr:#x}"));
    }

    fn alloc_pinned(&self, len: usize) -> ApiResult<*mut u8> {
        let mut b = vec![0u8; len].into_boxed_slice();
        let p = b.as_mut_ptr();
        self.pinned.borrow_mut().push(b);
        Ok(p)
    }

    unsafe fn free_pinned(&self, _ptr: *mut u8) {
        self.note("free_pinned");
    }

    fn create_event(&self, _timing: bool) -> ApiResult<usize> {
        self.events.set(self.events.get() + 1);
        Ok(self.events.get())
    }

    unsafe fn destroy_event(&self, ev: usize) {
        self.note(format!("destroy_event {ev}"));
    }

    unsafe fn copy_htod_async(&self, dst: u64, src: *const u8, len: usize) -> ApiResult<()> {
        // SAFETY: the staging hands over `len` bytes at `src`.
        let bytes = unsafe { std::slice::from_raw_parts(src, len) };
        self.with_region(dst, len, |r| r.copy_from_slice(bytes));
        self.note(format!("htod {dst:#x} {len}"));
        Ok(())
    }

    fn copy_dtoh(&self, dst: &mut [u8], src: u64) -> ApiResult<()> {
        self.with_region(src, dst.len(), |r| dst.copy_from_slice(r));
        self.note(format!("dtoh {src:#x} {}", dst.len()));
        Ok(())
    }

    unsafe fn record_event(&self, ev: usize) -> ApiResult<()> {
        self.note(format!("record {ev}"));
        Ok(())
    }

    unsafe fn wait_event(&self, ev: usize) -> ApiResult<()> {
        self.note(format!("wait {ev}"));
        Ok(())
    }

    fn query_event(&self, _ev: usize) -> Poll<Result<(), String>> {
        match (&self.cfg.fault, self.cfg.hang) {
            (_, true) => Poll::Pending,
            (Some(f), _) => Poll::Done(Err(f.clone())),
            (None, false) => Poll::Done(Ok(())),
        }
    }

    fn elapsed_ms(&self, _start: usize, _stop: usize) -> ApiResult<f32> {
        Ok(1.5)
    }

    fn sync(&self) -> Result<(), String> {
        self.note("sync");
        Ok(())
    }

    fn load_module(&self, image: &[u8]) -> Result<u32, LoadFailure> {
        self.note("load_module");
        if image.len() < 64 {
            return Err(LoadFailure::Failed("not an image".into()));
        }
        let mut mem = self.mem.borrow_mut();
        for (_, at, bytes) in &self.cfg.globals {
            mem.insert(*at, bytes.clone());
        }
        Ok(1)
    }

    unsafe fn unload_module(&self, _m: u32) {
        self.note("unload_module");
    }

    fn function(&self, _m: u32, name: &CStr) -> ApiResult<Option<usize>> {
        let name = name.to_str().unwrap_or_default();
        Ok(self.cfg.functions.iter().position(|f| f == name))
    }

    fn global(&self, _m: u32, name: &CStr) -> ApiResult<Option<(u64, usize)>> {
        let name = name.to_str().unwrap_or_default();
        Ok(self
            .cfg
            .globals
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, at, b)| (*at, b.len())))
    }

    fn static_shared(&self, _f: usize) -> ApiResult<u32> {
        Ok(self.cfg.static_shared)
    }

    fn shared_opt_in_limit(&self) -> ApiResult<Option<u32>> {
        Ok(self.cfg.nvidia.then_some(227 * 1024))
    }

    fn set_max_dynamic_shared(&self, f: usize, bytes: u32) -> ApiResult<()> {
        self.note(format!("opt_in {} {bytes}", self.cfg.functions[f]));
        Ok(())
    }

    unsafe fn launch(&self, f: usize, d: LaunchDims, args: ArgPtrs) -> ApiResult<()> {
        let LaunchDims {
            grid,
            block,
            shared_memory: shared,
        } = d;
        let args = if args.is_null() { "no args" } else { "args" };
        self.note(format!(
            "launch {} {grid}x{block} {shared} {args}",
            self.cfg.functions[f]
        ));
        Ok(())
    }
}

impl<const HOLD: bool> Drop for Fake<HOLD> {
    fn drop(&mut self) {
        self.note("close");
    }
}

fn params(shared: u64) -> LaunchParams {
    LaunchParams {
        num_teams: 4,
        num_threads: 128,
        shared_memory: shared,
        loop_trip_count: 0,
        timeout: None,
    }
}

/// Index of the first log line starting with `prefix`.
fn at(log: &Log, prefix: &str) -> usize {
    log.borrow()
        .iter()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` in {:#?}", log.borrow()))
}

fn count(log: &Log, prefix: &str) -> usize {
    log.borrow()
        .iter()
        .filter(|l| l.starts_with(prefix))
        .count()
}

#[test]
fn load_environment_constructors_globals_then_launch_in_that_order() {
    let base = 0x7e10_0000_0000;
    let mut cfg = Config::amd();
    cfg.functions.push(AMDGPU_INIT_KERNEL.into());
    cfg.globals = vec![
        (DEVICE_ENV_SYMBOL.into(), 0x1000, vec![0; 48]),
        ("g".into(), 0x2000, vec![0; 8]),
    ];
    let (mut b, log) = open::<HipLike>(&cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    b.upload(0, &[3; 4096]).unwrap();
    b.load_image(&cfg.image(), "k").unwrap();
    b.write_global("g", &[7; 8]).unwrap();
    let t = b.launch(&[base], &params(0)).unwrap();
    assert_eq!(t, Duration::from_micros(1500));
    let steps = [
        "load_module",
        "htod 0x1000 48",
        "launch amdgcn.device.init 1x1 0 no args",
        "htod 0x2000 8",
        "launch k 4x128 0 args",
    ];
    let order: Vec<usize> = steps.iter().map(|s| at(&log, s)).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{:#?}", log.borrow());
    // The constructors are waited for before anything else is queued.
    assert_eq!(log.borrow()[order[2] + 1], "sync");
    // The environment as LLVM lays out a 48-byte one, for this device.
    let env = b.device().device_env().unwrap().with_llvm_variables();
    assert_eq!(
        b.device().read(0x1000, 48),
        encode_for_symbol(&env, 48).unwrap()
    );
    assert_eq!(b.device().read(0x2000, 8), [7; 8]);
    let mut out = vec![0; 4096];
    b.download(0, &mut out).unwrap();
    assert_eq!(out, [3; 4096]);
    assert_eq!(b.name(), "fake");
}

#[test]
fn nvptx_constructors_get_their_table_in_priority_order() {
    let mut cfg = Config::nvidia();
    cfg.functions.push(NVPTX_INIT_KERNEL.into());
    let (ctor_a, ctor_b) = (0xaaaa_0000u64, 0xbbbb_0000u64);
    cfg.globals = vec![
        (
            "__init_array_object_b_200".into(),
            0x1000,
            ctor_b.to_le_bytes().to_vec(),
        ),
        (
            "__init_array_object_a_101".into(),
            0x1100,
            ctor_a.to_le_bytes().to_vec(),
        ),
        (NVPTX_INIT_START.into(), 0x1200, vec![0; 8]),
        (NVPTX_INIT_END.into(), 0x1300, vec![0; 8]),
    ];
    let image = elf_with_symbols(
        EM_CUDA,
        90 << 8,
        8,
        &[
            ("__init_array_object_b_200", 8),
            ("__init_array_object_a_101", 8),
        ],
    );
    let base = 0x7e20_0000_0000;
    let (mut b, log) = open::<CudaLike>(&cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    b.load_image(&image, "k").unwrap();
    let table = 0x5000_0000u64;
    let want: Vec<u8> = [ctor_a, ctor_b]
        .iter()
        .flat_map(|p| p.to_le_bytes())
        .collect();
    assert_eq!(b.device().read(table, 16), want, "priority 101 before 200");
    assert_eq!(b.device().read(0x1200, 8), table.to_le_bytes());
    assert_eq!(b.device().read(0x1300, 8), (table + 16).to_le_bytes());
    let launch = at(&log, "launch nvptx$device$init 1x1 0 no args");
    assert!(at(&log, "htod 0x50000000 16") < launch);
    assert!(launch < at(&log, "free_device 0x50000000"));
}

#[test]
fn the_opt_in_counts_static_shared_memory_and_is_set_once() {
    let mut cfg = Config::nvidia();
    cfg.static_shared = 1024;
    let base = 0x7e30_0000_0000;
    let (mut b, log) = open::<CudaLike>(&cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    b.load_image(&cfg.image(), "k").unwrap();
    // Fits next to the static memory in 48 KiB: no opt-in.
    b.launch(&[], &params(4096)).unwrap();
    assert_eq!(count(&log, "opt_in"), 0);
    // Under 48 KiB dynamic, over it with the static memory: opt in, before
    // the launch, once.
    b.launch(&[], &params(48 * 1024 - 512)).unwrap();
    b.launch(&[], &params(48 * 1024 - 512)).unwrap();
    assert_eq!(count(&log, "opt_in k 48640"), 1);
    assert!(at(&log, "opt_in") < at(&log, "launch k 4x128 48640"));
    // More than the device has: refused before launching.
    let e = b.launch(&[], &params(227 * 1024)).unwrap_err().to_string();
    assert!(e.contains("1024 static"), "{e}");
    assert_eq!(count(&log, "launch k 4x128 232448"), 0);

    // A device without an opt-in (AMD) never asks.
    let mut amd = Config::amd();
    amd.static_shared = 1024;
    let base = 0x7e31_0000_0000;
    let (mut b, log) = open::<HipLike>(&amd, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    b.load_image(&amd.image(), "k").unwrap();
    b.launch(&[], &params(64 * 1024)).unwrap();
    assert_eq!(count(&log, "opt_in"), 0);
}

#[test]
fn reservations_ask_for_the_recorded_size_first_then_fall_back() {
    // The driver honours the hint from 64 MiB only: 8 MiB lands elsewhere
    // and is handed back, 64 MiB lands.
    let mut cfg = Config::nvidia();
    cfg.honours_from = 64 * MIB;
    let base = 0x7e40_0000_0000;
    let (mut b, log) = open::<CudaLike>(&cfg, Some((base, 8 * MIB)));
    b.reserve(base, 8 * MIB).unwrap();
    let tried: Vec<String> = log
        .borrow()
        .iter()
        .filter(|l| l.starts_with("reserve_va") || l.starts_with("free_va"))
        .cloned()
        .collect();
    assert_eq!(
        tried,
        [
            "reserve_va 0x800000 free=true",
            "free_va 0x7f0000000000 0x800000",
            "reserve_va 0x4000000 free=true"
        ]
    );
    assert!(
        at(&log, "map 0x7e4000000000 0x800000") > 2,
        "only the arena is backed"
    );
    drop(b);
    assert_eq!(count(&log, "free_va 0x7e4000000000 0x4000000"), 1);

    // With the recorder's 4 GiB: that request first, and it lands.
    let base = 0x7e50_0000_0000;
    let (b, log) = open::<CudaLike>(&cfg, Some((base, 8 * MIB)));
    let mut b = b.with_recorded_reservation(Some(4 * GIB));
    b.reserve(base, 8 * MIB).unwrap();
    assert_eq!(count(&log, "reserve_va"), 1);
    assert_eq!(at(&log, "reserve_va 0x100000000"), 1);

    // Nothing lands: every attempt named, nothing left reserved.
    cfg.honours_from = u64::MAX;
    let base = 0x7e60_0000_0000;
    let (mut b, log) = open::<CudaLike>(&cfg, Some((base, 8 * MIB)));
    let e = b.reserve(base, 8 * MIB).unwrap_err();
    assert!(matches!(e, BackendError::Reserve { .. }), "{e}");
    let e = e.to_string();
    assert!(e.contains("the fake driver did not reserve"), "{e}");
    assert!(e.contains("0x40000000 bytes at 0x7f0000000000"), "{e}");
    assert_eq!(count(&log, "reserve_va"), count(&log, "free_va"));
}

#[test]
fn a_relocating_replay_keeps_the_reservation_the_driver_placed_elsewhere() {
    // The driver ignores the hint for every length: with `allow_elsewhere`
    // (placement auto/relocate) the arena goes where the first reservation
    // landed, at the recorded offset within the granularity, and uploads
    // go there.
    let mut cfg = Config::nvidia();
    cfg.honours_from = u64::MAX;
    let base = 0x7e80_0000_0010;
    let (mut b, log) = open::<CudaLike>(&cfg, Some((base, 8 * MIB)));
    b.allow_elsewhere(true);
    b.reserve(base, 8 * MIB).unwrap();
    assert_eq!(b.placed_elsewhere(), Some(ELSEWHERE + 0x10));
    // 8 MiB at offset 0x10 span five 2 MiB granules.
    assert!(at(&log, "map 0x7f0000000000 0xa00000") > 0);
    b.upload(0, &[7; 16]).unwrap();
    b.download(0, &mut [0; 16]).unwrap();
    assert!(
        count(&log, "htod 0x7f0000000010 16") == 1,
        "{:?}",
        log.borrow()
    );
    drop(b);
    // One reservation kept, freed once at teardown; the others at once.
    assert_eq!(count(&log, "reserve_va"), count(&log, "free_va"));
    assert_eq!(count(&log, "free_va 0x7f0000000000 0xa00000"), 1);

    // Without it (placement recorded), the same driver is an error.
    let (mut b, _log) = open::<CudaLike>(&cfg, Some((base, 8 * MIB)));
    assert!(matches!(
        b.reserve(base, 8 * MIB),
        Err(BackendError::Reserve { .. })
    ));
    assert_eq!(b.placed_elsewhere(), None);
}

#[test]
fn a_held_range_is_released_right_before_the_reservation() {
    let base = 0x7e70_0000_0000;
    let (mut b, log) = open::<HipLike>(&Config::amd(), Some((base, 4096)));
    assert!(Placeholder::new(base, 4096).is_err(), "held after open");
    b.reserve(base, 4096).unwrap();
    assert_eq!(at(&log, "reserve_va 0x200000 free=true"), 1);

    // CUDA-like: only checked to be free, not held.
    let base = 0x7e71_0000_0000;
    let (_b, _log) = open::<CudaLike>(&Config::nvidia(), Some((base, 4096)));
    assert!(Placeholder::new(base, 4096).is_ok(), "not held");
}

#[test]
fn staging_fills_the_next_buffer_while_the_last_one_is_copied() {
    let base = 0x7e80_0000_0000;
    let size = 8 * MIB;
    let (mut b, log) = open::<CudaLike>(&Config::nvidia(), Some((base, size)));
    b.reserve(base, size).unwrap();
    let input: Vec<u8> = (0..size as usize).map(|i| (i % 251) as u8).collect();
    let mut off = 0;
    while off < input.len() {
        let w = b.staging_window(MIB as usize).unwrap().expect("a window");
        let n = w.len();
        w.copy_from_slice(&input[off..off + n]);
        b.commit_staging(off as u64, n).unwrap();
        off += n;
    }
    // Three buffers: the first wait (for buffer 0, so window 4 can reuse
    // it) comes after three copies were queued; each buffer is refilled
    // only once its own copy is done.
    let lines = log.borrow().clone();
    let copies: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with("htod"))
        .collect();
    assert_eq!(copies.len(), 8);
    let first_wait = at(&log, "wait");
    assert!(
        copies[2] < first_wait && first_wait < copies[3],
        "{lines:#?}"
    );
    assert_eq!(count(&log, "wait"), 6, "one per piece after the third");
    assert!(
        at(&log, "sync") > copies[7],
        "the last piece completes the input"
    );
    assert_eq!(b.upload_stats().bytes, size);
    let mut out = vec![0; size as usize];
    b.download(0, &mut out).unwrap();
    assert!(out == input);
}

#[test]
fn images_that_need_host_rpc_are_refused_before_anything_runs() {
    let mut cfg = Config::amd();
    cfg.functions.push(AMDGPU_INIT_KERNEL.into());
    cfg.globals = vec![("__llvm_rpc_client".into(), 0x1000, vec![0; 8])];
    let base = 0x7e90_0000_0000;
    let (mut b, log) = open::<HipLike>(&cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    let e = b.load_image(&cfg.image(), "k").unwrap_err().to_string();
    assert!(
        e.contains("__llvm_rpc_client") && e.contains("not launched"),
        "{e}"
    );
    assert_eq!(count(&log, "launch"), 0, "no constructor ran");
}

#[test]
fn wrong_images_kernels_and_globals_are_named() {
    let cfg = Config::amd();
    let base = 0x7ea0_0000_0000;
    let (mut b, _log) = open::<HipLike>(&cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    let e = b.load_image(&Config::nvidia().image(), "k").unwrap_err();
    assert!(matches!(e, BackendError::TargetMismatch { .. }), "{e}");
    let e = b.load_image(&cfg.image(), "absent").unwrap_err();
    assert!(
        matches!(e, BackendError::MissingKernel(ref k) if k == "absent"),
        "{e}"
    );
    b.load_image(&cfg.image(), "k").unwrap();
    let e = b.write_global("nope", &[0; 4]).unwrap_err();
    assert!(matches!(e, BackendError::MissingGlobal { .. }), "{e}");
}

#[test]
fn a_fault_is_a_device_fault_and_a_hang_leaves_the_device_alone() {
    let mut cfg = Config::amd();
    cfg.fault = Some("hipErrorIllegalAddress".into());
    let base = 0x7eb0_0000_0000;
    let (mut b, _log) = open::<HipLike>(&cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    b.load_image(&cfg.image(), "k").unwrap();
    let e = b.launch(&[], &params(0)).unwrap_err();
    assert!(
        matches!(e, BackendError::DeviceFault(ref s) if s.contains("IllegalAddress")),
        "{e}"
    );

    let mut cfg = Config::amd();
    cfg.hang = true;
    let base = 0x7eb1_0000_0000;
    let (mut b, log) = open::<HipLike>(&cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    b.load_image(&cfg.image(), "k").unwrap();
    let mut p = params(0);
    p.timeout = Some(Duration::from_millis(20));
    let e = b.launch(&[], &p).unwrap_err();
    assert!(matches!(e, BackendError::TimedOut(_)), "{e}");
    let after = log.borrow().len();
    drop(b);
    assert_eq!(
        log.borrow().len(),
        after,
        "nothing that would wait: {:#?}",
        log.borrow()
    );
}

#[test]
fn teardown_runs_in_reverse_order_of_creation() {
    let cfg = Config::nvidia();
    let base = 0x7ec0_0000_0000;
    let (mut b, log) = open::<CudaLike>(&cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    b.load_image(&cfg.image(), "k").unwrap();
    b.launch(&[], &params(0)).unwrap();
    let before = log.borrow().len();
    drop(b);
    let tail: Vec<String> = log.borrow()[before..]
        .iter()
        .filter(|l| !l.starts_with("destroy_event") && *l != "free_pinned")
        .cloned()
        .collect();
    assert_eq!(
        tail,
        [
            "sync",
            "sync",
            "unload_module",
            "unmap 0x7ec000000000",
            "release_memory",
            "free_va 0x7ec000000000 0x200000",
            "close"
        ]
    );
    assert_eq!(count(&log, "free_pinned"), 3);
}

#[test]
fn the_environment_names_the_ordinal_opened_and_the_devices_reported() {
    let mut cfg = Config::amd();
    cfg.globals = vec![(DEVICE_ENV_SYMBOL.into(), 0x1000, vec![0; 48])];
    let base = 0x7ed0_0000_0000;
    let (mut b, log) = open_on::<HipLike>(2, None, &cfg, Some((base, 4096)));
    assert_eq!(at(&log, "open 2"), 0);
    b.reserve(base, 4096).unwrap();
    b.load_image(&cfg.image(), "k").unwrap();
    let env = b.device().read(0x1000, 16);
    let u32s: Vec<u32> = env
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    // NumDevices as the device API reports them, DeviceNum the ordinal.
    assert_eq!(u32s[1..3], [3, 2]);
}

/// An AMD-like device whose image has the environment, LLVM's pool and
/// tracker, and constructors.
fn pool_image_config() -> Config {
    let mut cfg = Config::amd();
    cfg.functions.push(AMDGPU_INIT_KERNEL.into());
    cfg.globals = vec![
        (DEVICE_ENV_SYMBOL.into(), 0x1000, vec![0; 48]),
        (POOL_SYMBOL.into(), 0x1100, vec![0xee; 16]),
        (TRACKER_SYMBOL.into(), 0x1200, vec![0xee; 32]),
    ];
    cfg
}

#[test]
fn an_amdgpu_pool_is_allocated_and_written_in_llvms_order_and_freed_before_unload() {
    let cfg = pool_image_config();
    let base = 0x7ee0_0000_0000;
    let (mut b, log) = open_on::<HipLike>(0, Some(64 * 1024), &cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    b.load_image(&cfg.image(), "k").unwrap();
    b.launch(&[], &params(0)).unwrap();
    let pool = 0x5000_0000u64;
    let steps = [
        "htod 0x1000 48",
        "alloc_device 0x50000000 65536",
        "htod 0x1200 32",
        "htod 0x1100 16",
        "launch amdgcn.device.init",
        "launch k",
    ];
    let order: Vec<usize> = steps.iter().map(|s| at(&log, s)).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{:#?}", log.borrow());
    assert_eq!(b.device().read(0x1100, 16), encode_pool(pool, 64 * 1024));
    assert_eq!(b.device().read(0x1200, 32), initial_tracker());
    assert_eq!(count(&log, "heap_limit"), 0, "AMD has no driver limit");
    drop(b);
    let free = at(&log, "free_device 0x50000000");
    assert_eq!(log.borrow()[free - 1], "sync");
    assert!(free < at(&log, "unload_module"), "{:#?}", log.borrow());

    // Unset, the size is LLVM's default of 512 MiB.
    let base = 0x7ee1_0000_0000;
    let (mut b, log) = open_on::<HipLike>(0, None, &cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    b.load_image(&cfg.image(), "k").unwrap();
    assert_eq!(count(&log, "alloc_device 0x50000000 536870912"), 1);
    assert_eq!(
        b.device().read(0x1100, 16),
        encode_pool(pool, DEFAULT_POOL_SIZE)
    );
    // A second image replaces the pool: the first one is freed.
    b.load_image(&cfg.image(), "k").unwrap();
    assert!(at(&log, "free_device 0x50000000") < at(&log, "alloc_device 0x50001000"));
}

#[test]
fn no_pool_without_the_tracker_or_on_cuda_and_a_wrong_layout_is_named() {
    // Without the tracker LLVM writes no pool: nothing allocated.
    let mut cfg = pool_image_config();
    cfg.globals.retain(|(n, _, _)| n != TRACKER_SYMBOL);
    let base = 0x7ef0_0000_0000;
    let (mut b, log) = open_on::<HipLike>(0, Some(4096), &cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    b.load_image(&cfg.image(), "k").unwrap();
    assert_eq!(count(&log, "alloc_device"), 0);
    assert_eq!(b.device().read(0x1100, 16), [0xee; 16]);

    // CUDA: no pool, the driver's heap limit set at open when asked for.
    let mut cfg = pool_image_config();
    cfg.nvidia = true;
    cfg.functions = vec!["k".into()];
    let base = 0x7ef1_0000_0000;
    let (mut b, log) = open_on::<CudaLike>(0, Some(1 << 30), &cfg, Some((base, 4096)));
    assert_eq!(at(&log, "heap_limit 1073741824"), 1, "right after open");
    b.reserve(base, 4096).unwrap();
    b.load_image(&cfg.image(), "k").unwrap();
    assert_eq!(count(&log, "alloc_device"), 0);
    let (_b, log) = open_on::<CudaLike>(0, None, &cfg, None);
    assert_eq!(count(&log, "heap_limit"), 0, "unset: the driver's default");

    // A pool symbol of another size is refused with its name.
    let mut cfg = pool_image_config();
    cfg.globals[1].2 = vec![0; 24];
    let base = 0x7ef2_0000_0000;
    let (mut b, _log) = open_on::<HipLike>(0, Some(4096), &cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    let e = b.load_image(&cfg.image(), "k").unwrap_err();
    assert!(matches!(e, BackendError::Image(_)), "{e}");
    let e = e.to_string();
    assert!(e.contains(POOL_SYMBOL) && e.contains("24 bytes"), "{e}");
}

#[test]
fn llvms_shared_memory_size_is_in_the_environment_and_a_floor_for_every_launch() {
    let mut cfg = Config::nvidia();
    cfg.globals = vec![(DEVICE_ENV_SYMBOL.into(), 0x1000, vec![0; 48])];
    cfg.static_shared = 1024;
    let vars = PluginVariables {
        shared_memory_size: 48 * 1024,
        ..PluginVariables::default()
    };
    let base = 0x7f10_0000_0000;
    let (mut b, log) = open_with_vars::<CudaLike>(0, vars, &cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    b.load_image(&cfg.image(), "k").unwrap();
    let dyn_mem = u32::from_le_bytes(b.device().read(0x1000 + 12, 4).try_into().unwrap());
    assert_eq!(dyn_mem, 48 * 1024, "DynamicMemSize");
    // A recording without its size (LLVM 18-22) gets the variable's, and
    // the opt-in counts it; a larger recorded size stays.
    b.launch(&[], &params(0)).unwrap();
    assert!(at(&log, "opt_in k 49152") < at(&log, "launch k 4x128 49152"));
    b.launch(&[], &params(64 * 1024)).unwrap();
    assert_eq!(count(&log, "launch k 4x128 65536"), 1);
}

#[test]
fn hip_reservations_retry_like_cuda_with_the_range_released_first() {
    // HIP once had no retry: the same order as CUDA now, each attempt
    // made after the placeholder was released.
    let mut cfg = Config::amd();
    cfg.honours_from = 64 * MIB;
    let base = 0x7f20_0000_0000;
    let (b, log) = open::<HipLike>(&cfg, Some((base, 8 * MIB)));
    let mut b = b.with_recorded_reservation(Some(16 * MIB));
    b.reserve(base, 8 * MIB).unwrap();
    let tried: Vec<String> = log
        .borrow()
        .iter()
        .filter(|l| l.starts_with("reserve_va") || l.starts_with("free_va"))
        .cloned()
        .collect();
    assert_eq!(
        tried,
        [
            "reserve_va 0x1000000 free=true",
            "free_va 0x7f0000000000 0x1000000",
            "reserve_va 0x800000 free=true",
            "free_va 0x7f0000000000 0x800000",
            "reserve_va 0x4000000 free=true"
        ]
    );
}

#[test]
fn the_backend_reports_the_uuid_its_device_api_gives() {
    let cfg = Config::nvidia();
    let (b, _) = open::<CudaLike>(&cfg, None);
    assert_eq!(
        b.device_uuid().as_deref(),
        Some("GPU-00112233-4455-6677-8899-aabbccddeeff")
    );
    let (b, _) = open::<HipLike>(&Config::amd(), None);
    assert_eq!(b.device_uuid(), None, "none given: none reported");
}

#[test]
fn a_mapped_recorded_range_is_left_to_the_placement_step() {
    // The recorded range is mapped in this process (here by a placeholder
    // of the test's): opening succeeds on both kinds of device; the
    // placement then relocates under `auto` and fails with exit 10's error
    // (naming the occupant) only under `recorded`, as on the host backend.
    use crate::placement::{place, Placement};
    for hold in [false, true] {
        let base = if hold {
            0x7f30_0000_0000
        } else {
            0x7f31_0000_0000
        };
        let taken = Placeholder::new(base, 4096).unwrap();
        let image = Config::nvidia().image();
        let mut b: Box<dyn Backend> = if hold {
            Box::new(open::<HipLike>(&Config::nvidia(), Some((base, 4096))).0)
        } else {
            Box::new(open::<CudaLike>(&Config::nvidia(), Some((base, 4096))).0)
        };
        let e = place(b.as_mut(), Placement::Recorded, base, 4096, None, &image).unwrap_err();
        assert!(matches!(e, BackendError::Reserve { .. }), "{e}");
        assert!(e.to_string().contains("occupied by"), "{e}");
        let placed = place(b.as_mut(), Placement::Auto, base, 4096, None, &image).unwrap();
        assert_ne!(placed.base, base, "relocated");
        assert!(placed.rebaser.is_some());
        drop(taken);
    }
}

#[test]
fn llvms_stack_size_is_set_at_device_initialization_on_both_apis() {
    // LIBOMPTARGET_STACK_SIZE: the device limit set right after the device
    // opens (before the heap, as LLVM's GenericDeviceTy::init), on CUDA-
    // and HIP-like devices alike; unset, the driver's default stays.
    let vars = PluginVariables {
        stack_size: Some(16384),
        heap_size: Some(1 << 20),
        ..PluginVariables::default()
    };
    let (_b, log) = open_with_vars::<CudaLike>(0, vars, &Config::nvidia(), None);
    assert_eq!(at(&log, "stack_limit 16384"), 1, "{:#?}", log.borrow());
    assert!(at(&log, "stack_limit") < at(&log, "heap_limit"));
    let (_b, log) = open_with_vars::<HipLike>(0, vars, &Config::amd(), None);
    assert_eq!(at(&log, "stack_limit 16384"), 1, "{:#?}", log.borrow());
    let (_b, log) = open::<CudaLike>(&Config::nvidia(), None);
    assert_eq!(count(&log, "stack_limit"), 0);
    // Read as LLVM reads it: decimal bytes.
    std::env::set_var(super::STACK_SIZE_VARIABLE, "4096");
    assert_eq!(PluginVariables::from_env().stack_size, Some(4096));
    std::env::remove_var(super::STACK_SIZE_VARIABLE);
}

#[test]
fn an_unused_rpc_client_replays_and_a_used_one_is_refused_saying_what_it_needs() {
    // LLVM 20+ -O0 images define __llvm_rpc_client without using it: the
    // image loads and launches. One whose code relocates a reference to it
    // (cubin) or computes its address (AMDGPU) is refused before anything
    // runs, naming the evidence and the RPC server it needs.
    use crate::backend::gpu::rpc_client::build::{getpc_code, image_with_client};
    let client = "__llvm_rpc_client";
    let cases = [
        (
            true,
            image_with_client(EM_CUDA, client, vec![0; 64], false),
            None,
        ),
        (
            false,
            image_with_client(EM_AMDGPU, client, vec![0; 64], false),
            None,
        ),
        (
            true,
            image_with_client(EM_CUDA, client, vec![0; 64], true),
            Some(".rela.text relocates"),
        ),
        (
            false,
            image_with_client(EM_AMDGPU, client, getpc_code(0x3000), false),
            Some("computes its address"),
        ),
    ];
    for (i, (nvidia, image, refused)) in cases.into_iter().enumerate() {
        let mut cfg = if nvidia {
            Config::nvidia()
        } else {
            Config::amd()
        };
        cfg.globals = vec![(client.into(), 0x1000, vec![0; 16])];
        let base = 0x7f40_0000_0000 + (i as u64) * 0x1_0000_0000;
        let (mut b, log) = open::<CudaLike>(&cfg, Some((base, 4096)));
        b.reserve(base, 4096).unwrap();
        match (b.load_image(&image, "k"), refused) {
            (Ok(()), None) => {
                b.launch(&[], &params(0)).unwrap();
                assert_eq!(count(&log, "launch k"), 1);
            }
            (Err(e), Some(evidence)) => {
                let e = e.to_string();
                assert!(e.contains(evidence) && e.contains("RPC server"), "{e}");
                assert_eq!(count(&log, "launch"), 0);
            }
            (r, want) => panic!("case {i}: {r:?}, expected refusal {want:?}"),
        }
    }
}

#[test]
fn an_image_with_unrecorded_statics_is_reloaded_before_each_later_repetition() {
    // `counter` is a writable device static no recorded global rewrites:
    // before the second repetition's globals the module is reloaded and
    // its constructors run again, so the launch starts from the recorded
    // state; the recorded global is written after the reload.
    use crate::backend::gpu::rpc_client::build::image_with_client;
    let mut cfg = Config::amd();
    cfg.functions.push(AMDGPU_INIT_KERNEL.into());
    cfg.globals = vec![("g".into(), 0x2000, vec![0; 8])];
    let base = 0x7f50_0000_0000;
    let repeat = |image: &[u8], log: &Log, b: &mut GpuBackend<HipLike>| {
        b.reserve(base, 4096).unwrap();
        b.load_image(image, "k").unwrap();
        for _ in 0..3 {
            b.upload(0, &[1; 4096]).unwrap();
            b.write_global("g", &[7; 8]).unwrap();
            b.launch(&[], &params(0)).unwrap();
        }
        count(log, "load_module")
    };
    let stateful = image_with_client(EM_AMDGPU, "counter", vec![0; 16], false);
    let (mut b, log) = open::<HipLike>(&cfg, Some((base, 4096)));
    assert_eq!(repeat(&stateful, &log, &mut b), 3, "{:#?}", log.borrow());
    assert_eq!(count(&log, "launch amdgcn.device.init"), 3);
    let lines = log.borrow().clone();
    let second = lines
        .iter()
        .position(|l| l.starts_with("launch k "))
        .unwrap();
    let reload = lines
        .iter()
        .skip(second)
        .position(|l| l == "load_module")
        .unwrap()
        + second;
    assert_eq!(
        lines[reload - 1],
        "unload_module",
        "the old module goes first"
    );
    assert!(
        lines[reload..].iter().any(|l| l == "htod 0x2000 8"),
        "g after the reload"
    );
    drop(b);

    // Its only writable object is the recorded global: loaded once.
    let stateless = image_with_client(EM_AMDGPU, "g", vec![0; 16], false);
    let (mut b, log) = open::<HipLike>(&cfg, Some((base, 4096)));
    assert_eq!(repeat(&stateless, &log, &mut b), 1, "{:#?}", log.borrow());
}

/// Issue 44: a recorded global's address is rebased to the module's
/// global, which the driver gives; an absent one is named.
#[test]
fn a_globals_address_is_the_modules() {
    let base = 0x7eb0_0000_0000;
    let mut cfg = Config::amd();
    cfg.globals = vec![("g_table".into(), 0x7f00_0000_2000, vec![0; 2048])];
    let (mut b, _log) = open::<HipLike>(&cfg, Some((base, 4096)));
    b.reserve(base, 4096).unwrap();
    b.load_image(&cfg.image(), "k").unwrap();
    assert_eq!(b.global_address("g_table").unwrap(), Some(0x7f00_0000_2000));
    let e = b.global_address("nope").unwrap_err();
    assert!(matches!(e, BackendError::MissingGlobal { .. }), "{e}");
}
