//! Process topologies (MPI 4.1 §8): Cartesian grids, graphs and distributed graphs, their
//! constructors and queries, MPI_Dims_create and MPI_Topo_test. C holds a communicator
//! with a topology as any other (`Comm` over a `SimpleCommunicator`); the topology's calls
//! reach Weft's typed communicators through `as_cartesian`, `as_graph` and
//! `as_distributed_graph`. Weft never reorders ranks (MPI allows either).

use crate::c_abi::abi::*;
use crate::c_abi::coll_v::array;
use crate::c_abi::env::put_int;
use crate::c_abi::errors::{guard, CError};
use crate::c_abi::group::hand_out_comm;
use crate::c_abi::handles;
use crate::c_abi::state::Comm;
use crate::topology::{
    CartesianCommunicator, DistributedGraphCommunicator, GraphCommunicator, Topology,
};
use crate::traits::*;
use std::ffi::{c_int, c_void};

/// `n` ints written at `p`.
///
/// # Safety
/// `p` has room for `values.len()` ints when there are any.
unsafe fn put_ints(
    call: &'static str,
    what: &str,
    p: *mut c_int,
    values: &[c_int],
) -> Result<(), CError> {
    if values.is_empty() {
        return Ok(());
    }
    if p.is_null() {
        return Err(CError::new(
            MPI_ERR_ARG,
            call,
            format!("{what} is a null pointer"),
        ));
    }
    // SAFETY: the caller's promise.
    unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), p, values.len()) };
    Ok(())
}

/// A count argument (dimensions, nodes, degrees) checked not negative.
fn size_arg(call: &'static str, what: &str, n: c_int) -> Result<usize, CError> {
    usize::try_from(n).map_err(|_| {
        CError::new(
            MPI_ERR_ARG,
            call,
            format!("{what} is {n}; it must not be negative"),
        )
    })
}

fn no_topology(call: &'static str, what: &str) -> CError {
    CError::new(
        MPI_ERR_TOPOLOGY,
        call,
        format!("the communicator has no {what} topology"),
    )
}

fn cartesian(
    call: &'static str,
    comm: *mut c_void,
) -> Result<&'static CartesianCommunicator, CError> {
    handles::comm(call, comm)?
        .comm
        .as_cartesian()
        .ok_or_else(|| no_topology(call, "Cartesian"))
}

fn graph(call: &'static str, comm: *mut c_void) -> Result<&'static GraphCommunicator, CError> {
    handles::comm(call, comm)?
        .comm
        .as_graph()
        .ok_or_else(|| no_topology(call, "graph"))
}

fn distributed_graph(
    call: &'static str,
    comm: *mut c_void,
) -> Result<&'static DistributedGraphCommunicator, CError> {
    handles::comm(call, comm)?
        .comm
        .as_distributed_graph()
        .ok_or_else(|| no_topology(call, "distributed graph"))
}

/// Rank `r` as C names it (MPI_PROC_NULL for none).
fn or_proc_null(r: Option<c_int>) -> c_int {
    r.unwrap_or(MPI_PROC_NULL)
}

pub unsafe extern "C" fn dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Dims_create";
    guard(CALL, std::ptr::null_mut(), || {
        let n = size_arg(CALL, "ndims", ndims)?;
        // SAFETY: the standard's contract: `ndims` ints at `dims`.
        let mut d = unsafe { array(CALL, "dims", dims, n)? }.to_vec();
        crate::topology::dims_create(nnodes, &mut d).map_err(CError::from_weft)?;
        // SAFETY: as above.
        unsafe { put_ints(CALL, "dims", dims, &d) }
    })
}
export!(Dims_create, dims_create);

/// The grid arguments of MPI_Cart_create and MPI_Cart_map.
///
/// # Safety
/// `dims` and `periods` hold `ndims` ints each.
unsafe fn grid_args(
    call: &'static str,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
) -> Result<(Vec<c_int>, Vec<bool>), CError> {
    let n = size_arg(call, "ndims", ndims)?;
    // SAFETY: the caller's promise.
    let d = unsafe { array(call, "dims", dims, n)? }.to_vec();
    // SAFETY: as above.
    let p = unsafe { array(call, "periods", periods, n)? };
    Ok((d, p.iter().map(|&x| x != 0).collect()))
}

