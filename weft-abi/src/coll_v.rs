//! The blocking collectives with a count (and a displacement) per member: gatherv,
//! scatterv, allgatherv, alltoallv, alltoallw and reduce_scatter, on intra- and
//! intercommunicators, with `MPI_IN_PLACE` where the standard allows it.
//!
//! A C buffer cut into parts is one view spanning every part (up to the farthest part's
//! end), wrapped in Weft's `Partition`; counts and displacements are in elements of the
//! buffer's datatype, as in C.

use crate::abi::*;
use crate::coll::{in_place, nothing, nothing_mut, rooted, Part};
use crate::errors::{guard, CError};
use crate::handles::{self, view, view_mut};
use crate::inter::partners;
use crate::op::operation;
use std::ffi::{c_int, c_void};
use weft::collective::{Part as WPart, PartMut as WPartMut};
use weft::datatype::{Partition, PartitionMut};
use weft::traits::*;

/// `n` ints at `p` (the standard's arrays of counts and displacements).
///
/// # Safety
/// `p` holds `n` ints when `n > 0`.
pub(crate) unsafe fn ints<'a>(
    call: &'static str,
    what: &str,
    p: *const c_int,
    n: usize,
) -> Result<&'a [c_int], CError> {
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

/// Elements from a buffer's start to the end of its farthest part; every count checked.
fn span(call: &'static str, counts: &[c_int], displs: &[c_int]) -> Result<c_int, CError> {
    let mut end: i64 = 0;
    for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
        if c < 0 {
            return Err(CError::new(
                MPI_ERR_COUNT,
                call,
                format!("the count for member {i} is {c}; it must not be negative"),
            ));
        }
        if c > 0 {
            end = end.max(i64::from(d) + i64::from(c));
        }
    }
    c_int::try_from(end).map_err(|_| {
        CError::new(
            MPI_ERR_COUNT,
            call,
            format!("the parts reach element {end}, past what an int counts"),
        )
    })
}

