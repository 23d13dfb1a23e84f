//! MPI's accumulate operations on one element of a same-node target's window memory, done by
//! the origin with the CPU's atomic instructions (issue 12, item 4): `fetch_and_op`,
//! `compare_and_swap`, and single-element `accumulate` on predefined types of 1, 2, 4 or 8
//! bytes. Integer sums and the bitwise operations are one instruction (`lock xadd`, `lock
//! and`, ...), `MPI_REPLACE` a swap, `MPI_NO_OP` a load; everything else (products, minima,
//! maxima, the logical operations, floating point) a compare-and-swap loop around the same
//! function the collectives reduce with ([`crate::coll::op`]). All of them are atomic with
//! each other, from any origin on the node.
//!
//! Elements the CPU cannot update atomically here (16 bytes, or not aligned to their size)
//! are not taken: [`is_lock_free_at`] says so, and the window serializes those under its
//! element locks instead.
//!
//! The atomics are `std`'s, not `crate::sync`'s: they work on memory another process maps,
//! which loom cannot model.

use crate::coll::op::{self, Basic, Elements, SysOp};
use crate::error::{Error, ErrorClass, Result};
use std::sync::atomic::Ordering::{Acquire, AcqRel};

/// Whether an element of `basic` at `target` is updated with the CPU's atomics (its size is
/// 1, 2, 4 or 8 bytes and `target` is aligned to it).
pub fn is_lock_free_at(basic: Basic, target: *const u8) -> bool {
    let size = basic.size();
    matches!(size, 1 | 2 | 4 | 8) && (target as usize).is_multiple_of(size)
}

/// What an operation compiles to on one lock-free element.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Instruction {
    Add,
    And,
    Or,
    Xor,
    Swap,
    Load,
    /// A compare-and-swap loop around the reduction function.
    Loop,
}

fn instruction(op: SysOp, basic: Basic) -> Instruction {
    let integer = !matches!(
        basic,
        Basic::F32 | Basic::F64 | Basic::Bool | Basic::C32 | Basic::C64
    );
    match op {
        SysOp::Replace => Instruction::Swap,
        SysOp::NoOp => Instruction::Load,
        SysOp::Sum if integer => Instruction::Add,
        SysOp::BitwiseAnd if integer || basic == Basic::Bool => Instruction::And,
        SysOp::BitwiseOr if integer || basic == Basic::Bool => Instruction::Or,
        SysOp::BitwiseXor if integer || basic == Basic::Bool => Instruction::Xor,
        _ => Instruction::Loop,
    }
}

/// Runs `$body` with `$a` the atomic of `$size` bytes at `$target` and `$t` its integer type.
macro_rules! on_width {
    ($size:expr, $target:expr, |$a:ident, $t:ident| $body:expr) => {
        match $size {
            1 => on_width!(@one std::sync::atomic::AtomicU8, u8, $target, $a, $t, $body),
            2 => on_width!(@one std::sync::atomic::AtomicU16, u16, $target, $a, $t, $body),
            4 => on_width!(@one std::sync::atomic::AtomicU32, u32, $target, $a, $t, $body),
            8 => on_width!(@one std::sync::atomic::AtomicU64, u64, $target, $a, $t, $body),
            _ => unreachable!("checked by is_lock_free_at"),
        }
    };
    (@one $atomic:ty, $int:ty, $target:expr, $a:ident, $t:ident, $body:expr) => {{
        #[allow(dead_code)]
        type $t = $int;
        // SAFETY: the caller's promise (see the public functions): `$target` is aligned to
        // and holds one `$int`, mapped for the call and touched only atomically meanwhile.
        let $a = unsafe { <$atomic>::from_ptr($target as *mut $int) };
        $body
    }};
}

/// Applies `op` with `operand` to the element of `basic` at `target` atomically
/// (`target = operand ∘ target`, as MPI_Accumulate does), and writes the element's value
/// before into `old` (MPI_Fetch_and_op). `operand` and `old` hold one element each.
///
/// Errors: `op` not defined on `basic` (class Op), or an element that is not lock-free at
/// `target` (class Unsupported: the caller takes the element locks).
///
/// # Safety
/// `target` points to one element of `basic`, mapped for the call, which nothing touches
/// meanwhile but atomic operations (this module's, from any process).
#[inline]
pub unsafe fn fetch_and_op(
    basic: Basic,
    op: SysOp,
    target: *mut u8,
    operand: &[u8],
    old: &mut [u8],
) -> Result<()> {
    const CALL: &str = "fetch_and_op";
    let size = basic.size();
    check(CALL, basic, target, &[operand.len(), old.len()])?;
    if !op::applies(op, Elements::Basic(basic)) {
        return Err(Error::new(
            ErrorClass::Op,
            CALL,
            format!("{} is not defined on {basic:?}", op.name()),
        ));
    }
    let how = instruction(op, basic);
    on_width!(size, target, |a, T| {
        let x = T::from_ne_bytes(operand.try_into().expect("checked length"));
        // AcqRel (Acquire for the load): the partners are the other origins' operations on
        // this element; the epoch's synchronization orders everything else.
        let before: T = match how {
            Instruction::Add => a.fetch_add(x, AcqRel),
            Instruction::And => a.fetch_and(x, AcqRel),
            Instruction::Or => a.fetch_or(x, AcqRel),
            Instruction::Xor => a.fetch_xor(x, AcqRel),
            Instruction::Swap => a.swap(x, AcqRel),
            Instruction::Load => a.load(Acquire),
            Instruction::Loop => {
                let mut current = a.load(Acquire);
                loop {
                    let mut next = current.to_ne_bytes();
                    combine_one(op, basic, operand, &mut next);
                    let next = T::from_ne_bytes(next);
                    match a.compare_exchange_weak(current, next, AcqRel, Acquire) {
                        Ok(_) => break current,
                        Err(seen) => current = seen,
                    }
                }
            }
        };
        old.copy_from_slice(&before.to_ne_bytes());
    });
    Ok(())
}