pub unsafe extern "C" fn cart_create(
    comm_old: *mut c_void,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    reorder: c_int,
    comm_cart: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Cart_create";
    guard(CALL, comm_old, || {
        let c = handles::comm(CALL, comm_old)?;
        // SAFETY: the standard's contract: `ndims` entries in each.
        let (d, p) = unsafe { grid_args(CALL, ndims, dims, periods)? };
        let made = c
            .comm
            .try_create_cartesian_communicator(&d, &p, reorder != 0)
            .map_err(CError::from_weft)?;
        hand_out_comm(CALL, comm_cart, made.map(Into::into), c)
    })
}
export!(Cart_create, cart_create);

pub unsafe extern "C" fn cart_map(
    comm: *mut c_void,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Cart_map";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        // SAFETY: the standard's contract: `ndims` entries in each.
        let (d, p) = unsafe { grid_args(CALL, ndims, dims, periods)? };
        let r = c.comm.cartesian_map(&d, &p);
        put_int(CALL, "newrank", newrank, r.unwrap_or(MPI_UNDEFINED))
    })
}
export!(Cart_map, cart_map);

pub unsafe extern "C" fn cartdim_get(comm: *mut c_void, ndims: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Cartdim_get";
    guard(CALL, comm, || {
        put_int(
            CALL,
            "ndims",
            ndims,
            cartesian(CALL, comm)?.num_dimensions(),
        )
    })
}
export!(Cartdim_get, cartdim_get);

pub unsafe extern "C" fn cart_get(
    comm: *mut c_void,
    maxdims: c_int,
    dims: *mut c_int,
    periods: *mut c_int,
    coords: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Cart_get";
    guard(CALL, comm, || {
        let layout = cartesian(CALL, comm)?.get_layout();
        let n = layout.dims.len().min(size_arg(CALL, "maxdims", maxdims)?);
        let periods_int: Vec<c_int> = layout.periods.iter().map(|&p| p.into()).collect();
        // SAFETY: the standard's contract: `maxdims` ints at each.
        unsafe {
            put_ints(CALL, "dims", dims, &layout.dims[..n])?;
            put_ints(CALL, "periods", periods, &periods_int[..n])?;
            put_ints(CALL, "coords", coords, &layout.coords[..n])
        }
    })
}
export!(Cart_get, cart_get);

pub unsafe extern "C" fn cart_rank(
    comm: *mut c_void,
    coords: *const c_int,
    rank: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Cart_rank";
    guard(CALL, comm, || {
        let cart = cartesian(CALL, comm)?;
        let n = cart.num_dimensions() as usize;
        // SAFETY: the standard's contract: a coordinate per dimension.
        let co = unsafe { array(CALL, "coords", coords, n)? };
        let r = cart
            .try_coordinates_to_rank(co)
            .map_err(CError::from_weft)?;
        put_int(CALL, "rank", rank, r)
    })
}
export!(Cart_rank, cart_rank);

pub unsafe extern "C" fn cart_coords(
    comm: *mut c_void,
    rank: c_int,
    maxdims: c_int,
    coords: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Cart_coords";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let cart = cartesian(CALL, comm)?;
        crate::c_abi::p2p::check_rank(CALL, "", rank, c, false)?;
        if rank == MPI_PROC_NULL {
            return Err(CError::new(MPI_ERR_RANK, CALL, "the rank is MPI_PROC_NULL"));
        }
        let co = cart.rank_to_coordinates(rank);
        let n = co.len().min(size_arg(CALL, "maxdims", maxdims)?);
        // SAFETY: the standard's contract: `maxdims` ints at `coords`.
        unsafe { put_ints(CALL, "coords", coords, &co[..n]) }
    })
}
export!(Cart_coords, cart_coords);