/// The displacements of parts laid back to back.
fn packed_displs(counts: &[c_int]) -> Vec<c_int> {
    counts
        .iter()
        .scan(0, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn gatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Gatherv";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let (at, part) = rooted(CALL, root, c)?;
        match part {
            Part::Idle => at.gather_varcount_into(&nothing()?),
            Part::Member => {
                let sdt = handles::datatype(CALL, sendtype)?;
                // SAFETY: the standard's contract: `sendcount` elements at `sendbuf`.
                at.gather_varcount_into(&unsafe { view(CALL, sendbuf, sendcount, sdt)? });
            }
            Part::Root => {
                let n = partners(c) as usize;
                // SAFETY: the standard's contract: a count and a displacement per member.
                let counts = unsafe { ints(CALL, "recvcounts", recvcounts, n)? };
                // SAFETY: as above.
                let displs = unsafe { ints(CALL, "displs", displs, n)? };
                let rdt = handles::datatype(CALL, recvtype)?;
                let len = span(CALL, counts, displs)?;
                // SAFETY: the standard's contract: every part fits the root's `recvbuf`.
                let mut out = unsafe { view_mut(CALL, recvbuf, len, rdt)? };
                let mut parts = PartitionMut::new(&mut out, counts, displs);
                if c.comm.test_inter() {
                    at.gather_varcount_into_root(&nothing()?, &mut parts);
                } else if in_place(sendbuf) {
                    at.gather_varcount_into_root_in_place(&mut parts);
                } else {
                    let sdt = handles::datatype(CALL, sendtype)?;
                    // SAFETY: as above, for the root's own block.
                    let input = unsafe { view(CALL, sendbuf, sendcount, sdt)? };
                    at.gather_varcount_into_root(&input, &mut parts);
                }
            }
        }
        Ok(())
    })
}
export!(Gatherv, gatherv);

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn scatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: *mut c_void,
    root: c_int,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Scatterv";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let (at, part) = rooted(CALL, root, c)?;
        match part {
            Part::Idle => at.scatter_varcount_into(&mut nothing_mut()?),
            Part::Member => {
                let rdt = handles::datatype(CALL, recvtype)?;
                // SAFETY: the standard's contract: room for `recvcount` elements.
                at.scatter_varcount_into(&mut unsafe { view_mut(CALL, recvbuf, recvcount, rdt)? });
            }
            Part::Root => {
                let n = partners(c) as usize;
                // SAFETY: the standard's contract: a count and a displacement per member.
                let counts = unsafe { ints(CALL, "sendcounts", sendcounts, n)? };
                // SAFETY: as above.
                let displs = unsafe { ints(CALL, "displs", displs, n)? };
                let sdt = handles::datatype(CALL, sendtype)?;
                let len = span(CALL, counts, displs)?;
                if in_place(recvbuf) && !c.comm.test_inter() {
                    // SAFETY: the standard's contract: every part lies in `sendbuf` (the
                    // root's own stays where it is).
                    let mut all = unsafe { view_mut(CALL, sendbuf.cast_mut(), len, sdt)? };
                    at.scatter_varcount_into_root_in_place(&mut PartitionMut::new(
                        &mut all, counts, displs,
                    ));
                    return Ok(());
                }
                // SAFETY: the standard's contract: every part lies in `sendbuf`.
                let input = unsafe { view(CALL, sendbuf, len, sdt)? };
                let parts = Partition::new(&input, counts, displs);
                if c.comm.test_inter() {
                    at.scatter_varcount_into_root(&parts, &mut nothing_mut()?);
                } else {
                    let rdt = handles::datatype(CALL, recvtype)?;
                    // SAFETY: the standard's contract: room for `recvcount` elements.
                    let mut out = unsafe { view_mut(CALL, recvbuf, recvcount, rdt)? };
                    at.scatter_varcount_into_root(&parts, &mut out);
                }
            }
        }
        Ok(())
    })
}
export!(Scatterv, scatterv);

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: *mut c_void,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Allgatherv";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let n = partners(c) as usize;
        // SAFETY: the standard's contract: a count and a displacement per member.
        let counts = unsafe { ints(CALL, "recvcounts", recvcounts, n)? };
        // SAFETY: as above.
        let displs = unsafe { ints(CALL, "displs", displs, n)? };
        let rdt = handles::datatype(CALL, recvtype)?;
        let len = span(CALL, counts, displs)?;
        // SAFETY: the standard's contract: every part fits `recvbuf`.
        let mut out = unsafe { view_mut(CALL, recvbuf, len, rdt)? };
        let mut parts = PartitionMut::new(&mut out, counts, displs);
        if in_place(sendbuf) {
            c.comm.all_gather_varcount_in_place(&mut parts);
        } else {
            let sdt = handles::datatype(CALL, sendtype)?;
            // SAFETY: the standard's contract: `sendcount` elements at `sendbuf`.
            let input = unsafe { view(CALL, sendbuf, sendcount, sdt)? };
            c.comm.all_gather_varcount_into(&input, &mut parts);
        }
        Ok(())
    })
}
export!(Allgatherv, allgatherv);

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: *mut c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: *mut c_void,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Alltoallv";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let n = partners(c) as usize;
        // SAFETY: the standard's contract: a count and a displacement per member.
        let rcounts = unsafe { ints(CALL, "recvcounts", recvcounts, n)? };
        // SAFETY: as above.
        let rdispls = unsafe { ints(CALL, "rdispls", rdispls, n)? };
        let rdt = handles::datatype(CALL, recvtype)?;
        let rlen = span(CALL, rcounts, rdispls)?;
        // SAFETY: the standard's contract: every part fits `recvbuf`.
        let mut out = unsafe { view_mut(CALL, recvbuf, rlen, rdt)? };
        let mut rparts = PartitionMut::new(&mut out, rcounts, rdispls);
        if in_place(sendbuf) {
            c.comm.all_to_all_varcount_in_place(&mut rparts);
            return Ok(());
        }
        // SAFETY: as above, for the send side.
        let scounts = unsafe { ints(CALL, "sendcounts", sendcounts, n)? };
        // SAFETY: as above.
        let sdispls = unsafe { ints(CALL, "sdispls", sdispls, n)? };
        let sdt = handles::datatype(CALL, sendtype)?;
        let slen = span(CALL, scounts, sdispls)?;
        // SAFETY: the standard's contract: every part lies in `sendbuf`.
        let input = unsafe { view(CALL, sendbuf, slen, sdt)? };
        c.comm
            .all_to_all_varcount_into(&Partition::new(&input, scounts, sdispls), &mut rparts);
        Ok(())
    })
}
export!(Alltoallv, alltoallv);

