use super::stores::CALIBRATION_BYTES;
use super::*;
use std::rc::Rc;
use std::sync::Arc;

/// Threads as members, spinning on the flags.
struct Spin;
impl Waiter for Spin {
    fn wait_until(&mut self, ready: &mut dyn FnMut() -> bool) {
        let (start, mut spins) = (std::time::Instant::now(), 0u64);
        while !ready() {
            spins += 1;
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "a member waited a minute: the protocol lost a step"
            );
            std::hint::spin_loop();
            if spins % 1024 == 0 {
                std::thread::yield_now();
            }
        }
    }
    fn wake_all(&mut self, _world: &[u32]) {}
    unsafe fn pull(&mut self, _peer: u32, remote: u64, dst: &mut [u8]) -> Result<(), crate::fabric::PullError> {
        // SAFETY: the members are threads of this process: `remote` is a buffer another
        // member lent for this copy (the caller's promise).
        unsafe { std::ptr::copy_nonoverlapping(remote as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }
    unsafe fn push(&mut self, _peer: u32, remote: u64, src: &[u8]) -> Result<(), crate::fabric::PullError> {
        // SAFETY: the members are threads of this process: `remote` is a buffer another
        // member lent for this copy, which nothing else touches meanwhile (the caller's promise).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), remote as *mut u8, src.len()) };
        Ok(())
    }
}

fn area_in(mem: &Arc<Vec<AtomicU64>>, n: usize, me: usize, slot: usize, piece: usize) -> NodeArea {
    let world: Vec<u32> = (0..n as u32).collect();
    NodeArea {
        base: mem.as_ptr() as *mut u8,
        _memory: Memory::Test(mem.clone()),
        n: world.len(),
        others: others_of(&world, me),
        me,
        buffer: round_up(piece),
        slot,
        piece,
        seq: 0,
        large: LargeRing::new(2 * round_up(piece)),
        progress_seen: 0,
        stream_large: true,
        ordinary_only: false,
        large_calls: 0,
        whole: None,
        copies_over: None,
        receivers_copy_up_to: 0,
        huge_pages: false,
    }
}

/// Runs `body(area, member)` on `n` threads sharing one area.
fn members<F>(n: usize, slot: usize, body: F)
where
    F: Fn(&mut NodeArea, usize) + Send + Sync + 'static,
{
    members_with(n, slot, slot, body)
}

/// [`members`] with large buffers of `piece` bytes.
fn members_with<F>(n: usize, slot: usize, piece: usize, body: F)
where
    F: Fn(&mut NodeArea, usize) + Send + Sync + 'static,
{
    let words = NodeArea::size_for(n, piece).div_ceil(8);
    let mem: Arc<Vec<AtomicU64>> = Arc::new((0..words).map(|_| AtomicU64::new(0)).collect());
    let body = Arc::new(body);
    let hs: Vec<_> = (0..n)
        .map(|me| {
            let (mem, body) = (mem.clone(), body.clone());
            std::thread::spawn(move || {
                let mut a = area_in(&mem, n, me, slot, piece);
                body(&mut a, me);
            })
        })
        .collect();
    for h in hs {
        h.join().expect("a member panicked");
    }
}

fn affine() -> Combine {
    Rc::new(|input: &[u8], inout: &mut [u8]| {
        for (i, o) in input.chunks_exact(8).zip(inout.chunks_exact_mut(8)) {
            let a1 = u32::from_ne_bytes(i[..4].try_into().unwrap());
            let b1 = u32::from_ne_bytes(i[4..].try_into().unwrap());
            let a2 = u32::from_ne_bytes(o[..4].try_into().unwrap());
            let b2 = u32::from_ne_bytes(o[4..].try_into().unwrap());
            o[..4].copy_from_slice(&a1.wrapping_mul(a2).to_ne_bytes());
            o[4..].copy_from_slice(&a1.wrapping_mul(b2).wrapping_add(b1).to_ne_bytes());
        }
    })
}

fn data(member: usize, round: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + member * 31 + round * 13) as u8 | 1).collect()
}

#[test]
fn back_to_back_collectives_of_every_kind_reuse_the_buffers_safely() {
    for n in [1, 2, 3, 5] {
        // Up to a slot line, through the slots; then the large buffers; allreduces of
        // SLICED_FROM in all by slices (3 and 5 members; 46,000 bytes: 5,750 elements,
        // slices of unequal sizes).
        for len in [0, 8, 24, 40, 200, INLINE, INLINE + 8, 1024, 46_000, 65_536] {
            members(n, 65_536, move |a, me| {
                let c = affine();
                for round in 0..300 {
                    a.barrier(&mut Spin);
                    // Broadcast from a changing root.
                    let root = round % n;
                    let mut b = if me == root { data(root, round, len) } else { vec![0; len] };
                    a.bcast(&mut Spin, root, &mut b).unwrap();
                    assert_eq!(b, data(root, round, len), "bcast n={n} len={len} round {round}");
                    // Allreduce in rank order.
                    let mut r = vec![0; len];
                    a.reduce(&mut Spin, None, &data(me, round, len), &mut r, &c, 8).unwrap();
                    let mut want = data(n - 1, round, len);
                    for j in (0..n - 1).rev() {
                        c(&data(j, round, len), &mut want);
                    }
                    assert_eq!(r, want, "allreduce n={n} len={len} round {round}");
                    // Reduce to a changing root: the others' outputs stay untouched.
                    let mut r = vec![0xee; len];
                    a.reduce(&mut Spin, Some(root), &data(me, round, len), &mut r, &c, 8)
                        .unwrap();
                    if me == root {
                        assert_eq!(r, want, "reduce n={n} len={len} round {round}");
                    } else {
                        assert!(r.iter().all(|&b| b == 0xee), "reduce n={n} len={len}");
                    }
                    // Allgather.
                    let mut g = vec![0; len * n];
                    a.gather(&mut Spin, None, &data(me, round, len), &mut g).unwrap();
                    let all: Vec<u8> = (0..n).flat_map(|j| data(j, round, len)).collect();
                    assert_eq!(g, all, "allgather n={n} len={len} round {round}");
                }
            });
        }
    }
}

