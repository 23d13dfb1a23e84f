//! Multi-process checks of windows (issue 12), run by `weft-cli/tests/rma.rs` through
//! `weft run` at 1 to 8 ranks. `rma_suite CASE`; a wrong result panics (failing the job).
//!
//! Cases: `counter` (exclusive lock epochs from every rank incrementing a counter at rank 0
//! with a get and a put: only mutual exclusion makes the total exact), `atomics`
//! (fetch_and_op and accumulate from every rank at once on one location, in lock_all and
//! fence epochs, integers and floats), `mixed` (large accumulates and one-element atomics on
//! the same elements at once, exact totals), `cas` (a compare_and_swap spin lock guarding a counter,
//! with flush), `fence` (a ring of puts between fences, then gets), `asleep` (rank 0 sleeps
//! outside the library while the others complete passive-target epochs on it), `errors` (bad
//! displacement, bad target, an operation outside its epoch, a second lock on one target, a
//! fence inside a lock epoch, a get_accumulate result buffer too short, a window of bool,
//! memory attached to a window that is not dynamic: each a typed error naming the call and
//! the values), `pscw` (post-start-complete-wait with overlapping groups:
//! each rank exposes to and accesses both neighbours), `shared` (allocate_shared: own part by
//! read_local/write_local, the neighbours' through shared_query's pointers), `unshared`
//! (members on several nodes: allocate_shared is a clear error, and allocate works),
//! `stream` (hundreds of puts and accumulates in one epoch, which by messages are in flight
//! together up to `WEFT_RMA_OPS`: the last put to an element wins, accumulates sum exactly,
//! and puts larger than those copied keep their order with the small ones), `created` (a
//! window over each rank's own `Vec`: its values seen by the others, puts in fence epochs
//! opened and closed with assertions, accumulates and fetch_and_op in lock_all, the memory
//! given back by `into_vec` with every write in it), `assertions` (fences asserted
//! `NO_PRECEDE | NO_SUCCEED` do not synchronize: rank 0 passes two before rank 1 enters them,
//! which would hang with a barrier; a `NO_CHECK` lock; assertions a call does not take are
//! `Assert` errors), `dynamic` (a dynamic window: each rank attaches a region and tells the
//! others where it is; gets, puts and accumulates into the next rank's, beyond it a `Disp`
//! error, and after its detach too; the memory given back by `into_regions`), `typed` (the
//! attributes and info; put, get, accumulate and get_accumulate with a strided target
//! datatype and a strided origin view, in fence epochs; sides of different sizes, an
//! accumulate of another type, a layout past the part: typed errors; the request-based
//! operations in a lock_all epoch), `lazy` (lock epochs on other members take the word at
//! their first operation: an empty one completes while the target holds its own lock, which
//! would hang were the word taken; several targets of one window locked and released out of
//! order, a fence opening after; two windows locked in one order and operated on in
//! opposite orders by different ranks do not deadlock, the counters exact; loads and stores
//! through `shared_query`'s pointers stay protected by exclusive epochs).

use std::time::{Duration, SystemTime, UNIX_EPOCH};
use weft::collective::SystemOperation;
use weft::datatype::{MutView, UserDatatype};
use weft::traits::*;
use weft::window::{Access, Assert, Flavor, LockKind, MemoryModel, RequestAccess, Target, Window};
use weft::ErrorClass;

const ROUNDS: u64 = 50;

fn counter(world: &weft::topology::SimpleCommunicator) {
    let n = world.size() as u64;
    let win = Window::<u64>::allocate(world, 2);
    for _ in 0..ROUNDS {
        let e = win.lock(0, LockKind::Exclusive).expect("lock");
        let mut v = [0u64];
        e.get(0, 1, &mut v).expect("get");
        e.put(0, 1, &[v[0] + 1]).expect("put");
    }
    world.barrier();
    if world.rank() == 0 {
        let e = win.lock(0, LockKind::Shared).expect("lock");
        let mut v = [0u64; 2];
        e.get(0, 0, &mut v).expect("get");
        assert_eq!(v, [0, n * ROUNDS], "exclusive epochs lost an increment");
    }
    win.free().expect("free");
}

