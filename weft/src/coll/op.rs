//! The predefined reduction operations of MPI on the element types they apply to, as
//! [`Combine`] functions over packed elements (`inout[i] = input[i] ∘ inout[i]`).
//!
//! Integers wrap on overflow (as C's unsigned arithmetic and every MPI library do); floats
//! follow IEEE arithmetic. `minloc`/`maxloc` work on (value, index) pairs and, on equal
//! values, keep the smaller index, as the standard says.

use crate::engine::schedule::Combine;
use std::rc::Rc;

/// The predefined element types reductions know.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Basic {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    I128,
    U128,
    F32,
    F64,
    /// One byte, 0 or 1.
    Bool,
    /// A complex number of two f32 (real, imaginary).
    C32,
    /// A complex number of two f64.
    C64,
}

impl Basic {
    /// Every type, in declaration order (`basic as u8` indexes it).
    const ALL: [Basic; 15] = [
        Basic::I8,
        Basic::U8,
        Basic::I16,
        Basic::U16,
        Basic::I32,
        Basic::U32,
        Basic::I64,
        Basic::U64,
        Basic::I128,
        Basic::U128,
        Basic::F32,
        Basic::F64,
        Basic::Bool,
        Basic::C32,
        Basic::C64,
    ];

    /// The type numbered `n` (`basic as u8`), for what travels between ranks.
    pub fn from_index(n: u8) -> Option<Basic> {
        Self::ALL.get(n as usize).copied()
    }

    /// Its one block: all `size()` bytes.
    pub const fn blocks(self) -> &'static [(isize, usize)] {
        match self.size() {
            1 => &[(0, 1)],
            2 => &[(0, 2)],
            4 => &[(0, 4)],
            8 => &[(0, 8)],
            _ => &[(0, 16)],
        }
    }

    /// Bytes of one element.
    pub const fn size(self) -> usize {
        match self {
            Basic::I8 | Basic::U8 | Basic::Bool => 1,
            Basic::I16 | Basic::U16 => 2,
            Basic::I32 | Basic::U32 | Basic::F32 => 4,
            Basic::I64 | Basic::U64 | Basic::F64 | Basic::C32 => 8,
            Basic::I128 | Basic::U128 | Basic::C64 => 16,
        }
    }
    fn is_integer(self) -> bool {
        !matches!(
            self,
            Basic::F32 | Basic::F64 | Basic::Bool | Basic::C32 | Basic::C64
        )
    }
    fn is_complex(self) -> bool {
        matches!(self, Basic::C32 | Basic::C64)
    }
}

/// What a datatype's elements are made of, for the predefined operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elements {
    /// One predefined type throughout (a primitive, or a layout of copies of one).
    Basic(Basic),
    /// (value, index) pairs, for minloc and maxloc.
    Pair(Basic, Basic),
}

/// The predefined operations (MPI's names in [`SysOp::name`]).
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SysOp {
    Max,
    Min,
    Sum,
    Prod,
    LogicalAnd,
    BitwiseAnd,
    LogicalOr,
    BitwiseOr,
    LogicalXor,
    BitwiseXor,
    MinLoc,
    MaxLoc,
    /// The input replaces the other operand (`MPI_REPLACE`).
    Replace,
    /// The other operand stays (`MPI_NO_OP`).
    NoOp,
}

impl SysOp {
    /// Every operation, in declaration order (`op as u8` indexes it).
    const ALL: [SysOp; 14] = [
        SysOp::Max,
        SysOp::Min,
        SysOp::Sum,
        SysOp::Prod,
        SysOp::LogicalAnd,
        SysOp::BitwiseAnd,
        SysOp::LogicalOr,
        SysOp::BitwiseOr,
        SysOp::LogicalXor,
        SysOp::BitwiseXor,
        SysOp::MinLoc,
        SysOp::MaxLoc,
        SysOp::Replace,
        SysOp::NoOp,
    ];

    /// The operation numbered `n` (`op as u8`), for what travels between ranks.
    pub fn from_index(n: u8) -> Option<SysOp> {
        Self::ALL.get(n as usize).copied()
    }