#[test]
fn calls_larger_than_a_slot_go_a_slot_at_a_time() {
    // A 4 KiB slot: lengths of one piece more than a slot, of pieces that are not whole
    // lines, of many pieces. With a 64 KiB slot, 200,000 bytes go in pieces of 50,000,
    // which 3 members allreduce by slices (SLICED_FROM) piece after piece.
    for (n, slot) in [(1, 4096), (2, 4096), (3, 4096), (5, 4096), (3, 65_536)] {
        for len in [4104, 10_000, 3 * 4096 + 8, 200_000] {
            members(n, slot, move |a, me| {
                let c = affine();
                for round in 0..4 {
                    let root = (round + 1) % n;
                    let mut b = if me == root { data(root, round, len) } else { vec![0; len] };
                    a.bcast(&mut Spin, root, &mut b).unwrap();
                    assert_eq!(b, data(root, round, len), "bcast n={n} len={len}");
                    let mut want = data(n - 1, round, len);
                    for j in (0..n - 1).rev() {
                        c(&data(j, round, len), &mut want);
                    }
                    let mut r = vec![0; len];
                    a.reduce(&mut Spin, None, &data(me, round, len), &mut r, &c, 8).unwrap();
                    assert_eq!(r, want, "allreduce n={n} len={len}");
                    // The others give no output buffer.
                    let mut r = vec![0; if me == root { len } else { 0 }];
                    a.reduce(&mut Spin, Some(root), &data(me, round, len), &mut r, &c, 8)
                        .unwrap();
                    if me == root {
                        assert_eq!(r, want, "reduce n={n} len={len}");
                    }
                    for to in [None, Some(root)] {
                        let mut g = vec![0; if to.is_none_or(|r| r == me) { len * n } else { 0 }];
                        a.gather(&mut Spin, to, &data(me, round, len), &mut g).unwrap();
                        if to.is_none_or(|r| r == me) {
                            let all: Vec<u8> = (0..n).flat_map(|j| data(j, round, len)).collect();
                            assert_eq!(g, all, "gather to {to:?} n={n} len={len}");
                        }
                    }
                }
            });
        }
    }
}

#[test]
fn a_writer_of_medium_data_runs_ahead_of_a_late_reader_without_overwriting_it() {
    // A 16 KiB slot: two 16 KiB buffers, a ring of 32 KiB. Member 0 broadcasts (and
    // scatters) data of sizes from just over a slot line to a slot; member 2 starts late.
    // Member 2 starts only once the root has started its fourth round (six collectives of
    // 4 KiB on: the ring holds eight; before, the root stopped at the third), or after a
    // minute without it; every reader must read every collective's data intact.
    const ROUNDS: usize = 300;
    let started: Arc<Vec<AtomicU64>> = Arc::new((0..3).map(|_| AtomicU64::new(0)).collect());
    let root_ahead = Arc::new(AtomicU64::new(0));
    let (s, ahead) = (started.clone(), root_ahead.clone());
    members(3, 16_384, move |a, me| {
        if me == 2 {
            let since = std::time::Instant::now();
            while s[0].load(Ordering::SeqCst) < 4 && since.elapsed().as_secs() < 60 {
                std::thread::yield_now();
            }
            ahead.store(s[0].load(Ordering::SeqCst), Ordering::SeqCst);
        }
        for round in 0..ROUNDS {
            s[me].store(round as u64 + 1, Ordering::SeqCst);
            let len = INLINE + 1 + (round * 977) % (16_384 - INLINE);
            let len = if round < 20 { 4096 } else { len };
            let mut b = if me == 0 { data(0, round, len) } else { vec![0; len] };
            a.bcast(&mut Spin, 0, &mut b).unwrap();
            assert_eq!(b, data(0, round, len), "bcast round {round} of {len} bytes");
            let block = len / 3;
            let src = if me == 0 { data(0, round, 3 * block) } else { Vec::new() };
            let mut got = vec![0; block];
            a.scatter(&mut Spin, 0, &src, &mut got).unwrap();
            let want = data(0, round, 3 * block);
            assert_eq!(got, want[me * block..(me + 1) * block], "scatter round {round}");
        }
    });
    let ahead = root_ahead.load(Ordering::SeqCst);
    assert!(ahead >= 4, "the root got to round {ahead} only while a reader was late");
}

#[test]
fn two_members_probe_their_cpus_and_get_the_same_data_either_way() {
    // A 4 KiB slot with 1 MiB large buffers, as 2 members have: calls from PROBE_FROM
    // bytes probe the CPUs (every PROBE_EVERY-th) and write by ordinary or non-temporal
    // stores as the probe says, in one piece or several.
    for len in [PROBE_FROM, 1 << 20, 2_500_000] {
        members_with(2, 4096, 1 << 20, move |a, me| {
            let c = affine();
            for round in 0..PROBE_EVERY as usize + 2 {
                let root = round % 2;
                let mut b = if me == root { data(root, round, len) } else { vec![0; len] };
                a.bcast(&mut Spin, root, &mut b).unwrap();
                assert_eq!(b, data(root, round, len), "bcast len={len}");
                let mut want = data(1, round, len);
                c(&data(0, round, len), &mut want);
                let mut r = vec![0; len];
                a.reduce(&mut Spin, None, &data(me, round, len), &mut r, &c, 8).unwrap();
                assert_eq!(r, want, "allreduce len={len}");
                let mut g = vec![0; 2 * len];
                a.gather(&mut Spin, None, &data(me, round, len), &mut g).unwrap();
                assert_eq!(g, [data(0, round, len), data(1, round, len)].concat());
            }
        });
    }
}