fn stream(world: &weft::topology::SimpleCommunicator) {
    const PUTS: usize = 300;
    const BIG: usize = 100 << 10; // above what the remote path copies (64 KiB)
    let (n, me) = (world.size() as usize, world.rank() as usize);
    let sum = SystemOperation::sum();
    // Element `o` of each part is origin o's; element n sums everyone's increments.
    let win = Window::<u64>::allocate(world, n + 1);
    {
        let all = win.lock_all().expect("lock_all");
        for i in 0..PUTS {
            for t in 0..n as i32 {
                all.put(t, me, &[(me * PUTS + i) as u64]).expect("put");
                all.accumulate(t, n, &[1], &sum).expect("accumulate");
            }
        }
        all.flush().expect("flush");
        for t in 0..n as i32 {
            let mut v = [0u64];
            all.get(t, me, &mut v).expect("get");
            assert_eq!(
                v[0],
                (me * PUTS + PUTS - 1) as u64,
                "the last put to target {t} wins"
            );
        }
        all.unlock_all().expect("unlock_all");
    }
    world.barrier();
    {
        let e = win.lock(me as i32, LockKind::Shared).expect("lock");
        let mut v = vec![0u64; n + 1];
        e.get(me as i32, 0, &mut v).expect("get");
        assert_eq!(v[n], (n * PUTS) as u64, "accumulates at rank {me}");
    }
    // A large put (waited for at once) between small ones (in flight) to the next rank.
    let bytes = Window::<u8>::allocate(world, BIG);
    let next = ((me + 1) % n) as i32;
    {
        let e = bytes.lock(next, LockKind::Exclusive).expect("lock");
        e.put(next, 0, &[1; 16]).expect("put");
        e.put(next, 0, &vec![me as u8 + 2; BIG]).expect("put");
        e.put(next, 8, &[0xee; 8]).expect("put");
        e.unlock().expect("unlock");
    }
    world.barrier();
    {
        let e = bytes.lock(me as i32, LockKind::Shared).expect("lock");
        let mut v = vec![0u8; BIG];
        e.get(me as i32, 0, &mut v).expect("get");
        let from = ((me + n - 1) % n) as u8 + 2;
        assert_eq!(v[..8], [from; 8], "the large put after the small one");
        assert_eq!(v[8..16], [0xee; 8], "the small put after the large one");
        assert!(v[16..].iter().all(|&b| b == from), "the large put");
    }
    bytes.free().expect("free");
    win.free().expect("free");
}

fn atomics(world: &weft::topology::SimpleCommunicator) {
    let (n, me) = (world.size() as i64, world.rank() as i64);
    let sum = SystemOperation::sum();
    let ints = Window::<i64>::allocate(world, 4);
    let floats = Window::<f64>::allocate(world, 1);
    {
        let all = ints.lock_all().expect("lock_all");
        let fall = floats.lock_all().expect("lock_all");
        let mut seen = Vec::new();
        for _ in 0..ROUNDS {
            seen.push(all.fetch_and_op(0, 0, 1, &sum).expect("fetch_and_op"));
            all.accumulate(n as i32 - 1, 1, &[me + 1], &sum)
                .expect("accumulate");
            fall.accumulate(0, 0, &[0.5], &sum).expect("accumulate");
        }
        all.fetch_and_op(0, 2, me, &SystemOperation::max())
            .expect("max");
        // Each fetch saw a distinct count: the increments were atomic.
        seen.dedup();
        assert_eq!(
            seen.len() as u64,
            ROUNDS,
            "fetch_and_op returned a repeated value"
        );
    }
    world.barrier();
    {
        let mut f = ints.fence().expect("fence");
        // Every rank adds to elements 3 of every target, then reads back after the fence.
        for t in 0..n as i32 {
            f.accumulate(t, 3, &[10], &sum).expect("accumulate");
        }
        f.fence().expect("fence");
        let mut v = [0i64; 4];
        f.get(me as i32, 0, &mut v).expect("get");
        assert_eq!(v[3], 10 * n, "fence-epoch accumulates at rank {me}");
        if me == 0 {
            assert_eq!(v[0], n * ROUNDS as i64, "fetch_and_op total");
            assert_eq!(v[2], n - 1, "max");
        }
        if me == n - 1 {
            assert_eq!(v[1], ROUNDS as i64 * n * (n + 1) / 2, "accumulate total");
        }
        f.end().expect("fence");
    }
    if me == 0 {
        let e = floats.lock(0, LockKind::Shared).expect("lock");
        let mut v = [0f64];
        e.get(0, 0, &mut v).expect("get");
        assert_eq!(
            v[0],
            0.5 * (n as f64) * ROUNDS as f64,
            "float accumulate total"
        );
    }
    ints.free().expect("free");
    floats.free().expect("free");
}