    /// MPI's name for it.
    pub fn name(self) -> &'static str {
        match self {
            SysOp::Max => "MPI_MAX",
            SysOp::Min => "MPI_MIN",
            SysOp::Sum => "MPI_SUM",
            SysOp::Prod => "MPI_PROD",
            SysOp::LogicalAnd => "MPI_LAND",
            SysOp::BitwiseAnd => "MPI_BAND",
            SysOp::LogicalOr => "MPI_LOR",
            SysOp::BitwiseOr => "MPI_BOR",
            SysOp::LogicalXor => "MPI_LXOR",
            SysOp::BitwiseXor => "MPI_BXOR",
            SysOp::MinLoc => "MPI_MINLOC",
            SysOp::MaxLoc => "MPI_MAXLOC",
            SysOp::Replace => "MPI_REPLACE",
            SysOp::NoOp => "MPI_NO_OP",
        }
    }
}

/// `outs[k] = f(ins[k], outs[k])` for every `k` of the shorter slice, a plain loop the
/// compiler vectorises with the widest registers this CPU has: the build's baseline (SSE2 on
/// x86-64) unless AVX2 or AVX-512 is found at run time (`is_x86_feature_detected!` caches
/// the answer: a load and a test per call). Sums of large windows' accumulates and of
/// reductions take half or a quarter of the instructions.
#[inline(always)]
fn in_place<T: Copy>(ins: &[T], outs: &mut [T], f: impl Fn(T, T) -> T + Copy) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512dq")
            && std::is_x86_feature_detected!("avx512vl")
        {
            // SAFETY: the CPU has every feature the function is compiled for (tested above).
            return unsafe { in_place_avx512(ins, outs, f) };
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            return unsafe { in_place_avx2(ins, outs, f) };
        }
    }
    in_place_baseline(ins, outs, f)
}

#[inline(always)]
fn in_place_baseline<T: Copy>(ins: &[T], outs: &mut [T], f: impl Fn(T, T) -> T) {
    for (x, y) in ins.iter().zip(outs.iter_mut()) {
        *y = f(*x, *y);
    }
}

/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn in_place_avx2<T: Copy>(ins: &[T], outs: &mut [T], f: impl Fn(T, T) -> T) {
    in_place_baseline(ins, outs, f)
}

/// # Safety
/// The CPU has AVX-512 F, BW, DQ and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
unsafe fn in_place_avx512<T: Copy>(ins: &[T], outs: &mut [T], f: impl Fn(T, T) -> T) {
    in_place_baseline(ins, outs, f)
}

macro_rules! lanes {
    ($input:expr, $inout:expr, $t:ty, |$a:ident, $b:ident| $e:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        let (input, inout): (&[u8], &mut [u8]) = ($input, $inout);
        let n = input.len().min(inout.len()) / N;
        if (input.as_ptr() as *const $t).is_aligned() && (inout.as_ptr() as *const $t).is_aligned() {
            // Aligned (user buffers and scratch vectors usually are): a plain loop the
            // compiler vectorises. (Tested by address, not by `align_to`, which costs more than
            // the loop for the few elements of a small reduction.)
            // SAFETY: `n` whole `$t`s lie in each slice (n counts the shorter one's), at an
            // address aligned for `$t`, and every bit pattern is a valid `$t`.
            let ins = unsafe { std::slice::from_raw_parts(input.as_ptr() as *const $t, n) };
            // SAFETY: as above, borrowed exclusively through `inout`; any value written back
            // is a valid `$t` and so valid bytes.
            let outs = unsafe { std::slice::from_raw_parts_mut(inout.as_mut_ptr() as *mut $t, n) };
            in_place(ins, outs, |$a: $t, $b: $t| $e);
        } else {
            for (i, o) in input.chunks_exact(N).zip(inout.chunks_exact_mut(N)) {
                let $a = <$t>::from_ne_bytes(i.try_into().expect("N bytes"));
                let $b = <$t>::from_ne_bytes((&*o).try_into().expect("N bytes"));
                let r: $t = $e;
                o.copy_from_slice(&r.to_ne_bytes());
            }
        }
    }};
}

