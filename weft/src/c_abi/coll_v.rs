//! The blocking collectives with a count (and a displacement) per member: gatherv,
//! scatterv, allgatherv, alltoallv, alltoallw and reduce_scatter, on intra- and
//! intercommunicators, with `MPI_IN_PLACE` where the standard allows it. Each starts its
//! nonblocking form (`icoll`) and waits: these carry many blocks, so one more allocation a
//! call does not count, and the two forms cannot drift apart.
//!
//! A C buffer cut into parts is one view spanning every part (up to the farthest part's
//! end), wrapped in Weft's `Partition`; counts and displacements are in elements of the
//! buffer's datatype, as in C.

use crate::c_abi::abi::*;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::icoll;
use std::ffi::{c_int, c_void};

/// `n` values at `p`: one of the standard's argument arrays (counts, displacements,
/// datatype handles), checked non-null when it must hold any.
///
/// # Safety
/// `p` holds `n` values when `n > 0`.
pub(crate) unsafe fn array<'a, T>(
    call: &'static str,
    what: &str,
    p: *const T,
    n: usize,
) -> Result<&'a [T], CError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            format!("{what} is a null pointer"),
        ));
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// The blocking form `MPI_$name` of the nonblocking collective `icoll::$start`.
macro_rules! blocking {
    ($($name:ident, $fn:ident, $start:ident, $comm:ident, ($($arg:ident: $ty:ty),*);)*) => {$(
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $fn($($arg: $ty),*) -> c_int {
            const CALL: &str = concat!("MPI_", stringify!($name));
            guard(CALL, $comm, || {
                // SAFETY: the standard's contract for the arguments, passed on.
                unsafe { icoll::$start(CALL, $($arg),*)? }.finish();
                Ok(())
            })
        }
    )*};
}

blocking! {
    Gatherv, gatherv, gatherv, comm,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs: *const c_int, recvtype: *mut c_void, root: c_int,
         comm: *mut c_void);
    Scatterv, scatterv, scatterv, comm,
        (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int,
         sendtype: *mut c_void, recvbuf: *mut c_void, recvcount: c_int, recvtype: *mut c_void,
         root: c_int, comm: *mut c_void);
    Allgatherv, allgatherv, allgatherv, comm,
        (sendbuf: *const c_void, sendcount: c_int, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcounts: *const c_int, displs: *const c_int, recvtype: *mut c_void,
         comm: *mut c_void);
    Alltoallv, alltoallv, alltoallv, comm,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtype: *mut c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtype: *mut c_void, comm: *mut c_void);
    Alltoallw, alltoallw, alltoallw, comm,
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int,
         sendtypes: *const *mut c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
         rdispls: *const c_int, recvtypes: *const *mut c_void, comm: *mut c_void);
    Reduce_scatter, reduce_scatter, reduce_scatter, comm,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int,
         datatype: *mut c_void, op: *mut c_void, comm: *mut c_void);
}
export!(Gatherv, gatherv);
export!(Scatterv, scatterv);
export!(Allgatherv, allgatherv);
export!(Alltoallv, alltoallv);
export!(Alltoallw, alltoallw);
export!(Reduce_scatter, reduce_scatter);

// The large-count forms: counts of type MPI_Count, displacements MPI_Aint.
blocking! {
    Gatherv_c, gatherv_c, gatherv, comm,
        (sendbuf: *const c_void, sendcount: i64, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcounts: *const i64, displs: *const isize, recvtype: *mut c_void, root: c_int,
         comm: *mut c_void);
    Scatterv_c, scatterv_c, scatterv, comm,
        (sendbuf: *const c_void, sendcounts: *const i64, displs: *const isize,
         sendtype: *mut c_void, recvbuf: *mut c_void, recvcount: i64, recvtype: *mut c_void,
         root: c_int, comm: *mut c_void);
    Allgatherv_c, allgatherv_c, allgatherv, comm,
        (sendbuf: *const c_void, sendcount: i64, sendtype: *mut c_void, recvbuf: *mut c_void,
         recvcounts: *const i64, displs: *const isize, recvtype: *mut c_void,
         comm: *mut c_void);
    Alltoallv_c, alltoallv_c, alltoallv, comm,
        (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize,
         sendtype: *mut c_void, recvbuf: *mut c_void, recvcounts: *const i64,
         rdispls: *const isize, recvtype: *mut c_void, comm: *mut c_void);
    Alltoallw_c, alltoallw_c, alltoallw, comm,
        (sendbuf: *const c_void, sendcounts: *const i64, sdispls: *const isize,
         sendtypes: *const *mut c_void, recvbuf: *mut c_void, recvcounts: *const i64,
         rdispls: *const isize, recvtypes: *const *mut c_void, comm: *mut c_void);
    Reduce_scatter_c, reduce_scatter_c, reduce_scatter, comm,
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const i64,
         datatype: *mut c_void, op: *mut c_void, comm: *mut c_void);
}
export!(Gatherv_c, gatherv_c);
export!(Scatterv_c, scatterv_c);
export!(Allgatherv_c, allgatherv_c);
export!(Alltoallv_c, alltoallv_c);
export!(Alltoallw_c, alltoallw_c);
export!(Reduce_scatter_c, reduce_scatter_c);