#[test]
fn the_members_agree_on_their_stores_and_go_on_as_before() {
    // Timed by threads that may share CPUs: either kind may win, but every member must
    // take the same one, and the area's later collectives must find their data (the
    // calibration's own collectives were counted alike everywhere).
    for n in [2, 3, 5] {
        let (tx, rx) = std::sync::mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        members_with(n, 4096, CALIBRATION_BYTES, move |a, me| {
            let mut kept = None;
            a.calibrate_stores(&mut Spin, None, &mut kept);
            assert_eq!(kept, Some(a.ordinary_only), "what it found is kept");
            tx.lock().unwrap().send(a.ordinary_only).unwrap();
            assert_eq!(a.single_copies_win(), a.ordinary_only && n == 2);
            // All kept the same: one collective (they share it), nothing timed.
            let (found, seq) = (a.ordinary_only, a.seq);
            a.calibrate_stores(&mut Spin, None, &mut kept);
            assert_eq!((a.ordinary_only, a.seq), (found, seq + 1));
            // One member kept nothing, or the other kind: every member times again.
            for odd in [None, Some(!found)] {
                let seq = a.seq;
                let mut mine = if me == n - 1 { odd } else { kept };
                a.calibrate_stores(&mut Spin, None, &mut mine);
                assert!(a.seq > seq + 1 && mine == Some(a.ordinary_only));
            }
            for (round, len) in [100, 5000, CALIBRATION_BYTES].into_iter().enumerate() {
                let mut g = vec![0; n * len];
                a.gather(&mut Spin, None, &data(me, round, len), &mut g).unwrap();
                let want: Vec<u8> = (0..n).flat_map(|j| data(j, round, len)).collect();
                assert_eq!(g, want, "allgather of {len} after the calibration");
            }
        });
        let took: Vec<bool> = rx.iter().collect();
        assert_eq!(took.len(), n);
        assert!(took.iter().all(|&t| t == took[0]), "{n} members disagree: {took:?}");
    }
    // Set, not measured: nothing runs on the area.
    members_with(2, 4096, CALIBRATION_BYTES, |a, _| {
        let mut kept = Some(false);
        a.calibrate_stores(&mut Spin, Some(true), &mut kept);
        assert!(a.ordinary_only && a.single_copies_win() && a.seq == 0);
        a.calibrate_stores(&mut Spin, Some(false), &mut kept);
        assert!(!a.ordinary_only && !a.single_copies_win() && a.seq == 0);
        assert_eq!(kept, Some(false), "a setting is not a finding");
    });
    // Too small an area for the exchange: nothing runs, the built-in rules stay.
    members_with(2, 4096, 4096, |a, _| {
        let mut kept = Some(true);
        a.calibrate_stores(&mut Spin, None, &mut kept);
        assert!(!a.ordinary_only && a.seq == 0);
    });
}

#[test]
fn a_member_alone_at_a_probe_goes_on_when_the_other_did() {
    // Member 0 allreduces PROBE_FROM bytes (and probes), member 1 8 bytes (no probe):
    // member 0 sees member 1 go on, gives up the probe, and both report the sizes.
    members_with(2, 4096, 1 << 20, move |a, me| {
        let c = affine();
        let len = if me == 0 { PROBE_FROM } else { 8 };
        let mut r = vec![0; len];
        let e = a.reduce(&mut Spin, None, &data(me, 0, len), &mut r, &c, 8);
        let (member, theirs, mine) = if me == 0 { (1, 8, PROBE_FROM) } else { (0, PROBE_FROM, 8) };
        assert_eq!(e, Err(SizeMismatch { member, theirs, mine }));
    });
}

#[test]
fn members_whose_calls_differ_in_size_but_not_in_a_piece_are_reported() {
    // A 4 KiB slot: 8 KiB go in two pieces of 4 KiB, 12 KiB in three; 4 KiB in one
    // collective. The first pieces have the same size; their whole calls do not.
    an_odd_member_is_reported(4096, 8192, 4096);
    an_odd_member_is_reported(4096, 8192, 12_288);
}

#[test]
fn folding_in_blocks_gives_the_whole_vectors_fold_for_any_element_size() {
    // A non-commutative operation on 12-byte elements (blocks of 4,092 bytes) and on
    // 8-byte ones, over lengths around and across the block size.
    let first_of_three: Combine = Rc::new(|input: &[u8], inout: &mut [u8]| {
        for (i, o) in input.chunks_exact(12).zip(inout.chunks_exact_mut(12)) {
            o[..4].copy_from_slice(&i[..4]);
            o[4..].iter_mut().zip(&i[4..]).for_each(|(o, i)| *o = o.wrapping_mul(3) ^ i);
        }
    });
    for (elem, c) in [(12, first_of_three), (8, affine())] {
        for len in [0, elem, 4092, 4096 / elem * elem * 3 + elem * 5, 100_008 / elem * elem] {
            for members in [0..1, 0..3, 1..4] {
                let parts: Vec<Vec<u8>> = (0..4).map(|j| data(j, elem, len)).collect();
                let mut want = parts[members.end - 1].clone();
                for j in members.clone().rev().skip(1) {
                    c(&parts[j], &mut want);
                }
                let mut got = vec![0xee; len];
                fold_blocks(&mut got, elem, members.clone(), |j| &parts[j], &c);
                assert_eq!(got, want, "elem {elem}, len {len}, members {members:?}");
            }
        }
    }
}