/// Large accumulates (under the element locks, combined with plain loads and stores) and
/// one-element atomics (the CPU's) on the same elements of rank 0 at once, from every rank,
/// integers and floats: every total exact, so neither ever overlapped the other.
fn mixed(world: &weft::topology::SimpleCommunicator) {
    const LEN: usize = 2048; // 16 KiB of i64: four pages, four element locks
                             // Enough for the two kinds to meet often on two cores (an overlap is a window of
                             // nanoseconds).
    const ROUNDS: u64 = 3000;
    let (n, me) = (world.size() as i64, world.rank() as i64);
    let sum = SystemOperation::sum();
    let ints = Window::<i64>::allocate(world, LEN);
    let floats = Window::<f64>::allocate(world, LEN);
    {
        let all = ints.lock_all().expect("lock_all");
        let fall = floats.lock_all().expect("lock_all");
        let (ones, halves) = (vec![1i64; LEN], vec![0.5f64; LEN]);
        let mut old = vec![0i64; LEN];
        for r in 0..ROUNDS {
            all.accumulate(0, 0, &ones, &sum).expect("accumulate");
            all.fetch_and_op(0, 0, 1, &sum).expect("fetch_and_op");
            all.fetch_and_op(0, LEN - 1, 1, &sum).expect("fetch_and_op");
            all.accumulate(0, 5, &[1, 1, 1], &sum).expect("accumulate");
            all.get_accumulate(0, 0, &ones, &mut old, &sum)
                .expect("get_accumulate");
            fall.accumulate(0, 0, &halves, &sum).expect("accumulate");
            fall.fetch_and_op(0, 1, 0.25, &sum).expect("fetch_and_op");
            if r % 100 == 0 {
                all.flush().expect("flush");
            }
        }
        all.unlock_all().expect("unlock_all");
        fall.unlock_all().expect("unlock_all");
    }
    world.barrier();
    if me == 0 {
        let rounds = ROUNDS as i64;
        let e = ints.lock(0, LockKind::Shared).expect("lock");
        let mut v = vec![0i64; LEN];
        e.get(0, 0, &mut v).expect("get");
        for (i, &x) in v.iter().enumerate() {
            let extra = match i {
                0 | 5..=7 => 1,
                _ if i == LEN - 1 => 1,
                _ => 0,
            };
            assert_eq!(x, n * rounds * (2 + extra), "element {i}");
        }
        drop(e);
        let e = floats.lock(0, LockKind::Shared).expect("lock");
        let mut f = vec![0f64; LEN];
        e.get(0, 0, &mut f).expect("get");
        let each = 0.5 * (n * rounds) as f64;
        assert_eq!(f[1], each + 0.25 * (n * rounds) as f64, "float element 1");
        assert!(
            f.iter().enumerate().all(|(i, &x)| i == 1 || x == each),
            "float accumulates"
        );
    }
    ints.free().expect("free");
    floats.free().expect("free");
}

fn cas(world: &weft::topology::SimpleCommunicator) {
    let n = world.size() as u32;
    let me = world.rank() as u32 + 1;
    let win = Window::<u32>::allocate(world, 2);
    {
        let all = win.lock_all().expect("lock_all");
        for _ in 0..ROUNDS {
            while all.compare_and_swap(0, 0, 0, me).expect("cas") != 0 {
                std::thread::yield_now();
            }
            let mut v = [0u32];
            all.get(0, 1, &mut v).expect("get");
            all.put(0, 1, &[v[0] + 1]).expect("put");
            all.flush().expect("flush");
            assert_eq!(
                all.compare_and_swap(0, 0, me, 0).expect("cas"),
                me,
                "the lock held"
            );
        }
    }
    world.barrier();
    if world.rank() == 0 {
        let e = win.lock(0, LockKind::Shared).expect("lock");
        let mut v = [0u32; 2];
        e.get(0, 0, &mut v).expect("get");
        assert_eq!(v, [0, n * ROUNDS as u32], "the spin lock lost an increment");
    }
    win.free().expect("free");
}

fn fence(world: &weft::topology::SimpleCommunicator) {
    let (n, me) = (world.size(), world.rank());
    let win = Window::<i32>::allocate(world, n as usize);
    let mut f = win.fence().expect("fence");
    // Rank r puts r * 10 into slot r of its right neighbour, and r into slot r of itself.
    f.put((me + 1) % n, me as usize, &[me * 10]).expect("put");
    f.fence().expect("fence");
    let mut mine = vec![0; n as usize];
    f.get(me, 0, &mut mine).expect("get");
    let left = (me + n - 1) % n;
    for (slot, v) in mine.iter().enumerate() {
        let want = if slot as i32 == left { left * 10 } else { 0 };
        assert_eq!(*v, want, "slot {slot} at rank {me}");
    }
    f.end().expect("fence");
    win.free().expect("free");
}

