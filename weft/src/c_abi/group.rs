//! Groups: a communicator's group, groups made from others (include, exclude, ranges, union,
//! intersection, difference), rank translation and comparison, and communicators made from
//! groups (MPI_Comm_create, MPI_Comm_create_group). A user group's handle is a pointer to a
//! boxed [`CGroup`]; MPI_GROUP_EMPTY decodes to one kept in the running state.

use crate::c_abi::abi::*;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::handles;
use crate::c_abi::state::{self, Comm};
use crate::topology::{GroupRelation, UserGroup};
use crate::traits::*;
use std::ffi::{c_int, c_void};

/// A group as C holds it.
pub(crate) struct CGroup {
    magic: std::cell::Cell<u64>,
    pub(crate) group: UserGroup,
    /// The session it derives from (MPI_Group_from_session_pset, and the groups made from
    /// such a group), whose buffer its communicators' buffered sends use.
    pub(crate) session: Option<u32>,
}

const GROUP_MAGIC: u64 = 0x5745_4654_4752_5550; // "WEFTGRUP"

impl handles::Marked for CGroup {
    const MARK: u64 = GROUP_MAGIC;
    fn mark(&self) -> u64 {
        self.magic.get()
    }
}

impl CGroup {
    pub(crate) fn new(group: UserGroup) -> CGroup {
        CGroup::of_session(group, None)
    }

    /// A group that derives from session `session` (if any).
    pub(crate) fn of_session(group: UserGroup, session: Option<u32>) -> CGroup {
        CGroup {
            magic: std::cell::Cell::new(GROUP_MAGIC),
            group,
            session,
        }
    }
}

/// The group of `handle`.
pub(crate) fn group(call: &'static str, handle: *mut c_void) -> Result<&'static CGroup, CError> {
    let value = handle as usize;
    let running = state::running().ok_or_else(|| CError::not_initialized(call))?;
    if value == MPI_GROUP_EMPTY {
        return Ok(&running.group_empty);
    }
    if let Some(g) = handles::user_object::<CGroup>(value) {
        return Ok(g);
    }
    let what = if value == MPI_GROUP_NULL {
        "MPI_GROUP_NULL".to_string()
    } else {
        format!("{value:#x}")
    };
    Err(CError::new(
        MPI_ERR_GROUP,
        call,
        format!("{what} is not a group"),
    ))
}

pub(crate) fn hand_out(
    call: &'static str,
    out: *mut *mut c_void,
    g: UserGroup,
) -> Result<(), CError> {
    hand_out_of_session(call, out, g, None)
}

/// [`hand_out`] for a group that derives from session `session` (if any).
pub(crate) fn hand_out_of_session(
    call: &'static str,
    out: *mut *mut c_void,
    g: UserGroup,
    session: Option<u32>,
) -> Result<(), CError> {
    if out.is_null() {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            "the output group is a null pointer",
        ));
    }
    let handle = if g.size() == 0 {
        MPI_GROUP_EMPTY as *mut c_void
    } else {
        Box::into_raw(Box::new(CGroup::of_session(g, session))).cast()
    };
    // SAFETY: checked non-null; the standard's contract: a handle slot.
    unsafe { *out = handle };
    Ok(())
}

/// `n` ranks at `ranks`, checked against the group's size and for repeats.
fn ranks(
    call: &'static str,
    n: c_int,
    ranks: *const c_int,
    size: c_int,
) -> Result<Vec<c_int>, CError> {
    let n = handles::count(call, n)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    if ranks.is_null() {
        return Err(CError::new(MPI_ERR_ARG, call, "ranks is a null pointer"));
    }
    // SAFETY: the standard's contract: `n` ranks at `ranks`.
    let list = unsafe { std::slice::from_raw_parts(ranks, n) }.to_vec();
    for (i, &r) in list.iter().enumerate() {
        if !(0..size).contains(&r) {
            return Err(CError::new(
                MPI_ERR_RANK,
                call,
                format!("ranks[{i}] = {r} is outside the group (size {size})"),
            ));
        }
        if list[..i].contains(&r) {
            return Err(CError::new(
                MPI_ERR_RANK,
                call,
                format!("rank {r} appears twice"),
            ));
        }
    }
    Ok(list)
}