#[test]
fn scan_scatter_alltoall_and_reduce_scatter() {
    for n in [1, 2, 4, 7] {
        members(n, 8192, move |a, me| {
            let c = affine();
            let len = 16;
            for round in 0..50 {
                for exclusive in [false, true] {
                    let mut r = vec![0xee; len];
                    a.scan(&mut Spin, &data(me, round, len), &mut r, &c, 8, exclusive)
                        .unwrap();
                    let upto = if exclusive { me } else { me + 1 };
                    if upto == 0 {
                        assert_eq!(r, vec![0xee; len]);
                    } else {
                        let mut want = data(upto - 1, round, len);
                        for j in (0..upto - 1).rev() {
                            c(&data(j, round, len), &mut want);
                        }
                        assert_eq!(r, want, "scan n={n} excl={exclusive}");
                    }
                }
                let root = (round + 1) % n;
                let all: Vec<u8> = (0..n).flat_map(|j| data(j, round, len)).collect();
                let mut s = vec![0; len];
                a.scatter(&mut Spin, root, if me == root { &all } else { &[] }, &mut s).unwrap();
                assert_eq!(s, data(me, round, len), "scatter");
                let src = data(me, round, len * n);
                let mut d = vec![0; len * n];
                a.alltoall(&mut Spin, &src, &mut d).unwrap();
                for j in 0..n {
                    assert_eq!(d[j * len..(j + 1) * len], data(j, round, len * n)[me * len..(me + 1) * len]);
                }
                let mut rs = vec![0; len];
                a.reduce_scatter_block(&mut Spin, &src, &mut rs, &c, 8).unwrap();
                let block = |j: usize| data(j, round, len * n)[me * len..(me + 1) * len].to_vec();
                let mut want = block(n - 1);
                for j in (0..n - 1).rev() {
                    c(&block(j), &mut want);
                }
                assert_eq!(rs, want, "reduce_scatter_block");
            }
        });
    }
}

/// Member 1 of 3 reduces `odd` bytes where the others reduce `most` (slots of `slot`
/// bytes): every member reports the other size it sees, none reads past it.
fn an_odd_member_is_reported(slot: usize, most: usize, odd: usize) {
    members(3, slot, move |a, me| {
        let c = affine();
        let len = if me == 1 { odd } else { most };
        let mut r = vec![0; len];
        let e = a.reduce(&mut Spin, None, &data(me, 0, len), &mut r, &c, 8);
        let want = if me == 1 { (0, most, odd) } else { (1, odd, most) };
        assert_eq!(
            e,
            Err(SizeMismatch {
                member: want.0,
                theirs: want.1,
                mine: want.2
            })
        );
    });
}

#[test]
fn a_member_with_another_size_is_reported_before_slices_are_folded() {
    // 3 members of 64 KiB each: the allreduce goes by slices, and the sizes are
    // compared before any member folds another's data.
    an_odd_member_is_reported(65_536, 65_536, 65_536 - 8);
}

#[test]
fn a_member_with_another_size_is_reported_not_read() {
    an_odd_member_is_reported(4096, 8, 16);
}

/// Threads as members that cannot copy from each other: every copy is refused (`Unsupported`,
/// as under Yama's ptrace scope) or fails (`Failed`).
struct NoCopies {
    refused: bool,
}
impl Waiter for NoCopies {
    fn wait_until(&mut self, ready: &mut dyn FnMut() -> bool) {
        Spin.wait_until(ready)
    }
    fn wake_all(&mut self, _world: &[u32]) {}
    unsafe fn pull(&mut self, peer: u32, _remote: u64, _dst: &mut [u8]) -> Result<(), PullError> {
        if self.refused {
            return Err(PullError::Unsupported);
        }
        let e = std::io::Error::from_raw_os_error(libc::EFAULT);
        let what = format!("process_vm_readv with rank {peer}");
        Err(PullError::Failed(crate::Error::os("single-copy transfer", what, e)))
    }
    unsafe fn push(&mut self, peer: u32, _remote: u64, _src: &[u8]) -> Result<(), PullError> {
        if self.refused {
            return Err(PullError::Unsupported);
        }
        let e = std::io::Error::from_raw_os_error(libc::EFAULT);
        let what = format!("process_vm_writev with rank {peer}");
        Err(PullError::Failed(crate::Error::os("single-copy transfer", what, e)))
    }
}

/// The all-to-all of `len`-byte blocks every member `me` of `n` expects in `round`.
fn alltoall_want(n: usize, me: usize, round: usize, len: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|j| data(j, round, n * len)[me * len..(me + 1) * len].to_vec())
        .collect()
}

#[test]
fn members_that_can_copy_from_each_other_exchange_large_blocks_by_single_copies() {
    for n in [2, 3, 5] {
        members(n, 4096, move |a, me| {
            a.agree_on_single_copy(&mut Spin, true, 1000);
            assert_eq!(a.copies_over, Some(1000), "n={n}: the members agreed");
            for round in 0..200 {
                // Blocks over the bound by single copies, between them through the area: the
                // counts stay alike either way.
                let len = [1001, 8, 4096 + 8, 40_000][round % 4];
                assert_eq!(a.alltoall_by_copies_applies(n * len), len > 1000);
                let mut got = vec![0; n * len];
                let src = data(me, round, n * len);
                if len > 1000 {
                    a.alltoall_by_copies(&mut Spin, &src, &mut got).unwrap();
                } else {
                    a.alltoall(&mut Spin, &src, &mut got).unwrap();
                }
                assert_eq!(got, alltoall_want(n, me, round, len), "n={n} round {round}");
            }
        });
    }
}