pub unsafe extern "C" fn cart_shift(
    comm: *mut c_void,
    direction: c_int,
    disp: c_int,
    rank_source: *mut c_int,
    rank_dest: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Cart_shift";
    guard(CALL, comm, || {
        let cart = cartesian(CALL, comm)?;
        let n = cart.num_dimensions();
        if !(0..n).contains(&direction) {
            return Err(CError::new(
                MPI_ERR_ARG,
                CALL,
                format!("the direction {direction} is not a dimension of the grid (it has {n})"),
            ));
        }
        let (source, dest) = cart.shift(direction, disp);
        put_int(CALL, "rank_source", rank_source, or_proc_null(source))?;
        put_int(CALL, "rank_dest", rank_dest, or_proc_null(dest))
    })
}
export!(Cart_shift, cart_shift);

pub unsafe extern "C" fn cart_sub(
    comm: *mut c_void,
    remain_dims: *const c_int,
    newcomm: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Cart_sub";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        let cart = cartesian(CALL, comm)?;
        let n = cart.num_dimensions() as usize;
        // SAFETY: the standard's contract: an entry per dimension.
        let keep: Vec<bool> = unsafe { array(CALL, "remain_dims", remain_dims, n)? }
            .iter()
            .map(|&x| x != 0)
            .collect();
        let sub = cart.try_subgroup(&keep).map_err(CError::from_weft)?;
        hand_out_comm(CALL, newcomm, Some(sub.into()), c)
    })
}
export!(Cart_sub, cart_sub);

/// The graph arguments of MPI_Graph_create and MPI_Graph_map.
///
/// # Safety
/// `index` holds `nnodes` ints, and `edges` as many as its last entry says.
unsafe fn graph_args(
    call: &'static str,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
) -> Result<(Vec<c_int>, Vec<c_int>), CError> {
    let n = size_arg(call, "nnodes", nnodes)?;
    // SAFETY: the caller's promise.
    let index = unsafe { array(call, "index", index, n)? }.to_vec();
    let m = size_arg(
        call,
        "the last entry of index",
        index.last().copied().unwrap_or(0),
    )?;
    // SAFETY: as above.
    let edges = unsafe { array(call, "edges", edges, m)? }.to_vec();
    Ok((index, edges))
}

pub unsafe extern "C" fn graph_create(
    comm_old: *mut c_void,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    reorder: c_int,
    comm_graph: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Graph_create";
    guard(CALL, comm_old, || {
        let c = handles::comm(CALL, comm_old)?;
        // SAFETY: the standard's contract for the graph's arrays.
        let (index, edges) = unsafe { graph_args(CALL, nnodes, index, edges)? };
        let made = c
            .comm
            .create_graph_communicator(&index, &edges, reorder != 0);
        hand_out_comm(CALL, comm_graph, made.map(Into::into), c)
    })
}
export!(Graph_create, graph_create);

pub unsafe extern "C" fn graph_map(
    comm: *mut c_void,
    nnodes: c_int,
    index: *const c_int,
    edges: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Graph_map";
    guard(CALL, comm, || {
        let c = handles::comm(CALL, comm)?;
        // SAFETY: the standard's contract for the graph's arrays.
        let (index, edges) = unsafe { graph_args(CALL, nnodes, index, edges)? };
        let r = c.comm.graph_map(&index, &edges);
        put_int(CALL, "newrank", newrank, r.unwrap_or(MPI_UNDEFINED))
    })
}
export!(Graph_map, graph_map);

pub unsafe extern "C" fn graphdims_get(
    comm: *mut c_void,
    nnodes: *mut c_int,
    nedges: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Graphdims_get";
    guard(CALL, comm, || {
        let (n, e) = graph(CALL, comm)?.graph_dims();
        put_int(CALL, "nnodes", nnodes, n)?;
        put_int(CALL, "nedges", nedges, e)
    })
}
export!(Graphdims_get, graphdims_get);

pub unsafe extern "C" fn graph_get(
    comm: *mut c_void,
    maxindex: c_int,
    maxedges: c_int,
    index: *mut c_int,
    edges: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Graph_get";
    guard(CALL, comm, || {
        let (i, e) = graph(CALL, comm)?.graph_layout();
        let ni = i.len().min(size_arg(CALL, "maxindex", maxindex)?);
        let ne = e.len().min(size_arg(CALL, "maxedges", maxedges)?);
        // SAFETY: the standard's contract: `maxindex` and `maxedges` ints.
        unsafe {
            put_ints(CALL, "index", index, &i[..ni])?;
            put_ints(CALL, "edges", edges, &e[..ne])
        }
    })
}
export!(Graph_get, graph_get);