macro_rules! per_type {
    ($basic:expr, $input:expr, $inout:expr, |$a:ident, $b:ident| $e:expr, [$($v:ident => $t:ty),*]) => {
        match $basic {
            $(Basic::$v => lanes!($input, $inout, $t, |$a, $b| $e),)*
            #[allow(unreachable_patterns)]
            _ => unreachable!("checked by combine()"),
        }
    };
}

/// Whether `op` applies to `e`.
pub fn applies(op: SysOp, e: Elements) -> bool {
    match (op, e) {
        (SysOp::Replace | SysOp::NoOp, _) => true,
        (SysOp::Sum | SysOp::Prod, Elements::Basic(b)) if b.is_complex() => true,
        (_, Elements::Basic(b)) if b.is_complex() => false,
        (SysOp::MinLoc | SysOp::MaxLoc, Elements::Pair(v, i)) => v != Basic::Bool && i.is_integer(),
        (_, Elements::Pair(..)) | (SysOp::MinLoc | SysOp::MaxLoc, _) => false,
        (SysOp::Max | SysOp::Min | SysOp::Sum | SysOp::Prod, Elements::Basic(b)) => {
            b != Basic::Bool
        }
        (SysOp::LogicalAnd | SysOp::LogicalOr | SysOp::LogicalXor, Elements::Basic(_)) => true,
        (SysOp::BitwiseAnd | SysOp::BitwiseOr | SysOp::BitwiseXor, Elements::Basic(b)) => {
            b.is_integer() || b == Basic::Bool
        }
    }
}

/// The combine function of `op` on elements `e`, or `None` when MPI does not define `op`
/// for them.
///
/// Made once per (operation, elements) on a thread and shared after that: a reduction of a
/// few bytes must not pay for an allocation on every call.
pub fn combine(op: SysOp, e: Elements) -> Option<Combine> {
    /// A program uses few pairs; past this many, new ones are made each time.
    const KEEP: usize = 32;
    const OPS: usize = SysOp::NoOp as usize + 1;
    const BASICS: usize = Basic::C64 as usize + 1;
    thread_local! {
        /// The functions on one predefined type, by operation and type: found without a
        /// search (every small reduction asks).
        static ON_BASICS: std::cell::RefCell<[[Option<Combine>; BASICS]; OPS]> =
            const { std::cell::RefCell::new([const { [const { None }; BASICS] }; OPS]) };
        /// The functions on (value, index) pairs.
        static ON_PAIRS: std::cell::RefCell<Vec<(SysOp, Elements, Combine)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    if !applies(op, e) {
        return None;
    }
    if let Elements::Basic(b) = e {
        return Some(ON_BASICS.with(|t| {
            t.borrow_mut()[op as usize][b as usize]
                .get_or_insert_with(|| Rc::new(move |i: &[u8], o: &mut [u8]| basic(op, b, i, o)))
                .clone()
        }));
    }
    let found = ON_PAIRS.with(|m| {
        let m = m.borrow();
        m.iter().find(|(o, x, _)| *o == op && *x == e).map(|(_, _, c)| c.clone())
    });
    if found.is_some() {
        return found;
    }
    let Elements::Pair(v, x) = e else {
        unreachable!("one predefined type: answered above")
    };
    let c: Combine = Rc::new(move |i: &[u8], o: &mut [u8]| pairs(op, v, x, i, o));
    ON_PAIRS.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() < KEEP {
            m.push((op, e, c.clone()));
        }
    });
    Some(c)
}

/// `inout = input ∘ inout` for `op` on elements of `b` (packed, whole elements of the shorter
/// slice): the function [`combine`] returns, called directly (no lookup, no `Rc`), for a
/// caller that has one predefined type at hand (one-sided accumulates).
///
/// # Panics
/// Unless [`applies`]`(op, Elements::Basic(b))`.
#[inline]
pub fn apply_basic(op: SysOp, b: Basic, input: &[u8], inout: &mut [u8]) {
    assert!(applies(op, Elements::Basic(b)), "{} is not defined on {b:?}", op.name());
    basic(op, b, input, inout)
}

