//! Reduction operations: the predefined ones (decoded from their handles), the program's own
//! (MPI_Op_create: a C function, commutative or not, boxed behind its handle), their queries
//! and MPI_Reduce_local.

use crate::c_abi::abi::*;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles::{self, view, view_mut, CCount, Marked};
use crate::collective::UnsafeUserOperation;
use crate::collective::{Operation, Reduction, SystemOperation, UnsafeUserFunction};
use crate::datatype::TypeMap;
use std::ffi::{c_int, c_void};

/// An operation the program made.
pub(crate) struct COp {
    magic: std::cell::Cell<u64>,
    function: CFunction,
    commute: bool,
}

/// A user function: MPI_Op_create's (an `int` length) or MPI_Op_create_c's (`MPI_Count`).
#[derive(Clone, Copy)]
enum CFunction {
    Int(UnsafeUserFunction),
    Large(crate::collective::UnsafeUserFunctionLarge),
}

const OP_MAGIC: u64 = 0x5745_4654_4f50_4552; // "WEFTOPER"

impl Marked for COp {
    const MARK: u64 = OP_MAGIC;
    fn mark(&self) -> u64 {
        self.magic.get()
    }
}

/// An operation as a call uses it: predefined, or the program's with the call's datatype
/// handle (which its function receives).
pub(crate) enum AnyOp {
    System(SystemOperation),
    User(UnsafeUserOperation),
}

impl Operation for AnyOp {
    fn is_commutative(&self) -> bool {
        match self {
            AnyOp::System(o) => o.is_commutative(),
            AnyOp::User(o) => o.is_commutative(),
        }
    }
    fn reduction(&self, call: &'static str, map: &TypeMap) -> crate::Result<Reduction> {
        match self {
            AnyOp::System(o) => o.reduction(call, map),
            AnyOp::User(o) => o.reduction(call, map),
        }
    }
}

/// The predefined operation of `handle`, if it is one (MPI_REPLACE and MPI_NO_OP are for
/// one-sided accumulates only).
pub(crate) fn predefined(handle: usize) -> Option<SystemOperation> {
    Some(match handle {
        MPI_SUM => SystemOperation::sum(),
        MPI_PROD => SystemOperation::product(),
        MPI_MAX => SystemOperation::max(),
        MPI_MIN => SystemOperation::min(),
        MPI_LAND => SystemOperation::logical_and(),
        MPI_LOR => SystemOperation::logical_or(),
        MPI_LXOR => SystemOperation::logical_xor(),
        MPI_BAND => SystemOperation::bitwise_and(),
        MPI_BOR => SystemOperation::bitwise_or(),
        MPI_BXOR => SystemOperation::bitwise_xor(),
        MPI_MINLOC => SystemOperation::min_loc(),
        MPI_MAXLOC => SystemOperation::max_loc(),
        _ => return None,
    })
}

/// The operation `op` for data of `datatype` (the handle a user function receives).
pub(crate) fn operation(
    call: &'static str,
    op: *mut c_void,
    datatype: *mut c_void,
) -> Result<AnyOp, CError> {
    let value = op as usize;
    if let Some(o) = predefined(value) {
        if let Some(f) = long_double_function(value, datatype as usize) {
            // SAFETY: the C function combines `len` elements of the datatype (the C type
            // it was compiled for) at its first argument into those at its second.
            let o = unsafe { UnsafeUserOperation::new(true, f) };
            return Ok(AnyOp::User(o.with_datatype(datatype.cast())));
        }
        return Ok(AnyOp::System(o));
    }
    if let Some(u) = handles::user_object::<COp>(value) {
        // SAFETY: MPI_Op_create's contract: the function combines `len` elements of the
        // datatype at its first argument into those at its second, touching nothing else.
        let o = unsafe {
            match u.function {
                CFunction::Int(f) => UnsafeUserOperation::new(u.commute, f),
                CFunction::Large(f) => UnsafeUserOperation::new_large_count(u.commute, f),
            }
        };
        return Ok(AnyOp::User(o.with_datatype(datatype.cast())));
    }
    Err(not_an_op(call, value))
}

// The reductions on `long double` types, compiled from `csrc/long_double.c`.
unsafe extern "C" {
    fn weft_long_double_sum(a: *mut c_void, b: *mut c_void, n: *mut c_int, d: *mut Datatype);
    fn weft_long_double_prod(a: *mut c_void, b: *mut c_void, n: *mut c_int, d: *mut Datatype);
    fn weft_long_double_max(a: *mut c_void, b: *mut c_void, n: *mut c_int, d: *mut Datatype);
    fn weft_long_double_min(a: *mut c_void, b: *mut c_void, n: *mut c_int, d: *mut Datatype);
    fn weft_long_double_complex_sum(
        a: *mut c_void,
        b: *mut c_void,
        n: *mut c_int,
        d: *mut Datatype,
    );
    fn weft_long_double_complex_prod(
        a: *mut c_void,
        b: *mut c_void,
        n: *mut c_int,
        d: *mut Datatype,
    );
    fn weft_long_double_int_maxloc(a: *mut c_void, b: *mut c_void, n: *mut c_int, d: *mut Datatype);
    fn weft_long_double_int_minloc(a: *mut c_void, b: *mut c_void, n: *mut c_int, d: *mut Datatype);
}