/// The neighbours of `rank` in a graph communicator, the rank checked.
fn graph_neighbors(
    call: &'static str,
    comm: *mut c_void,
    rank: c_int,
) -> Result<Vec<c_int>, CError> {
    let g = graph(call, comm)?;
    let size = g.size();
    if !(0..size).contains(&rank) {
        return Err(CError::new(
            MPI_ERR_RANK,
            call,
            format!("the rank {rank} is outside the graph (of {size} nodes)"),
        ));
    }
    Ok(g.neighbors(rank))
}

pub unsafe extern "C" fn graph_neighbors_count(
    comm: *mut c_void,
    rank: c_int,
    nneighbors: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Graph_neighbors_count";
    guard(CALL, comm, || {
        let n = graph_neighbors(CALL, comm, rank)?.len() as c_int;
        put_int(CALL, "nneighbors", nneighbors, n)
    })
}
export!(Graph_neighbors_count, graph_neighbors_count);

pub unsafe extern "C" fn graph_neighbors_fn(
    comm: *mut c_void,
    rank: c_int,
    maxneighbors: c_int,
    neighbors: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Graph_neighbors";
    guard(CALL, comm, || {
        let all = graph_neighbors(CALL, comm, rank)?;
        let n = all.len().min(size_arg(CALL, "maxneighbors", maxneighbors)?);
        // SAFETY: the standard's contract: `maxneighbors` ints at `neighbors`.
        unsafe { put_ints(CALL, "neighbors", neighbors, &all[..n]) }
    })
}
export!(Graph_neighbors, graph_neighbors_fn);

pub unsafe extern "C" fn topo_test(comm: *mut c_void, status: *mut c_int) -> c_int {
    const CALL: &str = "MPI_Topo_test";
    guard(CALL, comm, || {
        let t = match handles::comm(CALL, comm)?.comm.topology() {
            Topology::Cartesian => MPI_CART,
            Topology::Graph => MPI_GRAPH,
            Topology::DistributedGraph => MPI_DIST_GRAPH,
            Topology::Undefined => MPI_UNDEFINED,
        };
        put_int(CALL, "status", status, t)
    })
}
export!(Topo_test, topo_test);

/// Weights as C passes them: `None` for MPI_UNWEIGHTED, none for MPI_WEIGHTS_EMPTY.
///
/// # Safety
/// Unless one of those two, `w` holds `n` ints.
unsafe fn weights<'a>(
    call: &'static str,
    what: &str,
    w: *const c_int,
    n: usize,
) -> Result<Option<&'a [c_int]>, CError> {
    match w as usize {
        MPI_UNWEIGHTED => Ok(None),
        MPI_WEIGHTS_EMPTY => Ok(Some(&[])),
        // SAFETY: the caller's promise.
        _ => Ok(Some(unsafe { array(call, what, w, n)? })),
    }
}