#[test]
fn members_that_cannot_copy_from_each_other_agree_to_use_the_area() {
    for refused in [true, false] {
        members(3, 4096, move |a, _| {
            a.agree_on_single_copy(&mut NoCopies { refused }, true, 1000);
            assert_eq!(a.copies_over, None);
            assert!(!a.alltoall_by_copies_applies(3 * 2000));
        });
    }
    // Not allowed: no collective at all (a member alone at it would wait forever).
    members(1, 4096, |a, _| {
        a.agree_on_single_copy(&mut NoCopies { refused: true }, true, 1000);
        a.agree_on_single_copy(&mut Spin, false, 1000);
        assert_eq!((a.copies_over, a.seq), (None, 0));
    });
}

#[test]
fn a_member_whose_copies_fail_reports_it_and_the_others_go_on() {
    for round in 0..20 {
        members(3, 4096, move |a, me| {
            a.agree_on_single_copy(&mut Spin, true, 0);
            let src = data(me, round, 3 * 2048);
            let mut got = vec![0; 3 * 2048];
            let r = if me == 1 {
                a.alltoall_by_copies(&mut NoCopies { refused: false }, &src, &mut got)
            } else {
                a.alltoall_by_copies(&mut Spin, &src, &mut got)
            };
            // Which copies member 1 took on depends on who got there first: it reports the
            // copies it failed, the others the blocks member 1 failed to bring them; what
            // was copied is right.
            match r {
                Ok(()) => assert_eq!(got, alltoall_want(3, me, round, 2048), "member {me}"),
                Err(AreaError::Copy(e)) if me == 1 => {
                    assert!(e.detail.contains("with rank"), "{e}")
                }
                Err(AreaError::Copy(e)) => {
                    assert!(e.detail.contains("member 1 "), "member {me}: {e}");
                    let theirs = alltoall_want(3, me, round, 2048);
                    for j in [0, 2] {
                        assert_eq!(got[j * 2048..][..2048], theirs[j * 2048..][..2048]);
                    }
                }
                Err(other) => panic!("member {me} got {other:?}"),
            }
            // Everyone kept count: the next collective works at every member.
            let mut b = [0; 3];
            a.gather(&mut Spin, None, &[me as u8], &mut b).unwrap();
            assert_eq!(b, [0, 1, 2]);
        });
    }
    // Where no member can copy, every member reports it.
    members(3, 4096, |a, me| {
        a.agree_on_single_copy(&mut Spin, true, 0);
        let (src, mut got) = (data(me, 0, 3 * 2048), vec![0; 3 * 2048]);
        let r = a.alltoall_by_copies(&mut NoCopies { refused: false }, &src, &mut got);
        assert!(matches!(r, Err(AreaError::Copy(_))), "member {me}: {r:?}");
        let mut b = [0; 3];
        a.gather(&mut Spin, None, &[me as u8], &mut b).unwrap();
        assert_eq!(b, [0, 1, 2]);
    });
}

/// A waiter that counts its copies (and everyone's in `all`); its first copy (a pull or a
/// push) opens `opens` and then waits until `gate` opens.
struct Counting {
    copies: usize,
    all: Arc<std::sync::atomic::AtomicUsize>,
    opens: Option<Arc<std::sync::atomic::AtomicBool>>,
    gate: Option<Arc<std::sync::atomic::AtomicBool>>,
}
impl Counting {
    fn count(&mut self) {
        if let Some(opens) = self.opens.take() {
            opens.store(true, Ordering::Release);
        }
        if let Some(gate) = self.gate.take() {
            Spin.wait_until(&mut || gate.load(Ordering::Acquire));
        }
        self.copies += 1;
        self.all.fetch_add(1, Ordering::Relaxed);
    }
}
impl Waiter for Counting {
    fn wait_until(&mut self, ready: &mut dyn FnMut() -> bool) {
        Spin.wait_until(ready)
    }
    fn wake_all(&mut self, _world: &[u32]) {}
    unsafe fn pull(&mut self, peer: u32, remote: u64, dst: &mut [u8]) -> Result<(), PullError> {
        self.count();
        // SAFETY: the caller's promise, passed on.
        unsafe { Spin.pull(peer, remote, dst) }
    }
    unsafe fn push(&mut self, peer: u32, remote: u64, src: &[u8]) -> Result<(), PullError> {
        self.count();
        // SAFETY: the caller's promise, passed on.
        unsafe { Spin.push(peer, remote, src) }
    }
}

/// A waiter that counts its pulls and refuses pushes (a push fails the collective).
struct PullsOnly {
    pulls: usize,
}
impl Waiter for PullsOnly {
    fn wait_until(&mut self, ready: &mut dyn FnMut() -> bool) {
        Spin.wait_until(ready)
    }
    fn wake_all(&mut self, _world: &[u32]) {}
    unsafe fn pull(&mut self, peer: u32, remote: u64, dst: &mut [u8]) -> Result<(), PullError> {
        self.pulls += 1;
        // SAFETY: the caller's promise, passed on.
        unsafe { Spin.pull(peer, remote, dst) }
    }
    unsafe fn push(&mut self, peer: u32, remote: u64, src: &[u8]) -> Result<(), PullError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { NoCopies { refused: false }.push(peer, remote, src) }
    }
}