/// The `n` datatype handles at `p`.
///
/// # Safety
/// `p` holds `n` handles when `n > 0`.
pub(crate) unsafe fn type_handles<'a>(
    call: &'static str,
    what: &str,
    p: *const *mut c_void,
    n: usize,
) -> Result<&'a [*mut c_void], CError> {
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

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn alltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const *mut c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const *mut c_void,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Alltoallw";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let n = partners(c) as usize;
        // SAFETY: the standard's contract: a count, a byte displacement and a datatype per
        // member, for each side.
        let (rcounts, rdispls, rtypes) = unsafe {
            (
                ints(CALL, "recvcounts", recvcounts, n)?,
                ints(CALL, "rdispls", rdispls, n)?,
                type_handles(CALL, "recvtypes", recvtypes, n)?,
            )
        };
        let mut outs = Vec::with_capacity(n);
        for i in 0..n {
            let dt = handles::datatype(CALL, rtypes[i])?;
            // SAFETY: the standard's contract: part i lies at its byte displacement.
            let at = unsafe { recvbuf.cast::<u8>().offset(rdispls[i] as isize) };
            // SAFETY: as above: room for `rcounts[i]` elements there.
            outs.push(unsafe { view_mut(CALL, at.cast(), rcounts[i], dt)? });
        }
        let mut rparts: Vec<WPartMut<'_>> = outs.iter_mut().map(WPartMut::new).collect();
        if in_place(sendbuf) {
            c.comm.all_to_all_w_in_place(&mut rparts);
            return Ok(());
        }
        // SAFETY: as above, for the send side.
        let (scounts, sdispls, stypes) = unsafe {
            (
                ints(CALL, "sendcounts", sendcounts, n)?,
                ints(CALL, "sdispls", sdispls, n)?,
                type_handles(CALL, "sendtypes", sendtypes, n)?,
            )
        };
        let mut ins = Vec::with_capacity(n);
        for i in 0..n {
            let dt = handles::datatype(CALL, stypes[i])?;
            // SAFETY: the standard's contract: part i lies at its byte displacement.
            let at = unsafe { sendbuf.cast::<u8>().offset(sdispls[i] as isize) };
            // SAFETY: as above: `scounts[i]` elements there.
            ins.push(unsafe { view(CALL, at.cast(), scounts[i], dt)? });
        }
        let sparts: Vec<WPart<'_>> = ins.iter().map(WPart::new).collect();
        c.comm.all_to_all_w_into(&sparts, &mut rparts);
        Ok(())
    })
}
export!(Alltoallw, alltoallw);

unsafe extern "C" fn reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: *mut c_void,
    op: *mut c_void,
    comm: *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Reduce_scatter";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let dt = handles::datatype(CALL, datatype)?;
        let o = operation(CALL, op, datatype)?;
        let n = c.comm.size() as usize;
        // SAFETY: the standard's contract: a count per member.
        let counts = unsafe { ints(CALL, "recvcounts", recvcounts, n)? };
        let mine = counts[c.comm.rank() as usize];
        if c.comm.test_inter() {
            // The input goes to the other group, cut by its counts: ask them.
            let mut theirs = vec![0; partners(c) as usize];
            c.comm.all_gather_into(&mine, &mut theirs[..]);
            let displs = packed_displs(&theirs);
            let total = span(CALL, &theirs, &displs)?;
            // SAFETY: the standard's contract: the input at `sendbuf` (as many elements as
            // this group's counts add up to, which the other group's do too), room for this
            // member's part at `recvbuf`.
            let input = unsafe { view(CALL, sendbuf, total, dt)? };
            // SAFETY: as above.
            let mut out = unsafe { view_mut(CALL, recvbuf, mine, dt)? };
            c.comm.reduce_scatter_varcount_into(
                &Partition::new(&input, theirs, displs),
                &mut out,
                o,
            );
            return Ok(());
        }
        let displs = packed_displs(counts);
        let total = span(CALL, counts, &displs)?;
        if in_place(sendbuf) {
            // SAFETY: the standard's contract: in place, the input (every part) is at
            // `recvbuf`, and this member's result goes to its start.
            let mut all = unsafe { view_mut(CALL, recvbuf, total, dt)? };
            c.comm.reduce_scatter_varcount_in_place(
                &mut PartitionMut::new(&mut all, counts, displs),
                o,
            );
            return Ok(());
        }
        // SAFETY: the standard's contract: every part at `sendbuf`, room for this member's
        // at `recvbuf`.
        let input = unsafe { view(CALL, sendbuf, total, dt)? };
        // SAFETY: as above.
        let mut out = unsafe { view_mut(CALL, recvbuf, mine, dt)? };
        c.comm
            .reduce_scatter_varcount_into(&Partition::new(&input, counts, displs), &mut out, o);
        Ok(())
    })
}
export!(Reduce_scatter, reduce_scatter);