fn pscw(world: &weft::topology::SimpleCommunicator) {
    let (n, me) = (world.size(), world.rank());
    let neighbours = |r: i32| {
        let mut v = vec![(r + n - 1) % n, (r + 1) % n];
        v.sort_unstable();
        v.dedup();
        v
    };
    let win = Window::<i64>::allocate(world, 1);
    for round in 1..=3i64 {
        let group = world.group().include(&neighbours(me));
        let exposure = win.post(&group).expect("post");
        let access = win.start(&group).expect("start");
        for t in neighbours(me) {
            access
                .accumulate(t, 0, &[round * (me as i64 + 1)], &SystemOperation::sum())
                .expect("accumulate");
        }
        let outside = (0..n).find(|r| !neighbours(me).contains(r));
        if let Some(t) = outside {
            let e = access.put(t, 0, &[0]).unwrap_err();
            assert_eq!(e.class, ErrorClass::RmaSync, "{e}");
        }
        access.complete().expect("complete");
        exposure.wait().expect("wait");
    }
    let want: i64 = (0..n)
        .filter(|&o| neighbours(o).contains(&me))
        .map(|o| (1 + 2 + 3) * (o as i64 + 1))
        .sum();
    let e = win.lock(me, LockKind::Shared).expect("lock");
    let mut got = [0i64];
    e.get(me, 0, &mut got).expect("get");
    assert_eq!(got[0], want, "rank {me} after three PSCW rounds");
    drop(e);
    world.barrier();
    win.free().expect("free");
}

fn shared(world: &weft::topology::SimpleCommunicator) {
    let (n, me) = (world.size(), world.rank());
    let win = Window::<u64>::allocate_shared(world, 2);
    assert_eq!(win.local_len(), 2);
    win.write_local(0, 1000 + me as u64).expect("write_local");
    win.write_local(1, 7).expect("write_local");
    assert_eq!(win.read_local(0).expect("read_local"), 1000 + me as u64);
    let e = win.read_local(2).unwrap_err();
    assert_eq!(e.class, ErrorClass::Disp, "{e}");
    win.sync().expect("sync");
    world.barrier();
    win.sync().expect("sync");
    for r in 0..n {
        let (p, len) = win.shared_query(r).expect("shared_query");
        assert_eq!(len, 2);
        // SAFETY: rank r's part, mapped for the window's life; written before the barrier
        // above (ordered by the syncs), and nobody writes it now.
        let v = unsafe { p.read() };
        assert_eq!(v, 1000 + r as u64, "rank {r}'s part seen from rank {me}");
    }
    world.barrier();
    win.free().expect("free");
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn asleep(world: &weft::topology::SimpleCommunicator) {
    let n = world.size();
    let win = Window::<u64>::allocate(world, 1);
    world.barrier();
    if world.rank() == 0 {
        // Outside the library: no call progresses anything here for three seconds.
        std::thread::sleep(Duration::from_secs(3));
        let woke = now();
        let mut done = vec![0f64; n as usize - 1];
        for (i, d) in done.iter_mut().enumerate() {
            world.process_at_rank(i as i32 + 1).receive_into(d);
        }
        for (i, d) in done.iter().enumerate() {
            assert!(
                *d < woke,
                "rank {} finished its epochs at {d}, after the target woke at {woke}",
                i + 1
            );
        }
        let e = win.lock(0, LockKind::Shared).expect("lock");
        let mut v = [0u64];
        e.get(0, 0, &mut v).expect("get");
        assert_eq!(v[0], (n as u64 - 1) * ROUNDS);
    } else {
        for _ in 0..ROUNDS {
            let e = win.lock(0, LockKind::Exclusive).expect("lock");
            let mut v = [0u64];
            e.get(0, 0, &mut v).expect("get");
            e.put(0, 0, &[v[0] + 1]).expect("put");
        }
        world.process_at_rank(0).send(&now());
    }
    win.free().expect("free");
}

fn errors(world: &weft::topology::SimpleCommunicator) {
    let (n, me) = (world.size(), world.rank());
    let win = Window::<u32>::allocate(world, 4);
    {
        let e = win.lock(me, LockKind::Shared).expect("lock");
        let err = e.put(me, 4, &[1]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Disp, "{err}");
        assert!(
            err.to_string().contains("Put") && err.detail.contains("displacement 4"),
            "{err}"
        );
        let err = e.get(me, 3, &mut [0, 0]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Disp, "{err}");
        let other = (me + 1) % n;
        if other != me {
            let err = e.put(other, 0, &[1]).unwrap_err();
            assert_eq!(err.class, ErrorClass::RmaSync, "{err}");
            assert!(err.detail.contains(&format!("target {other}")), "{err}");
        }
        let err = win.lock(me, LockKind::Shared).unwrap_err();
        assert_eq!(err.class, ErrorClass::RmaSync, "{err}");
        let err = win.fence().unwrap_err();
        assert_eq!(err.class, ErrorClass::RmaSync, "{err}");
        let err = win.lock_all().unwrap_err();
        assert_eq!(err.class, ErrorClass::RmaSync, "{err}");
    }
    let err = win.lock(n, LockKind::Exclusive).unwrap_err();
    assert_eq!(err.class, ErrorClass::Rank, "{err}");
    assert!(err.detail.contains(&format!("target rank {n}")), "{err}");
    {
        let all = win.lock_all().expect("lock_all");
        let err = all
            .fetch_and_op(n, 0, 1, &SystemOperation::sum())
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Rank, "{err}");
        let err = all
            .fetch_and_op(me, 9, 1, &SystemOperation::sum())
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Disp, "{err}");
        let err = all
            .get_accumulate(me, 0, &[1, 2], &mut [0], &SystemOperation::sum())
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Count, "{err}");
        assert!(
            err.detail.contains("2 elements") && err.detail.contains("1 old"),
            "{err}"
        );
    }
    // A type that is not plain data, also over the program's memory.
    let err = Window::<bool>::try_allocate(world, 1).unwrap_err();
    assert_eq!(err.class, ErrorClass::Unsupported, "{err}");
    let err = Window::try_create(world, vec![true]).unwrap_err();
    assert_eq!(err.class, ErrorClass::Unsupported, "{err}");
    // Only a dynamic window attaches memory.
    let err = win.attach(vec![1]).unwrap_err();
    assert_eq!(err.class, ErrorClass::Arg, "{err}");
    assert!(
        err.to_string().contains("Win_attach") && err.detail.contains("Allocate"),
        "{err}"
    );
    win.free().expect("free");
}