fn basic(op: SysOp, b: Basic, i: &[u8], o: &mut [u8]) {
    let truth = |x: bool| u8::from(x);
    if b.is_complex() {
        return complex(op, b, i, o);
    }
    match op {
        SysOp::Replace => o.copy_from_slice(i),
        SysOp::NoOp => {}
        SysOp::Sum => per_type!(b, i, o, |x, y| wrapping_add(x, y), [I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32, I64 => i64, U64 => u64, I128 => i128, U128 => u128, F32 => f32, F64 => f64]),
        SysOp::Prod => per_type!(b, i, o, |x, y| wrapping_mul(x, y), [I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32, I64 => i64, U64 => u64, I128 => i128, U128 => u128, F32 => f32, F64 => f64]),
        SysOp::Max => per_type!(b, i, o, |x, y| if x > y { x } else { y }, [I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32, I64 => i64, U64 => u64, I128 => i128, U128 => u128, F32 => f32, F64 => f64]),
        SysOp::Min => per_type!(b, i, o, |x, y| if x < y { x } else { y }, [I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32, I64 => i64, U64 => u64, I128 => i128, U128 => u128, F32 => f32, F64 => f64]),
        SysOp::BitwiseAnd => per_type!(b, i, o, |x, y| x & y, [I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32, I64 => i64, U64 => u64, I128 => i128, U128 => u128, Bool => u8]),
        SysOp::BitwiseOr => per_type!(b, i, o, |x, y| x | y, [I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32, I64 => i64, U64 => u64, I128 => i128, U128 => u128, Bool => u8]),
        SysOp::BitwiseXor => per_type!(b, i, o, |x, y| x ^ y, [I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32, I64 => i64, U64 => u64, I128 => i128, U128 => u128, Bool => u8]),
        SysOp::LogicalAnd => per_type!(b, i, o, |x, y| from_truth(truth(is_true(x) && is_true(y)), x), [I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32, I64 => i64, U64 => u64, I128 => i128, U128 => u128, F32 => f32, F64 => f64, Bool => u8]),
        SysOp::LogicalOr => per_type!(b, i, o, |x, y| from_truth(truth(is_true(x) || is_true(y)), x), [I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32, I64 => i64, U64 => u64, I128 => i128, U128 => u128, F32 => f32, F64 => f64, Bool => u8]),
        SysOp::LogicalXor => per_type!(b, i, o, |x, y| from_truth(truth(is_true(x) != is_true(y)), x), [I8 => i8, U8 => u8, I16 => i16, U16 => u16, I32 => i32, U32 => u32, I64 => i64, U64 => u64, I128 => i128, U128 => u128, F32 => f32, F64 => f64, Bool => u8]),
        SysOp::MinLoc | SysOp::MaxLoc => unreachable!("checked by applies()"),
    }
}

/// Arithmetic that wraps for integers and is IEEE for floats.
trait Arith: Copy {
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn truthy(self) -> bool;
    fn of_truth(t: u8) -> Self;
}
macro_rules! arith_int {
    ($($t:ty),*) => {$(impl Arith for $t {
        fn add(self, o: Self) -> Self { self.wrapping_add(o) }
        fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
        fn truthy(self) -> bool { self != 0 }
        fn of_truth(t: u8) -> Self { t as $t }
    })*};
}
arith_int!(i8, u8, i16, u16, i32, u32, i64, u64, i128, u128);
macro_rules! arith_float {
    ($($t:ty),*) => {$(impl Arith for $t {
        fn add(self, o: Self) -> Self { self + o }
        fn mul(self, o: Self) -> Self { self * o }
        fn truthy(self) -> bool { self != 0.0 }
        fn of_truth(t: u8) -> Self { t as $t }
    })*};
}
arith_float!(f32, f64);

