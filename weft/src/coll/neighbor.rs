//! Neighbourhood collectives: each member exchanges only with the neighbours its process
//! topology names (`comm::process_topology::Neighbors`, in communicator ranks), not with every
//! member. Block k of the output comes from source k; the input (allgather) or its block k
//! (all-to-all) goes to destination k. A missing neighbour (MPI_PROC_NULL at a non-periodic
//! grid edge) sends and receives nothing, and its output block stays as it was.
//!
//! One round: every receive is posted, then every send started; the schedule completes when
//! all have. Messages between two members match in the order they were posted, which is what
//! makes repeated neighbours (multi-edges, a periodic dimension of size 1 or 2) land in the
//! right blocks: see [`Neighbors::cartesian_pairs`].

use super::{Members, Schedule, Span};
use crate::comm::process_topology::Neighbors;

/// The order to post receives in: source order, except that a grid's (−1, +1) pairs are
/// posted +1 first, to match the neighbours' sends, which go −1 first.
fn receive_order(nb: &Neighbors) -> impl Iterator<Item = usize> + '_ {
    let swap = nb.cartesian_pairs;
    (0..nb.sources.len()).map(move |k| if swap { k ^ 1 } else { k })
}

/// Neighbour allgather: `src` to every destination; source k's data into `dst` at
/// `recv[k]` (byte offset, length).
pub fn allgather(
    s: &mut Schedule,
    m: &Members,
    nb: &Neighbors,
    src: Span,
    dst: Span,
    recv: &[(usize, usize)],
) {
    debug_assert_eq!(recv.len(), nb.sources.len(), "a block per source");
    for k in receive_order(nb) {
        if let Some(from) = nb.sources[k] {
            s.recv(m.at(from as usize), dst.sub(recv[k].0, recv[k].1));
        }
    }
    for to in nb.destinations.iter().flatten() {
        s.send(m.at(*to as usize), src);
    }
}

/// Neighbour all-to-all: `src` at `send[k]` to destination k; source k's data into `dst` at
/// `recv[k]` (byte offsets and lengths).
pub fn alltoall(
    s: &mut Schedule,
    m: &Members,
    nb: &Neighbors,
    src: Span,
    send: &[(usize, usize)],
    dst: Span,
    recv: &[(usize, usize)],
) {
    debug_assert_eq!(recv.len(), nb.sources.len(), "a block per source");
    debug_assert_eq!(send.len(), nb.destinations.len(), "a block per destination");
    for k in receive_order(nb) {
        if let Some(from) = nb.sources[k] {
            s.recv(m.at(from as usize), dst.sub(recv[k].0, recv[k].1));
        }
    }
    for (k, to) in nb.destinations.iter().enumerate() {
        if let Some(to) = to {
            s.send(m.at(*to as usize), src.sub(send[k].0, send[k].1));
        }
    }
}

#[cfg(test)]
mod tests;
