//! Calling a kernel entry point with any number of 64-bit integer arguments.
//!
//! LLVM's host plugin calls an outlined kernel through libffi, passing every
//! argument as a pointer-sized integer. Under the x86-64 System V ABI that
//! means: the first six in `rdi, rsi, rdx, rcx, r8, r9`, the rest on the
//! stack (argument 7 at the lowest address), `rsp` 16-byte aligned at the
//! `call`, `al` = 0 (no vector registers used, in case the callee is
//! variadic). A Rust function-pointer cast needs a fixed arity, so this
//! module has a 30-instruction assembly trampoline instead. It was chosen
//! over libffi because it covers exactly this one signature, needs no C
//! library or build script, and is short enough to audit here.

#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".text",
    ".globl rrstore_call_u64_args",
    ".type rrstore_call_u64_args,@function",
    "rrstore_call_u64_args:",
    // rdi = fn, rsi = args (at least 6 readable), rdx = count (>= 6)
    "push rbp",
    "mov rbp, rsp",
    "push r12",
    "push r13",
    // rsp is 16-byte aligned here (entry rsp = 8 mod 16, then 3 pushes).
    "mov r12, rdi",
    "mov r13, rsi",
    "mov r10, rdx",
    // odd number of stack arguments: pad so rsp is aligned at the call
    "lea rax, [rdx - 6]",
    "test rax, 1",
    "jz 2f",
    "sub rsp, 8",
    "2:",
    "cmp r10, 6",
    "jbe 3f",
    "dec r10",
    "push qword ptr [r13 + r10 * 8]",
    "jmp 2b",
    "3:",
    "mov rdi, [r13]",
    "mov rsi, [r13 + 8]",
    "mov rdx, [r13 + 16]",
    "mov rcx, [r13 + 24]",
    "mov r8, [r13 + 32]",
    "mov r9, [r13 + 40]",
    "xor eax, eax",
    "call r12",
    "lea rsp, [rbp - 16]",
    "pop r13",
    "pop r12",
    "pop rbp",
    "ret",
    ".size rrstore_call_u64_args, . - rrstore_call_u64_args",
);

#[cfg(target_arch = "x86_64")]
extern "C" {
    fn rrstore_call_u64_args(f: *const u8, args: *const u64, count: usize);
}

/// Call `f` with `args`, each as one 64-bit integer argument, over a
/// cleared stack ([`super::launch_path::clear_stack_below`]).
///
/// # Safety
/// `f` must be the address of a function that takes `args.len()` integer or
/// pointer arguments and whose side effects are acceptable (a recorded kernel
/// only touches the arena and its own globals when its arguments are the
/// recorded ones).
#[cfg(target_arch = "x86_64")]
pub unsafe fn call_with_u64_args(f: *const u8, args: &[u64]) {
    // Up to 32 arguments are copied on this frame, not the heap: the stack
    // below was cleared for the kernel (`launch_path`) and a `malloc` here
    // would leave its frames there.
    let mut inline = [0u64; 32];
    let heap: Vec<u64>;
    let padded: &[u64] = if args.len() <= inline.len() {
        inline[..args.len()].copy_from_slice(args);
        &inline[..args.len().max(6)]
    } else {
        heap = args.to_vec();
        &heap
    };
    let (ptr, count) = (padded.as_ptr(), padded.len());
    // Last before the call (nothing runs between it and the kernel): the
    // kernel finds zeros below it, not the runner's own data.
    super::launch_path::clear_stack_below();
    // SAFETY: `ptr` points at `count` >= 6 readable elements of `padded`,
    // alive until this returns; the trampoline follows the SysV ABI (see
    // module doc); the caller guarantees `f` is a function taking these
    // arguments.
    unsafe { rrstore_call_u64_args(f, ptr, count) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    static SEEN: Mutex<Vec<u64>> = Mutex::new(Vec::new());

    #[allow(clippy::too_many_arguments)]
    extern "C" fn ten(
        a: u64,
        b: u64,
        c: u64,
        d: u64,
        e: u64,
        f: u64,
        g: u64,
        h: u64,
        i: u64,
        j: u64,
    ) {
        *SEEN.lock().unwrap() = vec![a, b, c, d, e, f, g, h, i, j];
    }
    extern "C" fn seven(a: u64, b: u64, c: u64, d: u64, e: u64, f: u64, g: u64) {
        // a misaligned stack would crash SSE code here
        let v: Vec<f64> = (0..4).map(|x| x as f64 * 1.5).collect();
        assert_eq!(v.iter().sum::<f64>(), 9.0);
        *SEEN.lock().unwrap() = vec![a, b, c, d, e, f, g];
    }
    extern "C" fn two(a: u64, b: u64) {
        *SEEN.lock().unwrap() = vec![a, b];
    }

    #[test]
    fn passes_register_and_stack_arguments_in_order() {
        let args: Vec<u64> = (1..=10).map(|i| i * 0x1111_0000_0000 + i).collect();
        // SAFETY: `ten` takes ten u64 arguments.
        unsafe { call_with_u64_args(ten as *const u8, &args) };
        assert_eq!(*SEEN.lock().unwrap(), args);
        let args7 = [u64::MAX, 2, 3, 4, 5, 6, 7];
        // SAFETY: `seven` takes seven u64 arguments.
        unsafe { call_with_u64_args(seven as *const u8, &args7) };
        assert_eq!(*SEEN.lock().unwrap(), args7);
        // SAFETY: `two` takes two u64 arguments.
        unsafe { call_with_u64_args(two as *const u8, &[9, 8]) };
        assert_eq!(*SEEN.lock().unwrap(), vec![9, 8]);
        // More than the inline copy holds: the extra ones are ignored by
        // the callee, the first ten still arrive in order.
        let many: Vec<u64> = (1..=40).collect();
        // SAFETY: `ten` reads ten arguments; the caller may pass more.
        unsafe { call_with_u64_args(ten as *const u8, &many) };
        assert_eq!(*SEEN.lock().unwrap(), many[..10].to_vec());
    }
}
