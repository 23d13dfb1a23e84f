//! The sans-IO test bed: several engines in one thread over an in-memory fake fabric with
//! bounded queues, stepped by hand. A step bound turns a livelock or deadlock into a failure.
//! Used by the engine's tests and by the collective algorithms' tests.

use super::request::Handle;
use super::{Config, Engine};
use crate::fabric::{Fabric, Header, PullError};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

/// Packets in flight to each rank; each queue holds at most `capacity` packets.
pub(crate) struct FakeNet {
    queues: Vec<VecDeque<(Header, Vec<u8>)>>,
    capacity: usize,
}

pub(crate) struct FakeFabric {
    rank: u32,
    net: Rc<RefCell<FakeNet>>,
    max_payload: usize,
    single_copy: bool,
    /// Read one-packet eager payloads and active-message parts and replies straight into
    /// place too, over two polls, as TCP does (rendezvous data always is).
    place_eager: bool,
    /// A payload placed in part: its second half goes in at the next poll. Meanwhile later
    /// packets from its source wait (a byte stream keeps them behind it) while other
    /// sources' packets are delivered.
    placing: Option<(Header, Vec<u8>)>,
}

impl Fabric for FakeFabric {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.net.borrow().queues.len() as u32
    }
    fn max_payload(&self, _peer: u32) -> usize {
        self.max_payload
    }
    fn try_send(&mut self, peer: u32, hdr: &Header, payload: &[u8]) -> bool {
        assert!(
            payload.len() <= self.max_payload,
            "packet larger than max_payload"
        );
        let mut net = self.net.borrow_mut();
        let cap = net.capacity;
        let q = &mut net.queues[peer as usize];
        if q.len() >= cap {
            return false;
        }
        q.push_back((*hdr, payload.to_vec()));
        true
    }
    fn poll<S: crate::fabric::Sink>(&mut self, sink: &mut S) -> usize {
        use crate::fabric::PacketKind;
        let mut delivered = 0;
        if let Some((h, p)) = self.placing.take() {
            let dst = sink
                .place(&h, p.len())
                .expect("a place once given stays given until the payload is in");
            let half = p.len() / 2;
            dst[half..].copy_from_slice(&p[half..]);
            sink.placed(&h, p.len());
            delivered += 1;
        }
        let batch: Vec<_> = self.net.borrow_mut().queues[self.rank as usize]
            .drain(..)
            .collect();
        let mut held = Vec::new();
        for (h, p) in batch {
            if self.placing.as_ref().is_some_and(|(ph, _)| ph.src == h.src) {
                held.push((h, p));
                continue;
            }
            let placeable = h.kind == PacketKind::Data as u8
                || (self.place_eager
                    && p.len() >= 2
                    && [PacketKind::Eager, PacketKind::Am, PacketKind::AmReply]
                        .iter()
                        .any(|&k| h.kind == k as u8));
            if placeable && self.placing.is_none() {
                if let Some(dst) = sink.place(&h, p.len()) {
                    let half = p.len() / 2;
                    dst[..half].copy_from_slice(&p[..half]);
                    self.placing = Some((h, p));
                    continue;
                }
            }
            sink.packet(&h, &p);
            delivered += 1;
        }
        let mut net = self.net.borrow_mut();
        for x in held.into_iter().rev() {
            net.queues[self.rank as usize].push_front(x);
        }
        delivered
    }
    unsafe fn pull(&mut self, peer: u32, remote: u64, dst: &mut [u8]) -> Result<(), PullError> {
        // As in the node fabric, a pull from oneself is a plain copy and always works.
        if !self.single_copy && peer != self.rank {
            return Err(PullError::Unsupported);
        }
        // SAFETY: all simulated ranks live in this process; `remote` is the address of a send
        // buffer the sending test keeps alive until its request completes, after this pull.
        unsafe { std::ptr::copy_nonoverlapping(remote as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }
    unsafe fn push(&mut self, _peer: u32, remote: u64, src: &[u8]) -> Result<(), PullError> {
        if !self.single_copy {
            return Err(PullError::Unsupported);
        }
        // SAFETY: all simulated ranks live in this process; `remote` points into a receive
        // buffer the receiving test keeps alive and does not touch until its request completes.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), remote as *mut u8, src.len()) };
        Ok(())
    }
    fn prepare_sleep(&mut self) {}
    fn sleep(&mut self, _timeout: Duration) {}
    fn cancel_sleep(&mut self) {}
}

pub(crate) fn cfg(eager_limit: usize) -> Config {
    let defaults = Config::from_tunables(&crate::tunables::Tunables::defaults(), 1, 1);
    Config {
        eager_limit,
        spin_count: 0,
        yield_count: 0,
        yield_slice: defaults.yield_slice,
        yield_pause: defaults.yield_pause,
        yield_streak: defaults.yield_streak,
        sleep_timeout: Duration::from_millis(1),
        split_copy_min: 1000,
    }
}

pub(crate) fn world(
    n: u32,
    capacity: usize,
    max_payload: usize,
    eager: usize,
    single_copy: bool,
) -> Vec<Engine<FakeFabric>> {
    world_placing(n, capacity, max_payload, eager, single_copy, false)
}

/// [`world`], with one-packet eager payloads placed as TCP places them when `place_eager`.
pub(crate) fn world_placing(
    n: u32,
    capacity: usize,
    max_payload: usize,
    eager: usize,
    single_copy: bool,
    place_eager: bool,
) -> Vec<Engine<FakeFabric>> {
    let net = Rc::new(RefCell::new(FakeNet {
        queues: (0..n).map(|_| VecDeque::new()).collect(),
        capacity,
    }));
    (0..n)
        .map(|rank| {
            Engine::new(
                FakeFabric {
                    rank,
                    net: net.clone(),
                    max_payload,
                    single_copy,
                    place_eager,
                    placing: None,
                },
                cfg(eager),
            )
        })
        .collect()
}

/// Steps every engine until all `(rank, handle)` are done; panics after `bound` rounds.
pub(crate) fn run_until_done(es: &mut [Engine<FakeFabric>], hs: &[(usize, Handle)], bound: usize) {
    for _ in 0..bound {
        if hs.iter().all(|&(r, h)| es[r].is_done(h)) {
            return;
        }
        for e in es.iter_mut() {
            e.progress();
        }
    }
    panic!("no completion within {bound} rounds: livelock or deadlock");
}