/// Replaces the element of `basic` at `target` with `swap` if it equals `compare` (bit for
/// bit, as MPI_Compare_and_swap compares), atomically; writes its value before into `old`.
///
/// # Safety
/// As for [`fetch_and_op`].
#[inline]
pub unsafe fn compare_and_swap(
    basic: Basic,
    target: *mut u8,
    compare: &[u8],
    swap: &[u8],
    old: &mut [u8],
) -> Result<()> {
    check(
        "compare_and_swap",
        basic,
        target,
        &[compare.len(), swap.len(), old.len()],
    )?;
    on_width!(basic.size(), target, |a, T| {
        let expected = T::from_ne_bytes(compare.try_into().expect("checked length"));
        let new = T::from_ne_bytes(swap.try_into().expect("checked length"));
        // AcqRel/Acquire: as in `fetch_and_op`.
        let before = match a.compare_exchange(expected, new, AcqRel, Acquire) {
            Ok(v) | Err(v) => v,
        };
        old.copy_from_slice(&before.to_ne_bytes());
    });
    Ok(())
}

/// `next = operand op next` for one element: the sums of floating-point numbers (the
/// commonest accumulate the CPU has no instruction for) inline, the rest by the collectives'
/// functions.
#[inline(always)]
fn combine_one(op: SysOp, basic: Basic, operand: &[u8], next: &mut [u8]) {
    match (op, basic) {
        (SysOp::Sum, Basic::F64) => {
            let (x, y) = (f64::from_ne_bytes(fixed(operand)), f64::from_ne_bytes(fixed(next)));
            next.copy_from_slice(&(y + x).to_ne_bytes());
        }
        (SysOp::Sum, Basic::F32) => {
            let (x, y) = (f32::from_ne_bytes(fixed(operand)), f32::from_ne_bytes(fixed(next)));
            next.copy_from_slice(&(y + x).to_ne_bytes());
        }
        _ => op::apply_basic(op, basic, operand, next),
    }
}

/// The `N` bytes of one element (its length checked by [`check`]).
#[inline(always)]
fn fixed<const N: usize>(bytes: &[u8]) -> [u8; N] {
    bytes.try_into().expect("checked length")
}

/// The checks both operations share: a lock-free element, and one element in each buffer.
#[inline(always)]
fn check(call: &'static str, basic: Basic, target: *const u8, lens: &[usize]) -> Result<()> {
    if is_lock_free_at(basic, target) && lens.iter().all(|&l| l == basic.size()) {
        return Ok(());
    }
    Err(refused(call, basic, target, lens))
}

