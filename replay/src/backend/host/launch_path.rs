//! How the runner enters a kernel, made to resemble LLVM's host plugin
//! (issue 44, item 2): what a kernel that reads its stack before writing
//! it (team-local arrays sized for 128-256 GPU threads, filled by the two
//! host threads with that stride) finds there.
//!
//! Under the plugin the kernel runs on the thread that called
//! `__tgt_target_kernel`, after libomptarget has connected to libomp
//! (`ompt_libomp_connect` from `__tgt_register_lib`, which initialises
//! libomp's serial part: its environment parsing and settings sort), and on
//! a part of that thread's stack that the program rarely used before. In a
//! runner, by contrast, the image's first libomp call did that
//! initialisation inside the kernel's own fork, right under the kernel, and
//! the stack below the call held the runner's own earlier frames (the
//! image's `dlopen`, the fill, even names of its environment variables:
//! the kernel copied them into its output). So before the first launch
//! the runner initialises libomp as libomptarget would and runs libomp's
//! first fork ([`initialise_openmp`]), and it calls every kernel over a
//! cleared stack
//! ([`clear_stack_below`]). Measurements: docs/replay.md, "The host call
//! path".

/// Bytes of stack cleared below the launching frame: the kernel's frames
/// and libomp's fork path for a teams kernel (down to the `clone` of its
/// first workers) stay within ~8 KiB; this is four times that, and costs
/// ~2 µs per launch (64 KiB measured 4 µs), inside the measured kernel
/// time, since nothing may run between the clearing and the call.
pub const CLEARED_STACK: usize = 32 << 10;

/// Initialise the OpenMP runtime the image `handle` loaded before a kernel
/// can run: `__kmpc_get_target_offload` runs libomp's serial
/// initialisation (as libomptarget does, and like it only reads the offload
/// policy), then one empty parallel region runs libomp's first-fork work
/// (its middle initialisation: topology, affinity masks; the hot team's
/// workers), whose frames a kernel's team-local arrays otherwise overlay:
/// measured on a kernel reading 190 uninitialised words of a team-local
/// array, 613-624 bytes differed from the recording without it, ~156 with
/// it, 40-56 under LLVM's tool (docs/replay.md, "The host call path").
/// Nothing happens when the image does not link libomp.
///
/// # Safety
/// `handle` must be a live `dlopen` handle of the recording's image; the
/// caller accepts that the image's libraries run code (they already ran
/// their constructors when it was loaded).
pub unsafe fn initialise_openmp(handle: *mut libc::c_void) {
    // SAFETY: `handle` is live (caller); the name is a NUL-terminated
    // literal.
    let f = unsafe { libc::dlsym(handle, c"__kmpc_get_target_offload".as_ptr()) };
    if f.is_null() {
        return;
    }
    // SAFETY: libomp exports `int __kmpc_get_target_offload(void)` (since
    // LLVM 8); the symbol came from the image's own libomp.
    let f: extern "C" fn() -> libc::c_int = unsafe { std::mem::transmute(f) };
    f();
    // SAFETY: as above; libomp exports its GNU-compatible entry points.
    let parallel = unsafe { libc::dlsym(handle, c"GOMP_parallel".as_ptr()) };
    if parallel.is_null() {
        return;
    }
    extern "C" fn nothing(_: *mut libc::c_void) {}
    // SAFETY: libomp's `void GOMP_parallel(void (*fn)(void *), void *data,
    // unsigned num_threads, unsigned flags)` (kmp_gsupport.cpp, GOMP_4.0);
    // `nothing` ignores its data, 0 threads means the runtime's default
    // (the recorded OMP_NUM_THREADS), flags 0 no proc_bind.
    let parallel: extern "C" fn(extern "C" fn(*mut libc::c_void), *mut libc::c_void, u32, u32) =
        unsafe { std::mem::transmute(parallel) };
    parallel(nothing, std::ptr::null_mut(), 0, 0);
}

/// Clear [`CLEARED_STACK`] bytes of this thread's stack just below the
/// caller's frame, so that a kernel called next from the same frame finds
/// zeros (what a program's rarely used stack holds) rather than the
/// runner's own earlier data.
#[inline(never)]
pub fn clear_stack_below() {
    let mut area = [std::mem::MaybeUninit::<u8>::uninit(); CLEARED_STACK];
    // SAFETY: `area` is this frame's own array of CLEARED_STACK bytes;
    // writing zeros to it is always valid.
    unsafe { std::ptr::write_bytes(area.as_mut_ptr(), 0, CLEARED_STACK) };
    // The stores must happen although the array is never read.
    std::hint::black_box(&mut area);
}