#[test]
fn receivers_copy_every_block_of_an_alltoall_within_the_bound_and_claim_beyond_it() {
    use std::sync::atomic::AtomicUsize;
    let len = 5000;
    let whole = 2 * 4 * 4 * len;
    for round in 0..10 {
        members(4, 4096, move |a, me| {
            a.agree_on_single_copy(&mut Spin, true, 0);
            a.let_receivers_copy(whole);
            let (src, mut got) = (data(me, round, 4 * len), vec![0; 4 * len]);
            let mut w = PullsOnly { pulls: 0 };
            a.alltoall_by_copies(&mut w, &src, &mut got).unwrap();
            assert_eq!(got, alltoall_want(4, me, round, len), "member {me}");
            assert_eq!(w.pulls, 3, "member {me} copied the blocks meant for it, no more");
        });
    }
    // One byte under the buffers' size: claims again, each block still copied once.
    let all = Arc::new(AtomicUsize::new(0));
    let all_then = all.clone();
    members(4, 4096, move |a, me| {
        a.agree_on_single_copy(&mut Spin, true, 0);
        a.let_receivers_copy(whole - 1);
        let (src, mut got) = (data(me, 3, 4 * len), vec![0; 4 * len]);
        let mut w = Counting { copies: 0, all: all.clone(), opens: None, gate: None };
        a.alltoall_by_copies(&mut w, &src, &mut got).unwrap();
        assert_eq!(got, alltoall_want(4, me, 3, len), "member {me}");
    });
    assert_eq!(all_then.load(Ordering::Relaxed), 12, "each block copied once");
}

#[test]
fn members_with_a_cpu_make_the_copies_of_a_member_without_one() {
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    // Member 2 is held in its first copy (its push to member 0, claimed before anyone else
    // could: members 0 and 1 wait in their first copies, their pushes to the next member,
    // until it is there) until member 1 has left the all-to-all and member 0 has made its
    // copies: member 1 must have made both copies between itself and member 2, its push and
    // its pull.
    let (there, gone) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let all = Arc::new(AtomicUsize::new(0));
    let all_then = all.clone();
    members(3, 4096, move |a, me| {
        a.agree_on_single_copy(&mut Spin, true, 0);
        let (opens, gate) = match me {
            2 => (Some(there.clone()), Some(gone.clone())),
            _ => (None, Some(there.clone())),
        };
        let mut w = Counting { copies: 0, all: all.clone(), opens, gate };
        let (src, mut got) = (data(me, 7, 3 * 5000), vec![0; 3 * 5000]);
        a.alltoall_by_copies(&mut w, &src, &mut got).unwrap();
        if me == 1 {
            // Member 1 has left; member 2 goes on once member 0 has made its copies too (its
            // push into member 2's buffer among them), so that member 2 has none left to claim.
            Spin.wait_until(&mut || all.load(Ordering::Relaxed) >= 5);
            gone.store(true, Ordering::Release);
        }
        assert_eq!(got, alltoall_want(3, me, 7, 5000), "member {me}");
        if me == 2 {
            assert_eq!(w.copies, 1, "member 1 made the copies between it and member 2");
        }
        // And the area goes on as usual.
        let mut b = [0; 3];
        a.gather(&mut Spin, None, &[me as u8], &mut b).unwrap();
        assert_eq!(b, [0, 1, 2]);
    });
    assert_eq!(all_then.load(Ordering::Relaxed), 6, "each block copied once");
}

#[test]
fn a_member_with_another_block_size_is_reported_by_every_member_and_none_copies_past_it() {
    members(3, 4096, |a, me| {
        a.agree_on_single_copy(&mut Spin, true, 0);
        let len = if me == 2 { 1500 } else { 1000 };
        let src = data(me, 0, 3 * len);
        let mut got = vec![0xee; 3 * len];
        let e = a.alltoall_by_copies(&mut Spin, &src, &mut got);
        let want = if me == 2 { (0, 3000, 4500) } else { (2, 4500, 3000) };
        match e {
            Err(AreaError::Sizes(m)) => assert_eq!((m.member, m.theirs, m.mine), want),
            other => panic!("member {me} got {other:?}"),
        }
        // Nothing was copied: every member saw the other size before any copy.
        assert!(got.iter().all(|&b| b == 0xee), "member {me}");
        // A member whose output is shorter than its input: every member reports it, and
        // nobody writes past that output.
        let src = data(me, 1, 3 * 1000);
        let mut got = vec![0xee; if me == 1 { 2000 } else { 3000 }];
        let want = if me == 1 { (1, 2000, 3000) } else { (1, usize::MAX, 3000) };
        match a.alltoall_by_copies(&mut Spin, &src, &mut got) {
            Err(AreaError::Sizes(m)) => assert_eq!((m.member, m.theirs, m.mine), want),
            other => panic!("member {me} got {other:?}"),
        }
        assert!(got.iter().all(|&b| b == 0xee), "member {me}");
        let mut b = [0; 3];
        a.gather(&mut Spin, None, &[me as u8], &mut b).unwrap();
        assert_eq!(b, [0, 1, 2]);
    });
}