/// The ranks `n` (first, last, stride) triplets at `ranges` name.
fn expand_ranges(
    call: &'static str,
    n: c_int,
    ranges: *const [c_int; 3],
    size: c_int,
) -> Result<Vec<c_int>, CError> {
    let n = handles::count(call, n)?;
    if n == 0 {
        return Ok(Vec::new());
    }
    if ranges.is_null() {
        return Err(CError::new(MPI_ERR_ARG, call, "ranges is a null pointer"));
    }
    // SAFETY: the standard's contract: `n` triplets at `ranges`.
    let triplets = unsafe { std::slice::from_raw_parts(ranges, n) };
    let mut out = Vec::new();
    for (i, &[first, last, stride]) in triplets.iter().enumerate() {
        if stride == 0 {
            return Err(CError::new(
                MPI_ERR_ARG,
                call,
                format!("range {i} ({first}, {last}, 0) has stride 0"),
            ));
        }
        let mut r = first;
        while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
            if !(0..size).contains(&r) {
                return Err(CError::new(
                    MPI_ERR_RANK,
                    call,
                    format!("range {i} names rank {r}, outside the group (size {size})"),
                ));
            }
            if out.contains(&r) {
                return Err(CError::new(
                    MPI_ERR_RANK,
                    call,
                    format!("rank {r} appears twice in the ranges"),
                ));
            }
            out.push(r);
            r += stride;
        }
    }
    Ok(out)
}

pub unsafe extern "C" fn comm_group(comm: *mut c_void, out: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Comm_group";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        hand_out(CALL, out, c.comm.group())
    })
}
export!(Comm_group, comm_group);

pub unsafe extern "C" fn group_size(g: *mut c_void, size: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Group_size";
    guard(CALL, std::ptr::null_mut(), || {
        put_int(CALL, "size", size, group(CALL, g)?.group.size())
    })
}
export!(Group_size, group_size);

pub unsafe extern "C" fn group_rank(g: *mut c_void, rank: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Group_rank";
    guard(CALL, std::ptr::null_mut(), || {
        let r = group(CALL, g)?.group.rank().unwrap_or(MPI_UNDEFINED);
        put_int(CALL, "rank", rank, r)
    })
}
export!(Group_rank, group_rank);

pub unsafe extern "C" fn group_incl(
    g: *mut c_void,
    n: c_int,
    list: *const c_int,
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Group_incl";
    guard(CALL, std::ptr::null_mut(), || {
        let cg = group(CALL, g)?;
        let r = ranks(CALL, n, list, cg.group.size())?;
        hand_out_of_session(CALL, out, cg.group.include(&r), cg.session)
    })
}
export!(Group_incl, group_incl);

pub unsafe extern "C" fn group_excl(
    g: *mut c_void,
    n: c_int,
    list: *const c_int,
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Group_excl";
    guard(CALL, std::ptr::null_mut(), || {
        let cg = group(CALL, g)?;
        let r = ranks(CALL, n, list, cg.group.size())?;
        hand_out_of_session(CALL, out, cg.group.exclude(&r), cg.session)
    })
}
export!(Group_excl, group_excl);

pub unsafe extern "C" fn group_range_incl(
    g: *mut c_void,
    n: c_int,
    ranges: *const [c_int; 3],
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Group_range_incl";
    guard(CALL, std::ptr::null_mut(), || {
        let cg = group(CALL, g)?;
        let r = expand_ranges(CALL, n, ranges, cg.group.size())?;
        hand_out_of_session(CALL, out, cg.group.include(&r), cg.session)
    })
}
export!(Group_range_incl, group_range_incl);

pub unsafe extern "C" fn group_range_excl(
    g: *mut c_void,
    n: c_int,
    ranges: *const [c_int; 3],
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Group_range_excl";
    guard(CALL, std::ptr::null_mut(), || {
        let cg = group(CALL, g)?;
        let r = expand_ranges(CALL, n, ranges, cg.group.size())?;
        hand_out_of_session(CALL, out, cg.group.exclude(&r), cg.session)
    })
}
export!(Group_range_excl, group_range_excl);

/// The set operations of two groups.
fn combine(
    call: &'static str,
    a: *mut c_void,
    b: *mut c_void,
    out: *mut *mut c_void,
    f: fn(&UserGroup, &UserGroup) -> UserGroup,
) -> c_int {
    guard(call, std::ptr::null_mut(), || {
        let (a, b) = (group(call, a)?, group(call, b)?);
        hand_out_of_session(call, out, f(&a.group, &b.group), a.session.or(b.session))
    })
}

pub extern "C" fn group_union(a: *mut c_void, b: *mut c_void, out: *mut *mut c_void) -> c_int {
    combine("MPI_Group_union", a, b, out, |a, b| a.union(b))
}
export!(Group_union, group_union);

pub extern "C" fn group_intersection(
    a: *mut c_void,
    b: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    combine("MPI_Group_intersection", a, b, out, |a, b| {
        a.intersection(b)
    })
}
export!(Group_intersection, group_intersection);

