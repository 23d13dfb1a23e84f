//! Reduction operations in rsmpi's shape: [`SystemOperation`] (MPI's predefined operations),
//! [`UserOperation`] (a Rust closure) and [`UnsafeUserOperation`] (a C-style function), and
//! [`reduce_local_into`].
//!
//! Collectives reduce packed data. A predefined operation works on it directly; a user
//! operation gets the elements in their own layout, copied into aligned scratch memory,
//! and its results are packed back.

use crate::api::datatype::{Buffer, BufferMut, TypeMap};
pub use crate::api::dyn_buffer::{DynBuffer, DynBufferMut};
use crate::coll::algorithm::Order;
use crate::coll::op::{self, Elements, SysOp};
use crate::engine::schedule::Combine;
use crate::error::{Error, ErrorClass, Result};
use std::os::raw::{c_int, c_void};
use std::rc::Rc;

/// A reduction operation (rsmpi's `Operation`).
pub trait Operation {
    /// Whether operands may be combined in any order.
    fn is_commutative(&self) -> bool;
    /// The combine function for data of layout `map`, its element size, and whether it
    /// commutes; an error naming `call` when the operation does not apply to the layout.
    #[doc(hidden)]
    fn reduction(&self, call: &'static str, map: &TypeMap) -> Result<Reduction>;
}

/// How a collective combines its data.
#[doc(hidden)]
#[derive(Clone)]
pub struct Reduction {
    pub(crate) combine: Combine,
    /// Bytes of one element of the packed data (algorithms cut vectors at these).
    pub(crate) elem: usize,
    pub(crate) order: Order,
    /// What the operation is, for the checking mode's messages.
    pub(crate) name: &'static str,
}

impl<T: Operation + ?Sized> Operation for &T {
    fn is_commutative(&self) -> bool {
        (**self).is_commutative()
    }
    fn reduction(&self, call: &'static str, map: &TypeMap) -> Result<Reduction> {
        (**self).reduction(call, map)
    }
}

/// One of MPI's predefined operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SystemOperation(SysOp);

impl SystemOperation {
    /// Maximum (`MPI_MAX`).
    pub fn max() -> Self {
        SystemOperation(SysOp::Max)
    }
    /// Minimum (`MPI_MIN`).
    pub fn min() -> Self {
        SystemOperation(SysOp::Min)
    }
    /// Sum (`MPI_SUM`); integers wrap.
    pub fn sum() -> Self {
        SystemOperation(SysOp::Sum)
    }
    /// Product (`MPI_PROD`); integers wrap.
    pub fn product() -> Self {
        SystemOperation(SysOp::Prod)
    }
    /// Logical and (`MPI_LAND`): nonzero is true; the result is 0 or 1.
    pub fn logical_and() -> Self {
        SystemOperation(SysOp::LogicalAnd)
    }
    /// Bitwise and (`MPI_BAND`).
    pub fn bitwise_and() -> Self {
        SystemOperation(SysOp::BitwiseAnd)
    }
    /// Logical or (`MPI_LOR`).
    pub fn logical_or() -> Self {
        SystemOperation(SysOp::LogicalOr)
    }
    /// Bitwise or (`MPI_BOR`).
    pub fn bitwise_or() -> Self {
        SystemOperation(SysOp::BitwiseOr)
    }
    /// Logical exclusive or (`MPI_LXOR`).
    pub fn logical_xor() -> Self {
        SystemOperation(SysOp::LogicalXor)
    }
    /// Bitwise exclusive or (`MPI_BXOR`).
    pub fn bitwise_xor() -> Self {
        SystemOperation(SysOp::BitwiseXor)
    }
    /// Minimum and its index (`MPI_MINLOC`), on (value, index) pairs such as `(f64, i32)`;
    /// on equal values the smaller index wins. (Not in rsmpi.)
    pub fn min_loc() -> Self {
        SystemOperation(SysOp::MinLoc)
    }
    /// Maximum and its index (`MPI_MAXLOC`). (Not in rsmpi.)
    pub fn max_loc() -> Self {
        SystemOperation(SysOp::MaxLoc)
    }
    /// MPI's name of the operation.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// The operation as the layers below know it (for windows, which loom's builds leave out).
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn sys_op(&self) -> SysOp {
        self.0
    }
}

impl Operation for SystemOperation {
    fn is_commutative(&self) -> bool {
        true
    }
    fn reduction(&self, call: &'static str, map: &TypeMap) -> Result<Reduction> {
        let pairs = matches!(self.0, SysOp::MinLoc | SysOp::MaxLoc);
        let elements = map.elements(pairs).ok_or_else(|| {
            Error::new(
                ErrorClass::Op,
                call,
                if pairs {
                    format!(
                        "{} needs (value, index) pairs, such as (f64, i32); this datatype \
                         ({} bytes of data an element) is not one",
                        self.name(),
                        map.size()
                    )
                } else {
                    format!(
                        "{} applies to predefined types and layouts made of one of them; this \
                         datatype ({} bytes of data an element) mixes types (use a user \
                         operation)",
                        self.name(),
                        map.size()
                    )
                },
            )
        })?;
        let combine = op::combine(self.0, elements).ok_or_else(|| {
            Error::new(
                ErrorClass::Op,
                call,
                format!("{} is not defined for {elements:?} data", self.name()),
            )
        })?;
        let elem = match elements {
            Elements::Basic(b) => b.size(),
            Elements::Pair(v, i) => v.size() + i.size(),
        };
        Ok(Reduction {
            combine,
            elem,
            order: Order::Commutative,
            name: self.name(),
        })
    }
}

/// Memory aligned for any element type, holding `count` elements of `map` in their layout.
struct Unpacked {
    words: Vec<u128>,
    /// Where element 0 starts (past any negative block offsets).
    base: usize,
}

impl Unpacked {
    /// Scatters `packed` (whole elements of `map`) into fresh aligned memory.
    fn new(map: &TypeMap, packed: &[u8]) -> (Self, usize) {
        let count = packed.len().checked_div(map.size()).unwrap_or(0);
        let lo = map.blocks().iter().map(|b| b.0).min().unwrap_or(0).min(0);
        let hi = map
            .blocks()
            .iter()
            .map(|b| b.0 + b.1 as isize)
            .max()
            .unwrap_or(0)
            .max(map.extent() as isize);
        let bytes = count.saturating_sub(1) * map.extent() + (hi - lo) as usize;
        let mut u = Unpacked {
            words: vec![0; bytes.div_ceil(16)],
            base: (-lo) as usize,
        };
        // SAFETY: `count` elements of `map` from `base` lie inside the `bytes` allocated
        // (the lowest block at `lo`, the highest end at `hi`, elements an extent apart).
        unsafe { map.unpack(packed, u.at(), count) };
        (u, count)
    }
    fn at(&mut self) -> *mut u8 {
        // `base` is inside the allocation (or at its end when it is empty).
        (self.words.as_mut_ptr() as *mut u8).wrapping_add(self.base)
    }
}

/// A user operation's combine over packed data: the elements are unpacked into aligned memory
/// in their own layout, `f(count, input, inout)` combines them there, and the result is packed
/// back. `commute` gives the order the algorithms must keep.
fn unpacked_reduction(
    map: &TypeMap,
    commute: bool,
    name: &'static str,
    f: impl Fn(usize, *mut u8, *mut u8) + 'static,
) -> Reduction {
    let map = map.clone();
    let elem = map.size();
    Reduction {
        combine: Rc::new(move |input: &[u8], inout: &mut [u8]| {
            let (mut a, count) = Unpacked::new(&map, input);
            let (mut b, _) = Unpacked::new(&map, inout);
            let pb = b.at();
            f(count, a.at(), pb);
            let mut out = Vec::with_capacity(inout.len());
            // SAFETY: `count` elements of `map` at `pb`, in `b`'s allocation.
            unsafe { map.pack(pb, count, &mut out) };
            inout.copy_from_slice(&out);
        }),
        elem,
        order: if commute {
            Order::Commutative
        } else {
            Order::RankOrder
        },
        name,
    }
}

type UserFn<'a> = dyn Fn(DynBuffer<'_>, DynBufferMut<'_>) + Sync + 'a;

/// A reduction given by a Rust closure (rsmpi's `UserOperation`). It receives the data as
/// [`DynBuffer`]s to [`downcast`](DynBuffer::downcast).
pub struct UserOperation<'a> {
    function: Rc<UserFn<'a>>,
    commute: bool,
}

