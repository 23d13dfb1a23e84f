//! Context-id agreement as a schedule: the members AND their offers ([`ContextMask::offer`])
//! by recursive doubling, and a round in which someone offered nothing is repeated. A
//! blocking communicator constructor starts one and waits; `MPI_Comm_idup` starts one and
//! returns, and the progress engine runs its rounds with the other schedules, so that
//! nonblocking duplicates of overlapping communicators started in any order all complete.

use super::context::{Claim, ContextMask, OFFER_LEN};
use crate::engine::buffer::RawBufMut;
use crate::engine::request::Handle;
use crate::engine::schedule::{Area, Flow, Schedule, Span};
use crate::engine::Engine;
use crate::error::Result;
use crate::fabric::Fabric;
use std::cell::Cell;
use std::rc::Rc;

/// Appends the steps of a bitwise AND of `data` over `members` (world ranks; this rank is
/// `me`), in place, with `tmp` (as long) for the partner's copy: recursive doubling,
/// ⌈log2 n⌉ + 2 rounds, one copy per message. Members beyond the largest power of two first
/// hand theirs to a neighbour and get the result back.
pub fn and_steps(s: &mut Schedule, members: &[u32], me: usize, data: Span, tmp: Span) {
    let n = members.len();
    if n <= 1 {
        return;
    }
    let pof2 = 1 << (usize::BITS - 1 - n.leading_zeros());
    let r = n - pof2;
    // Of the first 2r members, the even ones sit out; the rest take ranks 0..pof2.
    let real = |nr: usize| if nr < r { 2 * nr + 1 } else { nr + r };
    let combine_from = |s: &mut Schedule, from: u32| {
        s.recv(from, tmp);
        s.fence();
        s.reduce(tmp, data, true);
    };
    let nr = if me < 2 * r {
        if me.is_multiple_of(2) {
            s.send(members[me + 1], data);
            s.fence();
            s.recv(members[me + 1], data);
            return;
        }
        combine_from(s, members[me - 1]);
        me / 2
    } else {
        me - r
    };
    let mut mask = 1;
    while mask < pof2 {
        let partner = members[real(nr ^ mask)];
        s.send(partner, data);
        combine_from(s, partner);
        mask <<= 1;
    }
    if me < 2 * r {
        s.send(members[me - 1], data);
    }
}

/// The bitwise AND of two byte strings, into the second: the schedules' combine.
fn and_into(from: &[u8], into: &mut [u8]) {
    for (i, f) in into.iter_mut().zip(from) {
        *i &= f;
    }
}

/// Where the agreed pair lands when the agreement's request completes.
pub type Agreed = Rc<Cell<Option<u32>>>;

/// Starts agreeing on a pair free at every one of `members` (this rank is `me`), on context
/// `ctx` with `tag` (which name the agreement: its [`Claim`]). The request completes with the
/// pair taken here and in the returned cell, or with the error that the members have no free
/// pair in common; then, or if it ends otherwise, [`ContextMask::leave`] the claim.
pub fn start<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &ContextMask,
    (call, ctx, tag): (&'static str, u32, i32),
    members: &[u32],
    me: usize,
) -> (Handle, Agreed) {
    let claim = Claim { context: ctx, tag };
    let agreed: Agreed = Rc::new(Cell::new(None));
    let mut s = Schedule::new(call, ctx, tag).with_combine(Rc::new(and_into));
    let offer = s.scratch(OFFER_LEN);
    let data = Span::new(offer, 0, OFFER_LEN);
    let tmp = Span::new(s.scratch(OFFER_LEN), 0, OFFER_LEN);
    let index = |a: Area| match a {
        Area::Scratch(n) => n as usize,
        _ => unreachable!("a scratch area"),
    };
    let (at, m) = (index(offer), mask.share());
    s.decide(Box::new(move |scratch| {
        scratch[at][..OFFER_LEN].copy_from_slice(&m.offer(claim));
        Flow::Next
    }));
    and_steps(&mut s, members, me, data, tmp);
    let (m, out) = (mask.share(), Rc::clone(&agreed));
    s.decide(Box::new(move |scratch| {
        match m.settle(claim, &scratch[at][..OFFER_LEN]) {
            None => Flow::Back(0),
            Some(Ok(pair)) => {
                out.set(Some(pair));
                Flow::Next
            }
            Some(Err(e)) => Flow::Fail(e),
        }
    }));
    // SAFETY: the schedule has no input or output view, only scratch vectors it owns.
    let h = unsafe { eng.start_schedule(s) };
    (h, agreed)
}

/// A blocking agreement: [`start`], and wait.
pub fn agree<F: Fabric>(
    eng: &mut Engine<F>,
    mask: &ContextMask,
    at: (&'static str, u32, i32),
    members: &[u32],
    me: usize,
) -> Result<u32> {
    let (h, agreed) = start(eng, mask, at, members, me);
    let done = eng.wait(h);
    mask.leave(Claim {
        context: at.1,
        tag: at.2,
    });
    done?;
    Ok(agreed.get().expect("a completed agreement has its pair"))
}

/// A bitwise AND of `data` over `members` on `ctx` with `tag`, into `data` at every member.
pub fn and_among<F: Fabric>(
    eng: &mut Engine<F>,
    (ctx, tag): (u32, i32),
    members: &[u32],
    me: usize,
    data: &mut [u8],
) -> Result<()> {
    let len = data.len();
    // SAFETY: `data` is borrowed for this whole call, and the schedule is waited for before
    // it returns.
    let out = unsafe { RawBufMut::new(data) };
    let mut s = Schedule::new("communicator creation", ctx, tag)
        .with_output(out)
        .with_combine(Rc::new(and_into));
    let tmp = Span::new(s.scratch(len), 0, len);
    and_steps(&mut s, members, me, Span::new(Area::Output, 0, len), tmp);
    // SAFETY: the output view is `data`, borrowed until the wait below returns.
    let h = unsafe { eng.start_schedule(s) };
    eng.wait(h).map(drop)
}