type Datatype = crate::ffi::MPI_Datatype;

/// The C function doing predefined operation `op` on predefined datatype `datatype` when
/// that is a `long double` type (whose arithmetic only the C compiler has).
pub(crate) fn long_double_function(op: usize, datatype: usize) -> Option<UnsafeUserFunction> {
    Some(match (datatype, op) {
        (MPI_LONG_DOUBLE, MPI_SUM) => weft_long_double_sum,
        (MPI_LONG_DOUBLE, MPI_PROD) => weft_long_double_prod,
        (MPI_LONG_DOUBLE, MPI_MAX) => weft_long_double_max,
        (MPI_LONG_DOUBLE, MPI_MIN) => weft_long_double_min,
        (MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX, MPI_SUM) => {
            weft_long_double_complex_sum
        }
        (MPI_C_LONG_DOUBLE_COMPLEX | MPI_CXX_LONG_DOUBLE_COMPLEX, MPI_PROD) => {
            weft_long_double_complex_prod
        }
        (MPI_LONG_DOUBLE_INT, MPI_MAXLOC) => weft_long_double_int_maxloc,
        (MPI_LONG_DOUBLE_INT, MPI_MINLOC) => weft_long_double_int_minloc,
        _ => return None,
    })
}

/// The `long double` reductions a target reached by messages does for an origin
/// (`rma::foreign`): the code of (operation, datatype) is its place here plus 1, the same in
/// every process of the job.
const LONG_DOUBLE_OPS: [(usize, usize); 8] = [
    (MPI_SUM, MPI_LONG_DOUBLE),
    (MPI_PROD, MPI_LONG_DOUBLE),
    (MPI_MAX, MPI_LONG_DOUBLE),
    (MPI_MIN, MPI_LONG_DOUBLE),
    (MPI_SUM, MPI_C_LONG_DOUBLE_COMPLEX),
    (MPI_PROD, MPI_C_LONG_DOUBLE_COMPLEX),
    (MPI_MAXLOC, MPI_LONG_DOUBLE_INT),
    (MPI_MINLOC, MPI_LONG_DOUBLE_INT),
];

/// The code of `op` on predefined `long double` type `datatype` in [`LONG_DOUBLE_OPS`].
pub(crate) fn long_double_code(op: usize, datatype: usize) -> Option<u8> {
    let datatype = match datatype {
        MPI_CXX_LONG_DOUBLE_COMPLEX => MPI_C_LONG_DOUBLE_COMPLEX,
        d => d,
    };
    let i = LONG_DOUBLE_OPS.iter().position(|&k| k == (op, datatype))?;
    Some(i as u8 + 1)
}

/// Combines the packed elements of `input` into `inout` with the C function `f` on predefined
/// `long double` type `datatype`, one element of `n` bytes at a time (the C function steps by
/// the type's extent, and packed elements lie `n` bytes apart).
pub(crate) fn apply_long_double(
    f: UnsafeUserFunction,
    datatype: usize,
    n: usize,
    input: &[u8],
    inout: &mut [u8],
) {
    for (i, o) in input.chunks_exact(n).zip(inout.chunks_exact_mut(n)) {
        let mut one: c_int = 1;
        let mut dt = datatype as *mut c_void as _;
        // SAFETY: `f` combines one element of the predefined long double type `datatype` (its
        // data at each pointer: `n` bytes, the value then the index of a pair, as the packed
        // data lays it out) into the second; `i` and `o` hold one each.
        unsafe {
            f(
                i.as_ptr().cast_mut().cast(),
                o.as_mut_ptr().cast(),
                &mut one,
                &mut dt,
            )
        };
    }
}

/// Entry `K` of [`LONG_DOUBLE_OPS`] as a foreign combiner.
fn long_double_entry<const K: usize>(input: &[u8], inout: &mut [u8]) {
    let (op, datatype) = LONG_DOUBLE_OPS[K];
    let f = long_double_function(op, datatype).expect("every entry has its function");
    apply_long_double(f, datatype, element_bytes(datatype), input, inout);
}

/// Bytes of one packed element of predefined type `datatype`.
pub(crate) fn element_bytes(datatype: usize) -> usize {
    crate::c_abi::datatype::predefined::shape(datatype).map_or(0, |s| s.size())
}