impl std::fmt::Debug for UserOperation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserOperation")
            .field("commute", &self.commute)
            .finish_non_exhaustive()
    }
}

impl<'a> UserOperation<'a> {
    /// An associative operation that must be applied in rank order.
    pub fn associative<F>(function: F) -> Self
    where
        F: Fn(DynBuffer<'_>, DynBufferMut<'_>) + Sync + 'a,
    {
        Self::new(false, function)
    }
    /// A commutative operation.
    pub fn commutative<F>(function: F) -> Self
    where
        F: Fn(DynBuffer<'_>, DynBufferMut<'_>) + Sync + 'a,
    {
        Self::new(true, function)
    }
    /// An operation; `commute` says whether it is commutative.
    pub fn new<F>(commute: bool, function: F) -> Self
    where
        F: Fn(DynBuffer<'_>, DynBufferMut<'_>) + Sync + 'a,
    {
        UserOperation {
            function: Rc::new(function),
            commute,
        }
    }
}

impl Operation for UserOperation<'_> {
    fn is_commutative(&self) -> bool {
        self.commute
    }
    fn reduction(&self, _call: &'static str, map: &TypeMap) -> Result<Reduction> {
        let f: Rc<UserFn<'_>> = self.function.clone();
        // SAFETY: only the lifetime bound is erased (same fat pointer). The closure keeps
        // the function alive itself (an Rc), and what the function borrows lives for 'a,
        // which outlives every collective that uses it: a blocking call waits before it
        // returns, and an immediate call takes the operation as `O: 'a` for a request that
        // its scope settles before 'a ends.
        let f: Rc<UserFn<'static>> = unsafe { std::mem::transmute(f) };
        let map_for_fn = map.clone();
        Ok(unpacked_reduction(
            map,
            self.commute,
            "a user operation",
            move |count, pa, pb| {
                f(
                    DynBuffer {
                        ptr: pa,
                        count,
                        map: &map_for_fn,
                    },
                    DynBufferMut {
                        ptr: pb,
                        count,
                        map: &map_for_fn,
                    },
                )
            },
        ))
    }
}