fn wrapping_add<T: Arith>(x: T, y: T) -> T {
    x.add(y)
}
fn wrapping_mul<T: Arith>(x: T, y: T) -> T {
    x.mul(y)
}
fn is_true<T: Arith>(x: T) -> bool {
    x.truthy()
}
fn from_truth<T: Arith>(t: u8, _like: T) -> T {
    T::of_truth(t)
}

/// Sum and product of complex numbers (real, imaginary), in f32 or f64.
fn complex(op: SysOp, b: Basic, i: &[u8], o: &mut [u8]) {
    macro_rules! lanes {
        ($t:ty) => {{
            const N: usize = std::mem::size_of::<$t>();
            let rd = |x: &[u8]| <$t>::from_ne_bytes(x.try_into().expect("N bytes"));
            for (x, y) in i.chunks_exact(2 * N).zip(o.chunks_exact_mut(2 * N)) {
                let (a, b) = (rd(&x[..N]), rd(&x[N..]));
                let (c, d) = (rd(&y[..N]), rd(&y[N..]));
                let (re, im) = match op {
                    SysOp::Sum => (a + c, b + d),
                    SysOp::Prod => (a * c - b * d, a * d + b * c),
                    SysOp::Replace => (a, b),
                    _ => (c, d),
                };
                y[..N].copy_from_slice(&re.to_ne_bytes());
                y[N..].copy_from_slice(&im.to_ne_bytes());
            }
        }};
    }
    match b {
        Basic::C32 => lanes!(f32),
        _ => lanes!(f64),
    }
}

/// A value read as f64 or i128 for comparison, so one routine serves every pair type.
fn value_at(b: Basic, bytes: &[u8]) -> Value {
    macro_rules! rd {
        ($t:ty) => {
            <$t>::from_ne_bytes(bytes[..std::mem::size_of::<$t>()].try_into().expect("size"))
        };
    }
    match b {
        Basic::I8 => Value::Int(rd!(i8).into()),
        Basic::U8 | Basic::Bool => Value::Int(rd!(u8).into()),
        Basic::I16 => Value::Int(rd!(i16).into()),
        Basic::U16 => Value::Int(rd!(u16).into()),
        Basic::I32 => Value::Int(rd!(i32).into()),
        Basic::U32 => Value::Int(rd!(u32).into()),
        Basic::I64 => Value::Int(rd!(i64).into()),
        Basic::U64 => Value::Int(rd!(u64).into()),
        Basic::I128 => Value::Int(rd!(i128)),
        Basic::U128 => Value::Uint(rd!(u128)),
        Basic::F32 => Value::Float(rd!(f32).into()),
        Basic::F64 => Value::Float(rd!(f64)),
        Basic::C32 | Basic::C64 => unreachable!("complex numbers are not pair values"),
    }
}

#[derive(PartialEq, PartialOrd)]
enum Value {
    Int(i128),
    Uint(u128),
    Float(f64),
}