fn created(world: &weft::topology::SimpleCommunicator) {
    const LEN: u64 = 8;
    let (n, me) = (world.size(), world.rank());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    let initial = |r: i32| (0..LEN).map(|i| r as u64 * 100 + i).collect::<Vec<u64>>();
    let win = Window::create(world, initial(me));
    assert_eq!(win.local_len(), LEN as usize);
    {
        let mut f = win.fence_with(Assert::NO_PRECEDE).expect("fence");
        let mut seen = [0; LEN as usize];
        f.get(next, 0, &mut seen).expect("get");
        assert_eq!(
            seen.to_vec(),
            initial(next),
            "rank {next}'s memory as it was lent"
        );
        f.fence_with(Assert::NO_STORE).expect("fence");
        f.put(next, 0, &[1000 + me as u64]).expect("put");
        f.end_with(Assert::NO_SUCCEED).expect("fence");
    }
    assert_eq!(win.read_local(0).expect("read_local"), 1000 + prev as u64);
    let counted = {
        let all = win.lock_all().expect("lock_all");
        let sum = SystemOperation::sum();
        all.accumulate(0, 1, &[1, 2], &sum).expect("accumulate");
        let before = all.fetch_and_op(0, 3, 1, &sum).expect("fetch_and_op");
        all.unlock_all().expect("unlock_all");
        before
    };
    assert!(
        (3..3 + n as u64).contains(&counted),
        "fetch_and_op saw {counted}"
    );
    let memory = win.into_vec().expect("into_vec");
    let mut want = initial(me);
    want[0] = 1000 + prev as u64;
    if me == 0 {
        want[1] += n as u64;
        want[2] += 2 * n as u64;
        want[3] += n as u64;
    }
    assert_eq!(memory, want, "rank {me}'s memory given back");
}

fn assertions(world: &weft::topology::SimpleCommunicator) {
    let me = world.rank();
    let win = Window::<u64>::allocate(world, 1);
    let empty = Assert::NO_PRECEDE | Assert::NO_SUCCEED;
    // Rank 1 enters the empty epoch's fences only after rank 0 has passed both.
    if me == 1 {
        world.process_at_rank(0).receive::<u8>();
    }
    let f = win.fence_with(empty).expect("fence");
    f.end_with(empty).expect("fence");
    if me == 0 && world.size() > 1 {
        world.process_at_rank(1).send(&1u8);
    }
    {
        let e = win
            .lock_with(me, LockKind::Exclusive, Assert::NO_CHECK)
            .expect("lock");
        e.put(me, 0, &[7]).expect("put");
        e.unlock().expect("unlock");
    }
    let all = win.lock_all_with(Assert::NO_CHECK).expect("lock_all");
    let mut v = [0];
    all.get(me, 0, &mut v).expect("get");
    assert_eq!(v, [7]);
    drop(all);
    let err = win
        .lock_with(me, LockKind::Shared, Assert::NO_PRECEDE)
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Assert, "{err}");
    assert!(
        err.to_string().contains("Win_lock") && err.detail.contains("NO_PRECEDE"),
        "{err}"
    );
    let err = win.fence_with(Assert::NO_CHECK).unwrap_err();
    assert_eq!(err.class, ErrorClass::Assert, "{err}");
    let err = win.lock_all_with(Assert::NO_PUT).unwrap_err();
    assert_eq!(err.class, ErrorClass::Assert, "{err}");
    win.free().expect("free");
}

