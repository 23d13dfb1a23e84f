//! Large buffers used again and again, as programs use them: the same send and receive
//! buffers through several all-to-alls, allgathers, scatters and gathers of 1 MiB blocks, the
//! data changed and checked every time. The buffers that members lend one another for single
//! copies move onto huge pages the second time (`WEFT_HUGE_PAGES`); the member reports how
//! many kB of its send buffer's mapping are on huge pages, for the test to check.

use super::coverage::values;
use weft::topology::SimpleCommunicator;
use weft::traits::*;

/// Runs the case; prints rank 0's huge-page count of its send buffer's mapping.
pub fn run(c: &SimpleCommunicator) {
    let (me, n) = (c.rank(), c.size() as usize);
    let per = (1 << 20) / 8; // 1 MiB of u64 a block
    let root = c.size() - 1;
    let mut send = vec![0u64; per * n];
    let mut recv = vec![0u64; per * n];
    let mut block = vec![0u64; per];
    for round in 0..4u64 {
        send.copy_from_slice(&values(me, per * n, 70 + round));
        c.all_to_all_into(&send[..], &mut recv[..]);
        for q in 0..n {
            let theirs = values(q as i32, per * n, 70 + round);
            let m = me as usize;
            assert!(
                recv[q * per..(q + 1) * per] == theirs[m * per..(m + 1) * per],
                "round {round}: 1 MiB alltoall from {q}"
            );
        }
        c.all_gather_into(&send[..per], &mut recv[..]);
        for q in 0..n {
            assert!(
                recv[q * per..(q + 1) * per] == values(q as i32, per * n, 70 + round)[..per],
                "round {round}: 1 MiB allgather from {q}"
            );
        }
        let rp = c.process_at_rank(root);
        if me == root {
            rp.scatter_into_root(&send[..], &mut block[..]);
        } else {
            rp.scatter_into(&mut block[..]);
        }
        let m = me as usize;
        let roots = values(root, per * n, 70 + round);
        assert!(
            block[..] == roots[m * per..(m + 1) * per],
            "round {round}: scatter"
        );
        if me == root {
            rp.gather_into_root(&block[..], &mut recv[..]);
            assert!(recv == roots, "round {round}: gather");
        } else {
            rp.gather_into(&block[..]);
        }
    }
    if me == 0 {
        println!(
            "huge pages under the send buffer: {} kB",
            weft::sys::huge::anon_huge_kb_at(send.as_ptr() as usize)
        );
    }
}