fn pairs(op: SysOp, v: Basic, x: Basic, i: &[u8], o: &mut [u8]) {
    let (vs, xs) = (v.size(), x.size());
    for (a, b) in i.chunks_exact(vs + xs).zip(o.chunks_exact_mut(vs + xs)) {
        let (va, vb) = (value_at(v, a), value_at(v, b));
        let (xa, xb) = (value_at(x, &a[vs..]), value_at(x, &b[vs..]));
        let a_wins = match op {
            SysOp::MinLoc => va < vb || (va == vb && xa < xb),
            _ => va > vb || (va == vb && xa < xb),
        };
        if a_wins {
            b.copy_from_slice(a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_combine_function_is_made_once_per_operation_and_elements() {
        let sum = Elements::Basic(Basic::F64);
        let a = combine(SysOp::Sum, sum).expect("applies");
        let b = combine(SysOp::Sum, sum).expect("applies");
        assert!(Rc::ptr_eq(&a, &b), "the second call made another function");
        let max = combine(SysOp::Max, sum).expect("applies");
        assert!(!Rc::ptr_eq(&a, &max), "two operations share one function");
        let ints = combine(SysOp::Sum, Elements::Basic(Basic::I32)).expect("applies");
        assert!(!Rc::ptr_eq(&a, &ints), "two element types share one function");
        // And each still computes its own operation (now from the shared functions).
        let (mut x, mut y) = ([1.0f64, 5.0], [1.0f64, 5.0]);
        apply(SysOp::Sum, sum, &[2.0f64, 2.0], &mut x);
        apply(SysOp::Max, sum, &[2.0f64, 2.0], &mut y);
        assert_eq!((x, y), ([3.0, 7.0], [2.0, 5.0]));
    }

    fn apply<T: Copy>(op: SysOp, e: Elements, a: &[T], b: &mut [T]) {
        let f = combine(op, e).expect("applies");
        // SAFETY: the tests pass slices of plain numbers, whose bytes are all initialized.
        let ab = unsafe {
            std::slice::from_raw_parts(a.as_ptr() as *const u8, std::mem::size_of_val(a))
        };
        // SAFETY: as above; any bytes written back form valid numbers.
        let bb = unsafe {
            std::slice::from_raw_parts_mut(b.as_mut_ptr() as *mut u8, std::mem::size_of_val(b))
        };
        f(ab, bb);
    }

    #[test]
    fn arithmetic_wraps_and_compares_per_type() {
        let mut b = [250u8, 3];
        apply(SysOp::Sum, Elements::Basic(Basic::U8), &[10u8, 4], &mut b);
        assert_eq!(b, [4, 7]);
        let mut b = [-3i32, 9];
        apply(SysOp::Max, Elements::Basic(Basic::I32), &[-5i32, 11], &mut b);
        assert_eq!(b, [-3, 11]);
        let mut b = [1.5f64, -2.0];
        apply(SysOp::Prod, Elements::Basic(Basic::F64), &[2.0f64, 4.0], &mut b);
        assert_eq!(b, [3.0, -8.0]);
        let mut b = [0b1100u16];
        apply(SysOp::BitwiseXor, Elements::Basic(Basic::U16), &[0b1010u16], &mut b);
        assert_eq!(b, [0b0110]);
        let mut b = [0i64, 5, 0];
        apply(SysOp::LogicalOr, Elements::Basic(Basic::I64), &[0i64, 0, 7], &mut b);
        assert_eq!(b, [0, 1, 1]);
        let mut b = [1u8, 1];
        apply(SysOp::LogicalXor, Elements::Basic(Basic::Bool), &[1u8, 0], &mut b);
        assert_eq!(b, [0, 1]);
        let mut b = [u128::MAX];
        apply(SysOp::Min, Elements::Basic(Basic::U128), &[u128::MAX - 1], &mut b);
        assert_eq!(b, [u128::MAX - 1]);
    }

    #[test]
    fn minloc_and_maxloc_keep_the_smaller_index_on_ties() {
        // Packed pairs: 8-byte value then 4-byte index.
        let pack = |v: &[(f64, i32)]| -> Vec<u8> {
            v.iter().flat_map(|(a, b)| a.to_ne_bytes().into_iter().chain(b.to_ne_bytes())).collect()
        };
        let e = Elements::Pair(Basic::F64, Basic::I32);
        let f = combine(SysOp::MinLoc, e).unwrap();
        let mut o = pack(&[(1.0, 5), (2.0, 1), (3.0, 9)]);
        f(&pack(&[(1.0, 2), (2.5, 0), (0.5, 9)]), &mut o);
        assert_eq!(o, pack(&[(1.0, 2), (2.0, 1), (0.5, 9)]));
        let f = combine(SysOp::MaxLoc, e).unwrap();
        let mut o = pack(&[(1.0, 5), (2.0, 1)]);
        f(&pack(&[(1.0, 7), (2.5, 3)]), &mut o);
        assert_eq!(o, pack(&[(1.0, 5), (2.5, 3)]));
    }

    #[test]
    fn complex_sum_and_product() {
        let e = Elements::Basic(Basic::C64);
        let mut o: Vec<u8> = [1.0f64, 2.0].iter().flat_map(|x| x.to_ne_bytes()).collect();
        let i: Vec<u8> = [3.0f64, -1.0].iter().flat_map(|x| x.to_ne_bytes()).collect();
        combine(SysOp::Prod, e).unwrap()(&i, &mut o);
        let got: Vec<f64> = o.chunks(8).map(|c| f64::from_ne_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, [5.0, 5.0], "(3 - i)(1 + 2i) = 5 + 5i");
        assert!(combine(SysOp::Max, e).is_none());
    }

    /// `n` elements of `b` made from `seed`: small whole numbers for floats (no NaN, whose
    /// payloads vector and scalar code may pick differently; zeros for the logical operations),
    /// pseudo-random bytes for integers, 0 or 1 for booleans.
    fn sample(b: Basic, n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 33
        };
        let mut out = Vec::new();
        for _ in 0..n {
            match b {
                Basic::F32 => out.extend(((next() % 11) as f32 - 5.0).to_ne_bytes()),
                Basic::F64 => out.extend(((next() % 11) as f64 - 5.0).to_ne_bytes()),
                Basic::Bool => out.push((next() % 2) as u8),
                _ => out.extend((0..b.size()).map(|_| next() as u8)),
            }
        }
        out
    }

    /// The vectorised loop (with the widest registers this CPU has: AVX-512 or AVX2 where
    /// found) computes what the element-by-element one (taken for unaligned buffers) does,
    /// for every operation on every type, at lengths around the vectors' widths.
    #[test]
    fn vectorised_and_element_by_element_agree() {
        // 16-aligned storage; viewed from byte 0 (aligned) or byte 1 (unaligned).
        let view = |store: &mut Vec<u128>, bytes: &[u8], skew: usize| {
            store.clear();
            store.resize(bytes.len() / 16 + 2, 0);
            // SAFETY: the storage holds `bytes.len() + skew` bytes, plain integers.
            let all = unsafe {
                std::slice::from_raw_parts_mut(store.as_mut_ptr() as *mut u8, store.len() * 16)
            };
            all[skew..skew + bytes.len()].copy_from_slice(bytes);
        };
        let (mut a_in, mut a_out, mut u_in, mut u_out) = (vec![], vec![], vec![], vec![]);
        for op in SysOp::ALL {
            let types = Basic::ALL.into_iter().filter(|&b| !b.is_complex() && applies(op, Elements::Basic(b)));
            for b in types {
                for n in 0..=70 {
                    let (input, inout) = (sample(b, n, 3 + n as u64), sample(b, n, 7 * n as u64));
                    let len = input.len();
                    view(&mut a_in, &input, 0);
                    view(&mut a_out, &inout, 0);
                    view(&mut u_in, &input, 1);
                    view(&mut u_out, &inout, 1);
                    let bytes = |v: &mut Vec<u128>, skew: usize| {
                        // SAFETY: as in `view`.
                        unsafe { std::slice::from_raw_parts_mut((v.as_mut_ptr() as *mut u8).add(skew), len) }
                    };
                    apply_basic(op, b, bytes(&mut a_in, 0), bytes(&mut a_out, 0));
                    apply_basic(op, b, bytes(&mut u_in, 1), bytes(&mut u_out, 1));
                    assert_eq!(
                        bytes(&mut a_out, 0),
                        bytes(&mut u_out, 1),
                        "{} on {n} elements of {b:?}",
                        op.name()
                    );
                }
            }
        }
    }

    #[test]
    fn operations_that_do_not_apply_are_refused() {
        assert!(combine(SysOp::BitwiseAnd, Elements::Basic(Basic::F64)).is_none());
        assert!(combine(SysOp::Sum, Elements::Basic(Basic::Bool)).is_none());
        assert!(combine(SysOp::MinLoc, Elements::Basic(Basic::I32)).is_none());
        assert!(combine(SysOp::Sum, Elements::Pair(Basic::F64, Basic::I32)).is_none());
        assert!(combine(SysOp::Replace, Elements::Pair(Basic::F64, Basic::I32)).is_some());
    }
}