fn dynamic(world: &weft::topology::SimpleCommunicator) {
    let (n, me) = (world.size(), world.rank());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    let win = Window::<u32>::create_dynamic(world);
    let region = win.attach(vec![me as u32; 4]).expect("attach");
    assert_eq!(region.len(), 4);
    let mut disps = vec![0u64; n as usize];
    world.all_gather_into(&(region.disp() as u64), &mut disps[..]);
    let at = disps[next as usize] as usize;
    let sum = SystemOperation::sum();
    {
        let all = win.lock_all().expect("lock_all");
        let mut seen = [0; 4];
        all.get(next, at, &mut seen).expect("get");
        assert_eq!(seen, [next as u32; 4], "rank {next}'s region as attached");
        all.put(next, at + 1, &[100 + me as u32]).expect("put");
        all.accumulate(next, at + 2, &[5], &sum)
            .expect("accumulate");
        // A get (a put by message reports at the unlock): checked by the target when it is
        // on another node.
        let err = all.get(next, at + 3, &mut [0, 0]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Disp, "{err}");
        all.unlock_all().expect("unlock_all");
    }
    world.barrier();
    win.detach(region).expect("detach");
    let err = win.detach(region).unwrap_err();
    assert_eq!(err.class, ErrorClass::Arg, "{err}");
    world.barrier();
    {
        let all = win.lock_all().expect("lock_all");
        let err = all.get(next, at, &mut [0]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Disp, "{err}");
    }
    let err = win.attach(Vec::new()).unwrap_err();
    assert_eq!(err.class, ErrorClass::Arg, "{err}");
    let regions = win.into_regions().expect("into_regions");
    let m = me as u32;
    assert_eq!(
        regions,
        [vec![m, 100 + prev as u32, m + 5, m]],
        "rank {me}'s region"
    );
}