#[test]
fn members_allgather_large_blocks_by_single_copies_and_report_a_block_that_differs() {
    for n in [2, 3, 4, 5] {
        members(n, 4096, move |a, me| {
            a.agree_on_single_copy(&mut Spin, true, 1000);
            // From 3 members, from ALLGATHER_COPIES_FROM; at 2, over the bound (1000 here).
            let from = if n == 2 { 1001 } else { single_copy::ALLGATHER_COPIES_FROM };
            let applies = n <= single_copy::ALLGATHER_COPIES_MEMBERS;
            assert_eq!(a.allgather_by_copies_applies(from), applies, "n={n}");
            assert!(!a.allgather_by_copies_applies(from - 1), "n={n}");
            for round in 0..40 {
                let len = [1001, 40_000, 4097][round % 3];
                let mut got = vec![0; n * len];
                let src = data(me, round, len);
                a.allgather_by_copies(&mut Spin, &src, &mut got).unwrap();
                let want: Vec<u8> = (0..n).flat_map(|j| data(j, round, len)).collect();
                assert_eq!(got, want, "n={n} round {round} member {me}");
            }
            // A member whose block is longer: every member reports it, and none copies.
            let len = if me == n - 1 { 1500 } else { 1000 };
            let mut got = vec![0xee; n * len];
            let e = a.allgather_by_copies(&mut Spin, &data(me, 0, len), &mut got);
            let want = if me == n - 1 { (0, 1000, 1500) } else { (n - 1, 1500, 1000) };
            match e {
                Err(AreaError::Sizes(m)) => assert_eq!((m.member, m.theirs, m.mine), want),
                other => panic!("n={n} member {me} got {other:?}"),
            }
            assert!(got.iter().all(|&b| b == 0xee), "n={n} member {me}");
            let mut b = vec![0; n];
            a.gather(&mut Spin, None, &[me as u8], &mut b).unwrap();
            assert_eq!(b, (0..n as u8).collect::<Vec<_>>());
        });
    }
}

/// A commutative combine: wrapping sums of 8-byte words.
fn sums() -> Combine {
    Rc::new(|input: &[u8], inout: &mut [u8]| {
        for (i, o) in input.chunks_exact(8).zip(inout.chunks_exact_mut(8)) {
            let s = u64::from_ne_bytes(i.try_into().unwrap())
                .wrapping_add(u64::from_ne_bytes(o.try_into().unwrap()));
            o.copy_from_slice(&s.to_ne_bytes());
        }
    })
}

#[test]
fn two_members_reduce_large_data_by_single_copies() {
    members(2, 4096, |a, me| {
        a.agree_on_single_copy(&mut Spin, true, 1000);
        assert!(!a.allreduce_by_copies_applies(single_copy::ALLREDUCE_COPIES_FROM - 8, true));
        assert!(!a.allreduce_by_copies_applies(single_copy::ALLREDUCE_COPIES_FROM, false));
        assert!(a.allreduce_by_copies_applies(single_copy::ALLREDUCE_COPIES_FROM, true));
        let block = REDUCE_SCATTER_COPIES_FROM;
        assert!(!a.reduce_scatter_by_copies_applies(block - 8, true));
        assert!(!a.reduce_scatter_by_copies_applies(block, false));
        assert!(a.reduce_scatter_by_copies_applies(block, true));
        let c = sums();
        for round in 0..20 {
            // An odd count of elements: the slices differ by one.
            let len = single_copy::ALLREDUCE_COPIES_FROM + 8 * (2 * round + 1);
            let mut want = data(1, round, len);
            c(&data(0, round, len), &mut want);
            let mut got = vec![0; len];
            a.allreduce_by_copies(&mut Spin, &data(me, round, len), &mut got, &c, 8)
                .unwrap();
            assert_eq!(got, want, "allreduce round {round}");
            let mut block = vec![0; len];
            a.reduce_scatter_by_copies(&mut Spin, &data(me, round, 2 * len), &mut block, &c)
                .unwrap();
            let mut want = data(1, round, 2 * len);
            c(&data(0, round, 2 * len), &mut want);
            assert_eq!(block, want[me * len..(me + 1) * len], "reduce-scatter round {round}");
        }
    });
}

#[test]
fn a_member_whose_reduce_copy_fails_makes_both_report_it() {
    members(2, 4096, |a, me| {
        a.agree_on_single_copy(&mut Spin, true, 1000);
        let (c, len) = (sums(), 4096);
        let mut got = vec![0; len];
        let src = data(me, 0, len);
        let e = if me == 0 {
            a.allreduce_by_copies(&mut NoCopies { refused: false }, &src, &mut got, &c, 8)
        } else {
            a.allreduce_by_copies(&mut Spin, &src, &mut got, &c, 8)
        };
        match e {
            Err(AreaError::Copy(e)) if me == 0 => assert!(e.detail.contains("rank 1"), "{e}"),
            Err(AreaError::Copy(e)) => assert!(e.detail.contains("member 0"), "{e}"),
            other => panic!("member {me} got {other:?}"),
        }
        // A reduce-scatter whose copy fails at member 1: it reports it, naming member 0's
        // rank; member 0, whose copy worked, gets its block.
        let (all, mut block) = (data(me, 1, 2 * len), vec![0; len]);
        let e = if me == 1 {
            a.reduce_scatter_by_copies(&mut NoCopies { refused: false }, &all, &mut block, &c)
        } else {
            a.reduce_scatter_by_copies(&mut Spin, &all, &mut block, &c)
        };
        if me == 1 {
            match e {
                Err(AreaError::Copy(e)) => assert!(e.detail.contains("rank 0"), "{e}"),
                other => panic!("member 1 got {other:?}"),
            }
        } else {
            e.unwrap();
            let mut want = data(1, 1, 2 * len);
            c(&data(0, 1, 2 * len), &mut want);
            assert_eq!(block, want[..len]);
        }
        let mut b = [0; 2];
        a.gather(&mut Spin, None, &[me as u8], &mut b).unwrap();
        assert_eq!(b, [0, 1]);
    });
}

