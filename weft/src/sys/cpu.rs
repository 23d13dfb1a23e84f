//! Cache hints. They change no value a program can observe, only when a cache line moves:
//! a line another CPU will read next can be asked for early, and a line this CPU will write
//! next can be taken over (its other copies invalidated) before the store, so that the store
//! and any fence after it do not wait for another CPU's answer.

/// Asks for the line holding `p` in a writable state (x86's `prefetchw`; a no-op elsewhere).
/// `p` need not be valid: a prefetch never faults and never changes memory.
#[inline(always)]
pub fn prefetch_write<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` reads no register but its operand's address, writes no register
    // or flag and never faults (on an invalid address it does nothing); CPUs without it decode
    // its opcode (0F 0D) as a no-op. The asm touches no stack.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks for the line holding `p` to be read soon. As for [`prefetch_write`], `p` need not be
/// valid.
#[inline(always)]
pub fn prefetch_read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` never faults and changes no memory, register or flag.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