fn typed(world: &weft::topology::SimpleCommunicator) {
    const LEN: usize = 16;
    let (n, me) = (world.size(), world.rank());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    let win = Window::<i32>::allocate(world, LEN);
    assert_eq!(win.flavor(), Flavor::Allocate);
    assert_eq!(win.model(), MemoryModel::Unified);
    assert_eq!((win.disp_unit(), win.local_len()), (4, LEN));
    assert!(!win.base().is_null());
    let info = win.info();
    assert!(
        info.contains(&("accumulate_ordering".into(), "rar,raw,war,waw".into())),
        "{info:?}"
    );
    // Every other element, from element 1 of the target's part (and of a local buffer).
    let every_other = UserDatatype::vector(4, 1, 2, &i32::equivalent_datatype());
    let sum = SystemOperation::sum();
    {
        let mut f = win.fence().expect("fence");
        let mine: Vec<i32> = (0..4).map(|k| me * 10 + k).collect();
        f.put_typed(&mine[..], Target::new(next, 1, 1, &every_other))
            .expect("put_typed");
        f.accumulate_typed(
            &[1, 1, 1, 1][..],
            Target::new(next, 8, 1, &every_other),
            &sum,
        )
        .expect("accumulate_typed");
        f.fence().expect("fence");
        // The target's strided elements into a strided origin buffer.
        let mut spread = [-1i32; 8];
        {
            // SAFETY: one element of the vector type (7 ints) fits in 8.
            let mut view =
                unsafe { MutView::with_count_and_datatype(&mut spread[..], 1, &every_other) };
            f.get_typed(&mut view, Target::new(next, 1, 1, &every_other))
                .expect("get_typed");
        }
        let theirs = |k: i32| me * 10 + k;
        assert_eq!(
            spread,
            [theirs(0), -1, theirs(1), -1, theirs(2), -1, theirs(3), -1],
            "rank {next}'s strided elements as rank {me} put them"
        );
        let mut old = [0i32; 4];
        f.get_accumulate_typed(
            &[5, 5, 5, 5][..],
            &mut old[..],
            Target::new(next, 8, 1, &every_other),
            &sum,
        )
        .expect("get_accumulate_typed");
        assert_eq!(old, [1; 4], "the accumulate before");
        // Errors: sides of different sizes, an accumulate of another type than the window's.
        let err = f
            .put_typed(&[1i32; 3][..], Target::new(next, 1, 1, &every_other))
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Type, "{err}");
        assert!(
            err.to_string().contains("Put") && err.detail.contains("12 bytes"),
            "{err}"
        );
        let doubles = UserDatatype::vector(2, 1, 2, &f64::equivalent_datatype());
        let err = f
            .accumulate_typed(&[1.0f64, 2.0][..], Target::new(next, 0, 1, &doubles), &sum)
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Type, "{err}");
        let err = f
            .get_typed(
                &mut [0i32; 4][..],
                Target::new(next, LEN - 2, 1, &every_other),
            )
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Disp, "{err}");
        f.end().expect("fence");
    }
    let mut local = [0i32; LEN];
    {
        let e = win.lock(me, LockKind::Shared).expect("lock");
        e.get(me, 0, &mut local).expect("get");
    }
    let from = |k: usize| prev * 10 + k as i32;
    for (i, &v) in local.iter().enumerate() {
        let want = match i {
            1 | 3 | 5 | 7 => from((i - 1) / 2),
            8 | 10 | 12 | 14 => 6,
            _ => 0,
        };
        assert_eq!(v, want, "rank {me}'s element {i}: {local:?}");
    }
    // Every member has read its part before the others write it again.
    world.barrier();
    // The request-based operations, in a lock_all epoch.
    let all = win.lock_all().expect("lock_all");
    // Buffers outlive the scope their requests belong to.
    let (data, three) = ([me + 100; 2], [3]);
    let (mut back, mut old, mut spare) = ([0; 2], [0], [0]);
    let (mine, ones, mut typed_old) = ([me; 4], [1; 4], [0; 4]);
    let mut spread = [-1i32; 8];
    // SAFETY: one element of the vector type (7 ints) fits in 8.
    let mut view = unsafe { MutView::with_count_and_datatype(&mut spread[..], 1, &every_other) };
    weft::request::scope(|scope| {
        // Typed forms on every other element: from 9 (zero so far) and from 8 (6 each).
        let odd = Target::new(next, 9, 1, &every_other);
        all.rput_typed(scope, &mine[..], odd)
            .expect("rput_typed")
            .wait();
        all.flush_target(next).expect("flush_target");
        let err = all.flush_target(n).unwrap_err();
        assert_eq!(err.class, ErrorClass::Rank, "{err}");
        all.rget_typed(scope, &mut view, odd)
            .expect("rget_typed")
            .wait();
        let even = Target::new(next, 8, 1, &every_other);
        all.raccumulate_typed(scope, &ones[..], even, &sum)
            .expect("raccumulate_typed")
            .wait();
        let r = all
            .rget_accumulate_typed(scope, &ones[..], &mut typed_old[..], even, &sum)
            .expect("rget_accumulate_typed");
        assert_eq!(
            r.wait_for_data(),
            [7; 4],
            "the values rget_accumulate_typed saw"
        );
        let err = all.rput_typed(scope, &ones[..3], odd).unwrap_err();
        assert_eq!(err.class, ErrorClass::Type, "{err}");
        assert!(err.to_string().contains("Rput"), "{err}");
        all.rput(scope, next, 0, &data).expect("rput").wait();
        all.flush().expect("flush");
        let got = all
            .rget(scope, next, 0, &mut back)
            .expect("rget")
            .wait_for_data();
        assert_eq!(got, [me + 100, me + 100], "rget after rput");
        all.raccumulate(scope, next, 2, &three, &sum)
            .expect("raccumulate")
            .wait();
        let r = all
            .rget_accumulate(scope, next, 2, &[4], &mut old, &sum)
            .expect("rget_accumulate");
        assert_eq!(r.wait_for_data(), [3], "the value rget_accumulate saw");
        let err = all.rget(scope, n, 0, &mut spare).unwrap_err();
        assert_eq!(err.class, ErrorClass::Rank, "{err}");
        assert!(err.to_string().contains("Rget"), "{err}");
    });
    assert_eq!(
        spread,
        [me, -1, me, -1, me, -1, me, -1],
        "rget_typed after rput_typed"
    );
    all.unlock_all().expect("unlock_all");
    win.free().expect("free");
}