/// The C signature of a user operation: `(invec, inoutvec, len, datatype)` (rsmpi's
/// `UnsafeUserFunction`).
pub type UnsafeUserFunction = unsafe extern "C" fn(
    *mut c_void,
    *mut c_void,
    *mut c_int,
    *mut crate::api::abi_types::MPI_Datatype,
);

/// The C signature of a large-count user operation (`MPI_User_function_c`): the length is an
/// `MPI_Count`.
pub type UnsafeUserFunctionLarge = unsafe extern "C" fn(
    *mut c_void,
    *mut c_void,
    *mut i64,
    *mut crate::api::abi_types::MPI_Datatype,
);

/// A C user function of either length type.
#[derive(Clone, Copy, Debug)]
enum UserFunction {
    Int(UnsafeUserFunction),
    Large(UnsafeUserFunctionLarge),
}

/// A reduction given by a C-style function (rsmpi's `UnsafeUserOperation`). The datatype
/// argument points to a null handle unless [`with_datatype`](Self::with_datatype) names one
/// (the C ABI passes the handle the program gave the call).
#[derive(Debug)]
pub struct UnsafeUserOperation {
    function: UserFunction,
    commute: bool,
    datatype: crate::api::abi_types::MPI_Datatype,
}

impl UnsafeUserOperation {
    /// An associative operation that must be applied in rank order.
    ///
    /// # Safety
    /// `function` must combine `*len` elements of the datatype at `invec` into those at
    /// `inoutvec` and touch no other memory.
    pub unsafe fn associative(function: UnsafeUserFunction) -> Self {
        UnsafeUserOperation {
            function: UserFunction::Int(function),
            commute: false,
            datatype: std::ptr::null_mut(),
        }
    }
    /// A commutative operation.
    ///
    /// # Safety
    /// As for [`UnsafeUserOperation::associative`].
    pub unsafe fn commutative(function: UnsafeUserFunction) -> Self {
        UnsafeUserOperation {
            function: UserFunction::Int(function),
            commute: true,
            datatype: std::ptr::null_mut(),
        }
    }
    /// An operation; `commute` says whether it is commutative.
    ///
    /// # Safety
    /// As for [`UnsafeUserOperation::associative`].
    pub unsafe fn new(commute: bool, function: UnsafeUserFunction) -> Self {
        UnsafeUserOperation {
            function: UserFunction::Int(function),
            commute,
            datatype: std::ptr::null_mut(),
        }
    }

