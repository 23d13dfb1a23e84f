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

/// Copies `len` bytes from `src` to `dst` with non-temporal stores where the CPU has them
/// (x86's `movntdq`: the lines go to memory without being read first, and any copies other
/// CPUs hold are invalidated on the way), then fences them, so that a plain Release store
/// after the call orders after every byte. For data another CPU reads next: measured on this
/// project's 2-CPU VM (`docs/performance.md`, 2026-11-26, `bench/c/exchange.c`), a 64 KiB
/// exchange between two processes took 8.2-10.6 µs against 10.9-36.4 µs with ordinary
/// stores, whose lines the reader had to take from the writer's cache one by one; below 16
/// KiB, with both CPUs on one core, ordinary stores were faster.
///
/// # Safety
/// As for [`std::ptr::copy_nonoverlapping`]: `src` valid for reads and `dst` for writes of
/// `len` bytes, the two not overlapping.
#[inline]
pub unsafe fn copy_streaming(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        // Ordinary stores up to dst's first 16-byte boundary (`movntdq` needs it aligned).
        let head = dst.align_offset(16).min(len);
        // SAFETY: the caller's contract, for the first `head` bytes.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
        let mut done = head;
        while done + 64 <= len {
            // SAFETY: `done + 64 ≤ len`, so the 64 bytes at `done` lie inside both buffers
            // (the caller's contract); `dst + done` is 16-byte aligned (`head` made it so
            // and `done` grows by 64), as `_mm_stream_si128` needs; `_mm_loadu_si128` takes
            // any alignment. SSE2, which these use, is part of x86_64.
            unsafe {
                let (s, d) = (src.add(done) as *const __m128i, dst.add(done) as *mut __m128i);
                let v = [
                    _mm_loadu_si128(s),
                    _mm_loadu_si128(s.add(1)),
                    _mm_loadu_si128(s.add(2)),
                    _mm_loadu_si128(s.add(3)),
                ];
                for (q, v) in v.into_iter().enumerate() {
                    _mm_stream_si128(d.add(q), v);
                }
            }
            done += 64;
        }
        // SAFETY: the caller's contract, for the last `len - done` bytes.
        unsafe { std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), len - done) };
        // Non-temporal stores are not ordered with later stores by x86's usual rules: the
        // fence makes them visible before any store after it (the caller's Release store).
        // SAFETY: `sfence` touches no memory.
        unsafe { _mm_sfence() };
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_streaming_copy_writes_exactly_the_bytes_asked_for_at_any_alignment() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [0, 1, 15, 16, 17, 63, 64, 65, 127, 200, 4096 + 7] {
            for (s_off, d_off) in [(0, 0), (1, 0), (0, 1), (3, 9), (16, 15), (33, 48)] {
                let mut dst = vec![0xeeu8; len + 128];
                // SAFETY: both ranges lie inside their vectors (`len + 33 < 5000`,
                // `d_off + len < len + 128`), and the vectors are distinct.
                unsafe {
                    super::copy_streaming(src[s_off..].as_ptr(), dst[d_off..].as_mut_ptr(), len)
                };
                assert_eq!(&dst[d_off..d_off + len], &src[s_off..s_off + len], "len {len}");
                assert!(dst[..d_off].iter().chain(&dst[d_off + len..]).all(|&b| b == 0xee));
            }
        }
    }
}