/// The communicator of a distributed-graph constructor, its info checked.
fn dist_parent(
    call: &'static str,
    comm: *mut c_void,
    info: *mut c_void,
) -> Result<&'static Comm, CError> {
    let c = handles::comm(call, comm)?;
    if info as usize != MPI_INFO_NULL {
        crate::c_abi::info::info(call, info)?;
    }
    Ok(c)
}

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn dist_graph_create_adjacent(
    comm_old: *mut c_void,
    indegree: c_int,
    sources: *const c_int,
    sourceweights: *const c_int,
    outdegree: c_int,
    destinations: *const c_int,
    destweights: *const c_int,
    info: *mut c_void,
    reorder: c_int,
    comm_dist_graph: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Dist_graph_create_adjacent";
    guard(CALL, comm_old, || {
        let c = dist_parent(CALL, comm_old, info)?;
        let (ni, no) = (
            size_arg(CALL, "indegree", indegree)?,
            size_arg(CALL, "outdegree", outdegree)?,
        );
        // SAFETY: the standard's contract: `indegree` and `outdegree` entries.
        let made = unsafe {
            c.comm.create_distributed_graph_communicator_adjacent(
                array(CALL, "sources", sources, ni)?,
                weights(CALL, "sourceweights", sourceweights, ni)?,
                array(CALL, "destinations", destinations, no)?,
                weights(CALL, "destweights", destweights, no)?,
                reorder != 0,
            )
        };
        hand_out_comm(CALL, comm_dist_graph, Some(made.into()), c)
    })
}
export!(Dist_graph_create_adjacent, dist_graph_create_adjacent);

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn dist_graph_create(
    comm_old: *mut c_void,
    n: c_int,
    sources: *const c_int,
    degrees: *const c_int,
    destinations: *const c_int,
    weights_in: *const c_int,
    info: *mut c_void,
    reorder: c_int,
    comm_dist_graph: *mut *mut c_void,
) -> c_int {
    const CALL: &str = "MPI_Dist_graph_create";
    guard(CALL, comm_old, || {
        let c = dist_parent(CALL, comm_old, info)?;
        let n = size_arg(CALL, "n", n)?;
        // SAFETY: the standard's contract: `n` sources and degrees, as many destinations
        // (and weights) as the degrees add up to.
        let made = unsafe {
            let s = array(CALL, "sources", sources, n)?;
            let d = array(CALL, "degrees", degrees, n)?;
            let m = d.iter().try_fold(0usize, |acc, &k| {
                Ok::<_, CError>(acc + size_arg(CALL, "a degree", k)?)
            })?;
            c.comm.create_distributed_graph_communicator(
                s,
                d,
                array(CALL, "destinations", destinations, m)?,
                weights(CALL, "weights", weights_in, m)?,
                reorder != 0,
            )
        };
        hand_out_comm(CALL, comm_dist_graph, Some(made.into()), c)
    })
}
export!(Dist_graph_create, dist_graph_create);

pub unsafe extern "C" fn dist_graph_neighbors_count(
    comm: *mut c_void,
    indegree: *mut c_int,
    outdegree: *mut c_int,
    weighted: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Dist_graph_neighbors_count";
    guard(CALL, comm, || {
        let (i, o, w) = distributed_graph(CALL, comm)?.neighbors_count();
        put_int(CALL, "indegree", indegree, i)?;
        put_int(CALL, "outdegree", outdegree, o)?;
        put_int(CALL, "weighted", weighted, w.into())
    })
}
export!(Dist_graph_neighbors_count, dist_graph_neighbors_count);

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn dist_graph_neighbors(
    comm: *mut c_void,
    maxindegree: c_int,
    sources: *mut c_int,
    sourceweights: *mut c_int,
    maxoutdegree: c_int,
    destinations: *mut c_int,
    destweights: *mut c_int,
) -> c_int {
    const CALL: &str = "MPI_Dist_graph_neighbors";
    guard(CALL, comm, || {
        let g = distributed_graph(CALL, comm)?.neighbors();
        let ni = g
            .sources
            .len()
            .min(size_arg(CALL, "maxindegree", maxindegree)?);
        let no = g
            .destinations
            .len()
            .min(size_arg(CALL, "maxoutdegree", maxoutdegree)?);
        let unweighted = |p: *mut c_int| matches!(p as usize, MPI_UNWEIGHTED | MPI_WEIGHTS_EMPTY);
        // SAFETY: the standard's contract: room for `maxindegree` and `maxoutdegree` entries
        // (weights unless MPI_UNWEIGHTED).
        unsafe {
            put_ints(CALL, "sources", sources, &g.sources[..ni])?;
            put_ints(CALL, "destinations", destinations, &g.destinations[..no])?;
            if let (Some(w), false) = (&g.source_weights, unweighted(sourceweights)) {
                put_ints(CALL, "sourceweights", sourceweights, &w[..ni])?;
            }
            if let (Some(w), false) = (&g.destination_weights, unweighted(destweights)) {
                put_ints(CALL, "destweights", destweights, &w[..no])?;
            }
        }
        Ok(())
    })
}
export!(Dist_graph_neighbors, dist_graph_neighbors);