/// Registers [`LONG_DOUBLE_OPS`] with the windows' targets (at initialization).
pub(crate) fn register_long_double() {
    use crate::rma::foreign::{register, Foreign, ForeignFn};
    static TABLE: std::sync::OnceLock<Vec<Foreign>> = std::sync::OnceLock::new();
    const FNS: [ForeignFn; 8] = [
        long_double_entry::<0>,
        long_double_entry::<1>,
        long_double_entry::<2>,
        long_double_entry::<3>,
        long_double_entry::<4>,
        long_double_entry::<5>,
        long_double_entry::<6>,
        long_double_entry::<7>,
    ];
    let table = TABLE.get_or_init(|| {
        LONG_DOUBLE_OPS
            .iter()
            .zip(FNS)
            .map(|(&(_, datatype), combine)| Foreign {
                unit: element_bytes(datatype),
                combine,
            })
            .collect()
    });
    register(table);
}

#[cold]
fn not_an_op(call: &'static str, value: usize) -> CError {
    let why = match value {
        MPI_OP_NULL => "the operation is MPI_OP_NULL".to_string(),
        MPI_REPLACE | MPI_NO_OP => {
            "MPI_REPLACE and MPI_NO_OP apply to one-sided accumulates only".to_string()
        }
        v => format!("{v:#x} is not an operation (freed, or never made)"),
    };
    CError::new(MPI_ERR_OP, call, why)
}

pub unsafe extern "C" fn op_create(
    function: Option<UnsafeUserFunction>,
    commute: c_int,
    op: *mut *mut c_void,
) -> c_int {
    make_op("MPI_Op_create", function.map(CFunction::Int), commute, op)
}
export!(Op_create, op_create);

pub unsafe extern "C" fn op_create_c(
    function: Option<crate::collective::UnsafeUserFunctionLarge>,
    commute: c_int,
    op: *mut *mut c_void,
) -> c_int {
    make_op(
        "MPI_Op_create_c",
        function.map(CFunction::Large),
        commute,
        op,
    )
}
export!(Op_create_c, op_create_c);

/// Boxes a user operation of `function` behind a handle at `op`.
fn make_op(
    call: &'static str,
    function: Option<CFunction>,
    commute: c_int,
    op: *mut *mut c_void,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let Some(function) = function else {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                "the user function is a null pointer",
            ));
        };
        if op.is_null() {
            return Err(CError::new(MPI_ERR_ARG, call, "op is a null pointer"));
        }
        let made = Box::new(COp {
            magic: std::cell::Cell::new(OP_MAGIC),
            function,
            commute: commute != 0,
        });
        // SAFETY: checked non-null; the standard's contract: a handle slot.
        unsafe { *op = Box::into_raw(made).cast() };
        Ok(())
    })
}

pub unsafe extern "C" fn op_free(op: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Op_free";
    guard(CALL, std::ptr::null_mut(), || {
        if op.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "op is a null pointer"));
        }
        // SAFETY: checked non-null; the caller's handle.
        let value = unsafe { *op } as usize;
        if predefined(value).is_some() || value == MPI_REPLACE || value == MPI_NO_OP {
            return Err(CError::new(
                MPI_ERR_OP,
                CALL,
                "a predefined operation cannot be freed",
            ));
        }
        let Some(u) = handles::user_object::<COp>(value) else {
            return Err(not_an_op(CALL, value));
        };
        u.magic.set(0);
        // SAFETY: a live user handle (checked above), boxed by MPI_Op_create. Collectives
        // copy the function out when they start, so none still needs the box.
        drop(unsafe { Box::from_raw(value as *mut COp) });
        // SAFETY: checked non-null.
        unsafe { *op = MPI_OP_NULL as *mut c_void };
        Ok(())
    })
}
export!(Op_free, op_free);

pub unsafe extern "C" fn op_commutative(op: *mut c_void, commute: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Op_commutative";
    guard(CALL, std::ptr::null_mut(), || {
        if matches!(op as usize, MPI_REPLACE | MPI_NO_OP) {
            // One-sided accumulates' own operations: the result depends on the order
            // (MPICH answers the same).
            return put_int(CALL, "commute", commute, 0);
        }
        let o = operation(CALL, op, std::ptr::null_mut())?;
        put_int(CALL, "commute", commute, o.is_commutative().into())
    })
}
export!(Op_commutative, op_commutative);

pub unsafe extern "C" fn reduce_local<C: CCount>(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: C,
    datatype: *mut c_void,
    op: *mut c_void,
) -> c_int {
    #[allow(non_snake_case)]
    let CALL = C::pick("MPI_Reduce_local", "MPI_Reduce_local_c");
    guard(CALL, std::ptr::null_mut(), || {
        let dt = handles::datatype(CALL, datatype)?;
        let o = operation(CALL, op, datatype)?;
        // SAFETY: the standard's contract: `count` elements of `datatype` at each buffer.
        let input = unsafe { view(CALL, inbuf, count, dt)? };
        // SAFETY: as above.
        let mut inout = unsafe { view_mut(CALL, inoutbuf, count, dt)? };
        crate::collective::reduce_local_into(&input, &mut inout, o);
        Ok(())
    })
}
export!(Reduce_local, reduce_local::<c_int>);
export!(Reduce_local_c, reduce_local::<i64>);