/// What [`check`] refuses, and why.
#[cold]
#[inline(never)]
fn refused(call: &'static str, basic: Basic, target: *const u8, lens: &[usize]) -> Error {
    if !is_lock_free_at(basic, target) {
        return Error::new(
            ErrorClass::Unsupported,
            call,
            format!(
                "an element of {basic:?} at {target:p} is not lock-free here (16 bytes, or not \
                 aligned to its size)"
            ),
        );
    }
    let bad = lens.iter().find(|&&l| l != basic.size()).copied().unwrap_or_default();
    Error::new(
        ErrorClass::Count,
        call,
        format!(
            "a buffer of {bad} bytes for one element of {basic:?} ({} bytes)",
            basic.size()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Memory that threads update only through this module (as processes do in a window).
    struct Shared(std::cell::UnsafeCell<[u64; 4]>);
    // SAFETY: the tests touch it only through this module's atomics, or after the threads end.
    unsafe impl Sync for Shared {}
    impl Shared {
        fn new() -> Arc<Shared> {
            Arc::new(Shared(std::cell::UnsafeCell::new([0; 4])))
        }
        fn at(&self, byte: usize) -> *mut u8 {
            // SAFETY: within the array.
            unsafe { (self.0.get() as *mut u8).add(byte) }
        }
    }

    fn fop(basic: Basic, op: SysOp, target: *mut u8, x: &[u8]) -> Vec<u8> {
        let mut old = vec![0; basic.size()];
        // SAFETY: `target` is a live, aligned element of the test's memory.
        unsafe { fetch_and_op(basic, op, target, x, &mut old) }.unwrap();
        old
    }

    #[test]
    fn concurrent_sums_from_many_threads_are_exact() {
        let mem = Shared::new();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let mem = mem.clone();
                std::thread::spawn(move || {
                    for _ in 0..5000 {
                        fop(Basic::U64, SysOp::Sum, mem.at(0), &1u64.to_ne_bytes());
                        // A float sum takes the compare-and-swap loop: exact for small integers.
                        fop(Basic::F64, SysOp::Sum, mem.at(8), &1f64.to_ne_bytes());
                        fop(Basic::I32, SysOp::Sum, mem.at(16), &(-2i32).to_ne_bytes());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // SAFETY: the threads have ended.
        let words = unsafe { *mem.0.get() };
        assert_eq!(words[0], 20000);
        assert_eq!(f64::from_bits(words[1]), 20000.0);
        assert_eq!(words[2] as u32 as i32, -40000);
    }

    #[test]
    fn each_operation_returns_the_old_value_and_leaves_the_right_one() {
        let mem = Shared::new();
        let t = mem.at(0);
        let old = |v: Vec<u8>| i64::from_ne_bytes(v.try_into().unwrap());
        let b = |v: i64| v.to_ne_bytes();
        assert_eq!(old(fop(Basic::I64, SysOp::Replace, t, &b(7))), 0);
        assert_eq!(old(fop(Basic::I64, SysOp::Max, t, &b(5))), 7);
        assert_eq!(old(fop(Basic::I64, SysOp::Min, t, &b(-3))), 7);
        assert_eq!(old(fop(Basic::I64, SysOp::Prod, t, &b(4))), -3);
        assert_eq!(old(fop(Basic::I64, SysOp::BitwiseXor, t, &b(-1))), -12);
        assert_eq!(old(fop(Basic::I64, SysOp::NoOp, t, &b(99))), 11);
        assert_eq!(old(fop(Basic::I64, SysOp::LogicalAnd, t, &b(0))), 11);
        assert_eq!(old(fop(Basic::I64, SysOp::NoOp, t, &b(0))), 0);
        // Bytes: MPI_C_BOOL with a logical or.
        let byte = mem.at(24);
        assert_eq!(fop(Basic::Bool, SysOp::LogicalOr, byte, &[1]), vec![0]);
        assert_eq!(fop(Basic::Bool, SysOp::NoOp, byte, &[0]), vec![1]);
    }

    #[test]
    fn compare_and_swap_is_a_spin_lock() {
        let mem = Shared::new();
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let mem = mem.clone();
                std::thread::spawn(move || {
                    let me = (i + 1) as u32;
                    for _ in 0..1000 {
                        let mut old = [0u8; 4];
                        loop {
                            // SAFETY: an aligned element of the test's memory.
                            unsafe {
                                compare_and_swap(
                                    Basic::U32,
                                    mem.at(0),
                                    &0u32.to_ne_bytes(),
                                    &me.to_ne_bytes(),
                                    &mut old,
                                )
                            }
                            .unwrap();
                            if old == [0; 4] {
                                break;
                            }
                            std::thread::yield_now();
                        }
                        // Under the lock: a plain read-modify-write through an atomic load
                        // and store (no RMW), which only mutual exclusion keeps exact.
                        let v = fop(Basic::U64, SysOp::NoOp, mem.at(8), &[0; 8]);
                        let next = u64::from_ne_bytes(v.try_into().unwrap()) + 1;
                        fop(Basic::U64, SysOp::Replace, mem.at(8), &next.to_ne_bytes());
                        // Release the lock.
                        fop(Basic::U32, SysOp::Replace, mem.at(0), &0u32.to_ne_bytes());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // SAFETY: the threads have ended.
        assert_eq!(unsafe { (*mem.0.get())[1] }, 4000);
    }

    #[test]
    fn elements_that_are_not_lock_free_and_bad_buffers_are_refused() {
        let mem = Shared::new();
        let mut old = [0u8; 16];
        // SAFETY: within the test's memory.
        let e = unsafe { fetch_and_op(Basic::I128, SysOp::Sum, mem.at(0), &[0; 16], &mut old) }
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Unsupported);
        // SAFETY: within the test's memory.
        let e = unsafe { fetch_and_op(Basic::U32, SysOp::Sum, mem.at(2), &[0; 4], &mut old[..4]) }
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Unsupported, "{e}");
        // SAFETY: within the test's memory.
        let e = unsafe { fetch_and_op(Basic::U32, SysOp::Sum, mem.at(4), &[0; 8], &mut old[..4]) }
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Count);
        // SAFETY: within the test's memory.
        let e = unsafe { fetch_and_op(Basic::F32, SysOp::BitwiseAnd, mem.at(4), &[0; 4], &mut old[..4]) }
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::Op);
        assert!(e.to_string().contains("MPI_BAND"), "{e}");
    }
}