pub extern "C" fn group_difference(a: *mut c_void, b: *mut c_void, out: *mut *mut c_void) -> c_int {
    combine("MPI_Group_difference", a, b, out, |a, b| a.difference(b))
}
export!(Group_difference, group_difference);

pub unsafe extern "C" fn group_translate_ranks(
    a: *mut c_void,
    n: c_int,
    ranks_a: *const c_int,
    b: *mut c_void,
    ranks_b: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Group_translate_ranks";
    guard(CALL, std::ptr::null_mut(), || {
        let (ga, gb) = (&group(CALL, a)?.group, &group(CALL, b)?.group);
        let count = handles::count(CALL, n)?;
        if count == 0 {
            return Ok(());
        }
        if ranks_a.is_null() || ranks_b.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "a null array of ranks"));
        }
        // SAFETY: the standard's contract: `n` ranks in, room for `n` out.
        let (input, output) = unsafe {
            (
                std::slice::from_raw_parts(ranks_a, count),
                std::slice::from_raw_parts_mut(ranks_b, count),
            )
        };
        for (i, (&r, out)) in input.iter().zip(output.iter_mut()).enumerate() {
            *out = if r == MPI_PROC_NULL {
                MPI_PROC_NULL
            } else if (0..ga.size()).contains(&r) {
                ga.translate_rank(r, gb).unwrap_or(MPI_UNDEFINED)
            } else {
                return Err(CError::new(
                    MPI_ERR_RANK,
                    CALL,
                    format!(
                        "ranks1[{i}] = {r} is outside the group (size {})",
                        ga.size()
                    ),
                ));
            };
        }
        Ok(())
    })
}
export!(Group_translate_ranks, group_translate_ranks);

pub unsafe extern "C" fn group_compare(
    a: *mut c_void,
    b: *mut c_void,
    result: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Group_compare";
    guard(CALL, std::ptr::null_mut(), || {
        let (ga, gb) = (&group(CALL, a)?.group, &group(CALL, b)?.group);
        let r = match ga.compare(gb) {
            GroupRelation::Identical => MPI_IDENT,
            GroupRelation::Similar => MPI_SIMILAR,
            GroupRelation::Unequal => MPI_UNEQUAL,
        };
        put_int(CALL, "result", result, r)
    })
}
export!(Group_compare, group_compare);

pub unsafe extern "C" fn group_free(g: *mut *mut c_void) -> c_int {
    const CALL: &str = "MPI_Group_free";
    guard(CALL, std::ptr::null_mut(), || {
        if g.is_null() {
            return Err(CError::new(MPI_ERR_ARG, CALL, "group is a null pointer"));
        }
        // SAFETY: checked non-null.
        let handle = unsafe { *g };
        let cg = group(CALL, handle)?;
        if handle as usize != MPI_GROUP_EMPTY {
            cg.magic.set(0);
            // SAFETY: a live user handle, boxed by `hand_out`.
            drop(unsafe { Box::from_raw(handle.cast::<CGroup>()) });
        }
        // SAFETY: checked non-null.
        unsafe { *g = MPI_GROUP_NULL as *mut c_void };
        Ok(())
    })
}
export!(Group_free, group_free);

/// Hands out the communicator `made` (MPI_COMM_NULL for `None`) inheriting `parent`'s error
/// handler.
pub(crate) fn hand_out_comm(
    call: &'static str,
    out: *mut *mut c_void,
    made: Option<crate::topology::SimpleCommunicator>,
    parent: &Comm,
) -> Result<(), CError> {
    if out.is_null() {
        return Err(CError::new(MPI_ERR_ARG, call, "newcomm is a null pointer"));
    }
    let handle = match made {
        Some(c) => Box::into_raw(Box::new(Comm::new(c, parent.errhandler.get()))).cast(),
        None => MPI_COMM_NULL as *mut c_void,
    };
    // SAFETY: checked non-null.
    unsafe { *out = handle };
    Ok(())
}

pub unsafe extern "C" fn comm_create(
    comm: *mut c_void,
    g: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Comm_create";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let g = &group(CALL, g)?.group;
        hand_out_comm(CALL, out, c.comm.split_by_subgroup_collective(g), c)
    })
}
export!(Comm_create, comm_create);

pub unsafe extern "C" fn comm_create_group(
    comm: *mut c_void,
    g: *mut c_void,
    tag: c_int,
    out: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Comm_create_group";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let g = &group(CALL, g)?.group;
        crate::c_abi::p2p::check_tag(CALL, tag, false)?;
        hand_out_comm(CALL, out, c.comm.split_by_subgroup_with_tag(g, tag), c)
    })
}
export!(Comm_create_group, comm_create_group);