fn lazy(world: &weft::topology::SimpleCommunicator) {
    let (n, me) = (world.size(), world.rank());
    let (a, b) = (
        Window::<u64>::allocate(world, 1),
        Window::<u64>::allocate(world, 1),
    );
    // An empty epoch on a target holding its own lock (taken eagerly: its loads and stores
    // are protected too) does not wait for it.
    let own = (me == 0).then(|| a.lock(0, LockKind::Exclusive).expect("lock"));
    world.barrier();
    if me == 0 {
        for r in 1..n {
            world.process_at_rank(r).receive::<u64>();
        }
    } else {
        drop(a.lock(0, LockKind::Exclusive).expect("lock"));
        drop(a.lock(0, LockKind::Shared).expect("lock"));
        world.process_at_rank(0).send(&1u64);
    }
    drop(own);
    // Several targets locked on one window, released out of order: each held until its drop.
    if n >= 3 {
        let e1 = a.lock(1, LockKind::Shared).expect("lock 1");
        let e2 = a.lock(2, LockKind::Shared).expect("lock 2");
        drop(e1);
        let err = a.lock(2, LockKind::Shared).unwrap_err();
        assert_eq!(err.class, ErrorClass::RmaSync, "{err}");
        let e1 = a.lock(1, LockKind::Shared).expect("lock 1 again");
        drop(e2);
        drop(e1);
    }
    // Every lock released: a fence epoch opens.
    a.fence().expect("fence").end().expect("fence");
    // Both windows locked in one order; odd ranks operate on b first, even ones on a: the
    // deferred lock on a is taken at b's lock call, so the order of acquisition is the
    // program's and nobody deadlocks.
    let bump = |e: &weft::window::LockEpoch<'_, u64>| {
        let mut v = [0u64];
        e.get(0, 0, &mut v).expect("get");
        e.put(0, 0, &[v[0] + 1]).expect("put");
    };
    for _ in 0..ROUNDS {
        let ea = a.lock(0, LockKind::Exclusive).expect("lock a");
        let eb = b.lock(0, LockKind::Exclusive).expect("lock b");
        if me % 2 == 1 {
            bump(&eb);
            bump(&ea);
        } else {
            bump(&ea);
            bump(&eb);
        }
        drop(eb);
        drop(ea);
    }
    world.barrier();
    for w in [&a, &b] {
        let e = w.lock(0, LockKind::Shared).expect("lock");
        let mut v = [0u64];
        e.get(0, 0, &mut v).expect("get");
        assert_eq!(v[0], n as u64 * ROUNDS, "a lock epoch lost an increment");
    }
    world.barrier();
    // Loads and stores through shared_query's pointer are protected by exclusive epochs.
    let (p, _) = a.shared_query(0).expect("shared_query");
    for _ in 0..ROUNDS * 10 {
        let _e = a.lock(0, LockKind::Exclusive).expect("lock");
        // SAFETY: rank 0's part, mapped for the window's life; the exclusive lock keeps every
        // other access away, its Acquire and Release order these with theirs.
        unsafe { p.write_volatile(p.read_volatile() + 1) };
    }
    world.barrier();
    a.sync().expect("sync");
    // SAFETY: as above; every write is before the barrier, ordered by the last unlock's
    // Release, the barrier and the sync.
    let v = unsafe { p.read_volatile() };
    assert_eq!(
        v,
        n as u64 * ROUNDS * 11,
        "a store through shared_query's pointer was lost"
    );
    world.barrier();
    a.free().expect("free");
    b.free().expect("free");
}

fn unshared(world: &weft::topology::SimpleCommunicator) {
    let err = Window::<u64>::try_allocate_shared(world, 1).unwrap_err();
    assert_eq!(err.class, ErrorClass::Comm, "{err}");
    assert!(err.detail.contains("nodes"), "{err}");
    let win = Window::<u64>::allocate(world, 1);
    win.free().expect("free");
}

fn main() {
    let case = std::env::args().nth(1).expect("usage: rma_suite CASE");
    let universe = weft::initialize().expect("initialize");
    let world = universe.world();
    match case.as_str() {
        "counter" => counter(&world),
        "atomics" => atomics(&world),
        "mixed" => mixed(&world),
        "cas" => cas(&world),
        "fence" => fence(&world),
        "asleep" => asleep(&world),
        "errors" => errors(&world),
        "pscw" => pscw(&world),
        "shared" => shared(&world),
        "unshared" => unshared(&world),
        "stream" => stream(&world),
        "created" => created(&world),
        "assertions" => assertions(&world),
        "dynamic" => dynamic(&world),
        "typed" => typed(&world),
        "lazy" => lazy(&world),
        other => panic!("rma_suite: no case {other}"),
    }
    world.barrier();
    if world.rank() == 0 {
        println!("rma_suite {case}: ok on {} ranks", world.size());
    }
}