#[test]
fn members_scatter_large_blocks_by_single_copies_from_any_root() {
    for n in [2, 3, 5] {
        members(n, 4096, move |a, me| {
            a.agree_on_single_copy(&mut Spin, true, 1000);
            for round in 0..100 {
                let (root, len) = (round % n, [1001, 8, 40_000][round % 3]);
                assert_eq!(a.scatter_by_copies_applies(len), len > 1000);
                let src = if me == root {
                    data(root, round, n * len)
                } else {
                    Vec::new()
                };
                let mut got = vec![0; len];
                if len > 1000 {
                    a.scatter_by_copies(&mut Spin, root, &src, &mut got).unwrap();
                } else {
                    a.scatter(&mut Spin, root, &src, &mut got).unwrap();
                }
                let want = &data(root, round, n * len)[me * len..(me + 1) * len];
                assert_eq!(got, want, "n={n} round {round}");
            }
        });
    }
}

#[test]
fn members_gather_large_blocks_by_single_copies_to_any_root() {
    for n in [2, 3, 5] {
        members(n, 4096, move |a, me| {
            a.agree_on_single_copy(&mut Spin, true, 1000);
            for round in 0..100 {
                let (root, len) = (round % n, [1001, 8, 40_000][round % 3]);
                assert_eq!(a.gather_by_copies_applies(len), len > 1000);
                let src = data(me, round, len);
                let mut got = vec![0; if me == root { n * len } else { 0 }];
                if len > 1000 {
                    a.gather_by_copies(&mut Spin, root, &src, &mut got).unwrap();
                } else {
                    a.gather(&mut Spin, Some(root), &src, &mut got).unwrap();
                }
                if me == root {
                    let want: Vec<u8> = (0..n).flat_map(|j| data(j, round, len)).collect();
                    assert_eq!(got, want, "n={n} round {round}");
                }
            }
        });
    }
}

#[test]
fn a_member_whose_gather_copy_fails_or_whose_block_differs_is_reported_and_the_others_go_on() {
    for round in 0..20 {
        members(3, 4096, move |a, me| {
            a.agree_on_single_copy(&mut Spin, true, 0);
            let src = data(me, round, 2048);
            let mut got = vec![0; if me == 0 { 3 * 2048 } else { 0 }];
            let r = if me == 1 {
                a.gather_by_copies(&mut NoCopies { refused: false }, 0, &src, &mut got)
            } else {
                a.gather_by_copies(&mut Spin, 0, &src, &mut got)
            };
            // Member 1's block came by the root's pull, or member 1's push failed: then both
            // say so.
            match (me, r) {
                (1, Err(AreaError::Copy(e))) => assert!(e.detail.contains("rank 0"), "{e}"),
                (0, Err(AreaError::Copy(e))) => assert!(e.detail.contains("member 1 "), "{e}"),
                (_, Ok(())) => {}
                (_, other) => panic!("member {me} got {other:?}"),
            }
            if me == 0 {
                assert_eq!(got[..2048], data(0, round, 2048)[..]);
                assert_eq!(got[4096..], data(2, round, 2048)[..]);
            }
            // A member with another block size: it and the root report each other, and
            // nothing is copied into the root for it; the third member's block arrives.
            let len = if me == 2 { 3000 } else { 2048 };
            let src = data(me, round, len);
            let mut got = vec![0xee; if me == 0 { 3 * 2048 } else { 0 }];
            let r = a.gather_by_copies(&mut Spin, 0, &src, &mut got);
            match (me, r) {
                (0, Err(AreaError::Sizes(m))) => assert_eq!((m.member, m.theirs, m.mine), (2, 3000, 2048)),
                (2, Err(AreaError::Sizes(m))) => assert_eq!((m.member, m.theirs, m.mine), (0, 6144, 9000)),
                (1, Ok(())) => {}
                (_, other) => panic!("member {me} got {other:?}"),
            }
            if me == 0 {
                assert_eq!(got[2048..4096], data(1, round, 2048)[..]);
                assert!(got[4096..].iter().all(|&b| b == 0xee));
            }
            let mut b = [0; 3];
            a.gather(&mut Spin, None, &[me as u8], &mut b).unwrap();
            assert_eq!(b, [0, 1, 2]);
        });
    }
}

#[test]
fn a_member_whose_scatter_copy_fails_or_whose_block_differs_reports_it_and_the_others_go_on() {
    members(3, 4096, |a, me| {
        a.agree_on_single_copy(&mut Spin, true, 0);
        let src = if me == 0 { data(0, 0, 3 * 2048) } else { Vec::new() };
        let mut got = vec![0; 2048];
        if me == 1 {
            let e = a.scatter_by_copies(&mut NoCopies { refused: false }, 0, &src, &mut got);
            match e {
                Err(AreaError::Copy(e)) => assert!(e.detail.contains("rank 0"), "{e}"),
                other => panic!("member 1 got {other:?}"),
            }
        } else {
            a.scatter_by_copies(&mut Spin, 0, &src, &mut got).unwrap();
        }
        // A member expecting another block size reports the root's, and copies nothing.
        let mut other = vec![0xee; if me == 2 { 1024 } else { 2048 }];
        let e = a.scatter_by_copies(&mut Spin, 0, &src, &mut other);
        match (me, e) {
            (2, Err(AreaError::Sizes(e))) => {
                assert_eq!((e.member, e.theirs, e.mine), (0, 3 * 2048, 3 * 1024));
                assert!(other.iter().all(|&b| b == 0xee));
            }
            (2, other) => panic!("member 2 got {other:?}"),
            (_, e) => e.unwrap(),
        }
        // Everyone kept count: the next collective works at every member.
        let mut b = [0; 3];
        a.gather(&mut Spin, None, &[me as u8], &mut b).unwrap();
        assert_eq!(b, [0, 1, 2]);
    });
}