    /// An operation whose function takes its length as an `MPI_Count` (`MPI_Op_create_c`).
    ///
    /// # Safety
    /// As for [`UnsafeUserOperation::associative`].
    pub unsafe fn new_large_count(commute: bool, function: UnsafeUserFunctionLarge) -> Self {
        UnsafeUserOperation {
            function: UserFunction::Large(function),
            commute,
            datatype: std::ptr::null_mut(),
        }
    }

    /// The same operation, passing `datatype` (the handle of the data's datatype) to the
    /// function as its fourth argument.
    pub fn with_datatype(self, datatype: crate::api::abi_types::MPI_Datatype) -> Self {
        UnsafeUserOperation { datatype, ..self }
    }
}

impl Operation for UnsafeUserOperation {
    fn is_commutative(&self) -> bool {
        self.commute
    }
    fn reduction(&self, call: &'static str, map: &TypeMap) -> Result<Reduction> {
        let (function, handle) = (self.function, self.datatype);
        let name = "a C user operation";
        Ok(unpacked_reduction(
            map,
            self.commute,
            name,
            move |count, pa, pb| {
                let mut datatype = handle;
                let (pa, pb) = (pa as *mut c_void, pb as *mut c_void);
                match function {
                    UserFunction::Int(f) => {
                        let Ok(mut len) = c_int::try_from(count) else {
                            panic!(
                                "{call}: {count} elements are more than a C user function takes"
                            );
                        };
                        // SAFETY: the constructor's contract: the function combines `len`
                        // elements at `pa` (aligned scratch holding them in their layout)
                        // into those at `pb`.
                        unsafe { f(pa, pb, &mut len, &mut datatype) };
                    }
                    UserFunction::Large(f) => {
                        let mut len = count as i64;
                        // SAFETY: as above.
                        unsafe { f(pa, pb, &mut len, &mut datatype) };
                    }
                }
            },
        ))
    }
}

/// Combines `inbuf` into `inoutbuf` element by element with `op`, locally (rsmpi's
/// `reduce_local_into`; `MPI_Reduce_local`).
#[track_caller]
pub fn reduce_local_into<S, R, O>(inbuf: &S, inoutbuf: &mut R, op: O)
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
    O: Operation,
{
    crate::error::fatal(try_reduce_local_into(inbuf, inoutbuf, op))
}

fn try_reduce_local_into<S, R, O>(inbuf: &S, inoutbuf: &mut R, op: O) -> Result<()>
where
    S: ?Sized + Buffer,
    R: ?Sized + BufferMut,
    O: Operation,
{
    const CALL: &str = "reduce_local_into";
    let i = inbuf.layout();
    let o = inoutbuf.layout_mut();
    if i.data_len() != o.data_len() {
        return Err(Error::new(
            ErrorClass::Count,
            CALL,
            format!(
                "the input has {} bytes of data and the in-out buffer {}",
                i.data_len(),
                o.data_len()
            ),
        ));
    }
    let r = op.reduction(CALL, &i.map)?;
    let input = i.pack();
    let mut acc = o.pack();
    (r.combine)(&input, &mut acc);
    o.map.check_values(CALL, &acc)?;
    // SAFETY: `o` is the layout of `inoutbuf`, borrowed mutably for this call: `count`
    // writable elements of its map.
    unsafe { o.map.unpack(&acc, o.ptr as *mut u8, o.count) };
    Ok(())
}
