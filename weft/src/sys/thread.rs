//! The calling thread's identity, read from the thread-pointer register: one instruction,
//! where a `thread_local!` in a shared library (the C ABI's `libmpi_abi.so`) costs a call to
//! `__tls_get_addr` on every access.
//!
//! The thread pointer is the address of the thread's control block: distinct for every live
//! thread and never 0 (x86-64: `%fs:0` holds it, as the psABI's TLS rules require; AArch64:
//! `tpidr_el0`). A thread that has exited may see its address reused by a later thread.

/// An identity of the calling thread: nonzero, even (its low bit is free for a flag), distinct
/// from every other live thread's.
#[inline(always)]
pub fn current() -> usize {
    let id = thread_pointer();
    debug_assert!(id != 0 && id.is_multiple_of(2), "thread pointer {id:#x}");
    id
}

#[cfg(all(target_arch = "x86_64", not(loom)))]
#[inline(always)]
fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: reads the word at %fs:0, the thread control block's pointer to itself, which
    // the x86-64 TLS ABI guarantees in every thread; no memory is written.
    unsafe {
        std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, readonly, preserves_flags, pure));
    }
    tp
}

#[cfg(all(target_arch = "aarch64", not(loom)))]
#[inline(always)]
fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: reads the thread-pointer register; no memory is touched.
    unsafe {
        std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags, pure));
    }
    tp
}

/// Elsewhere (and under loom, whose threads share one OS thread): the address of a
/// thread-local, which is as distinct.
#[cfg(any(not(any(target_arch = "x86_64", target_arch = "aarch64")), loom))]
#[inline(always)]
fn thread_pointer() -> usize {
    thread_local! {
        static MARK: u16 = const { 0 };
    }
    MARK.with(|m| m as *const u16 as usize)
}

#[cfg(test)]
mod tests {
    #[test]
    fn threads_have_distinct_stable_even_ids() {
        let me = super::current();
        assert_eq!(me, super::current());
        assert!(me != 0 && me.is_multiple_of(2));
        let other = std::thread::spawn(super::current).join().unwrap();
        // The other thread was alive while this one is: distinct.
        assert_ne!(me, other);
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(super::current);
            let b = s.spawn(super::current);
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_ne!(a, me);
        assert_ne!(b, me);
    }
}
