//! Huge pages under buffers that other processes copy from or into.
//!
//! A single copy from another process (`process_vm_readv`, [`super::cma`]) pins the other
//! process's pages one by one before copying them; on 4 KiB pages that costs as much as the
//! copy. On the Intel VM (`bench/c/copy_floor.c` with the buffers on 2 MiB pages, 4 ranks'
//! worth of 4 MiB blocks, µs for the kernel's copies): 5,014-6,039 on 4 KiB pages, 2,903-4,017
//! with the sources on 2 MiB pages, 3,013-3,230 with both sides. So a member that lends a
//! large buffer for single copies asks the kernel to move it onto 2 MiB pages
//! (`MADV_COLLAPSE`, Linux 6.1): the contents and addresses stay, only the pages under them
//! change. A program's buffers usually serve many calls, and moving one costs about a copy of
//! it, so a buffer moves the second time it is lent ([`lend`]), never the first, and once.

use std::sync::Mutex;

/// The huge page size (x86-64 and aarch64 with 4 KiB base pages).
pub const HUGE_PAGE: usize = 2 << 20;

/// How many lent ranges [`lend`] remembers (the most recent ones).
const REMEMBERED: usize = 32;

/// What [`lend`] knows of a range of whole huge pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// Lent once: moved if lent again.
    Once,
    /// Moved (or the kernel would not: not asked again).
    Moved,
}

/// The ranges [`lend`] has seen, most recent last, and whether the kernel can move pages at
/// all (false after it refused the advice itself).
struct Lent {
    ranges: Vec<((usize, usize), Seen)>,
    kernel_can: bool,
}

static LENT: Mutex<Lent> = Mutex::new(Lent {
    ranges: Vec::new(),
    kernel_can: true,
});

/// The whole huge pages inside `len` bytes at `addr`: (start, end), or `None` when none fits.
pub fn whole_huge_pages(addr: usize, len: usize) -> Option<(usize, usize)> {
    let start = addr.checked_add(HUGE_PAGE - 1)? & !(HUGE_PAGE - 1);
    let end = addr.checked_add(len)? & !(HUGE_PAGE - 1);
    (end > start).then_some((start, end))
}

/// Says that `buf` is lent to other processes for single copies: the second time the same
/// range of whole huge pages inside it is lent, its pages are moved onto huge pages
/// (`MADV_COLLAPSE`); a buffer with no whole huge page inside is left alone. Returns what the
/// kernel answered when it was asked. Failures change nothing for the caller (the copies work
/// on any pages): a kernel without the advice is not asked again, nor is a range it could
/// not move.
pub fn lend(buf: &[u8]) -> Option<Result<(), i32>> {
    let range = whole_huge_pages(buf.as_ptr() as usize, buf.len())?;
    let mut lent = LENT.lock().unwrap_or_else(|e| e.into_inner());
    lent.lend(range, collapse)
}

impl Lent {
    /// [`lend`]'s bookkeeping for `range`, with `collapse` the call that moves pages.
    fn lend(
        &mut self,
        range: (usize, usize),
        collapse: impl FnOnce((usize, usize)) -> Result<(), i32>,
    ) -> Option<Result<(), i32>> {
        if !self.kernel_can {
            return None;
        }
        match self.ranges.iter().position(|(r, _)| *r == range) {
            Some(i) if self.ranges[i].1 == Seen::Moved => None,
            Some(i) => {
                self.ranges[i].1 = Seen::Moved;
                let answer = collapse(range);
                if answer == Err(libc::EINVAL) {
                    self.kernel_can = false;
                }
                Some(answer)
            }
            None => {
                if self.ranges.len() == REMEMBERED {
                    self.ranges.remove(0);
                }
                self.ranges.push((range, Seen::Once));
                None
            }
        }
    }
}

/// Asks the kernel to put the huge pages `range` (aligned, inside a buffer the caller
/// borrows) on huge pages now; the error number if it did not.
fn collapse((start, end): (usize, usize)) -> Result<(), i32> {
    // SAFETY: the range lies inside a live buffer of this process (the caller's borrow), and
    // MADV_COLLAPSE changes neither its contents nor its addresses, only the physical pages
    // behind them (the kernel copies them under its own locks); on an address it cannot move
    // it fails and changes nothing.
    let r = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_COLLAPSE) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }
}

/// How many kB of the mapping of this process that holds `addr` lie on huge pages
/// (AnonHugePages in /proc/self/smaps; 0 when unknown).
pub fn anon_huge_kb_at(addr: usize) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut inside = false;
    for line in smaps.lines() {
        // A mapping's first line starts with its range, "lo-hi" in hex.
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)) {
                inside = (lo..hi).contains(&addr);
                continue;
            }
        }
        if let Some(kb) = line.strip_prefix("AnonHugePages:").filter(|_| inside) {
            return kb.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_huge_pages_inside_a_buffer_count() {
        assert_eq!(whole_huge_pages(0, HUGE_PAGE - 1), None);
        assert_eq!(whole_huge_pages(0, HUGE_PAGE), Some((0, HUGE_PAGE)));
        assert_eq!(whole_huge_pages(16, 2 * HUGE_PAGE), Some((HUGE_PAGE, 2 * HUGE_PAGE)));
        assert_eq!(whole_huge_pages(16, 2 * HUGE_PAGE - 17), None);
        assert_eq!(whole_huge_pages(usize::MAX - 8, 64), None);
    }

    #[test]
    fn moved_once_on_the_second_loan_forgotten_after_32_others_and_never_after_einval() {
        let mut lent = Lent { ranges: Vec::new(), kernel_can: true };
        let r = |i: usize| (i * HUGE_PAGE, (i + 1) * HUGE_PAGE);
        let never = |_| -> Result<(), i32> { panic!("asked to move on a first loan") };
        assert_eq!(lent.lend(r(0), never), None);
        assert_eq!(lent.lend(r(0), |got| if got == r(0) { Ok(()) } else { Err(0) }), Some(Ok(())));
        assert_eq!(lent.lend(r(0), never), None, "moved already");
        // A range the kernel could not move (EAGAIN) is not asked about again either.
        lent.lend(r(1), never);
        assert_eq!(lent.lend(r(1), |_| Err(libc::EAGAIN)), Some(Err(libc::EAGAIN)));
        assert_eq!(lent.lend(r(1), never), None);
        // After 32 other ranges, the first is a first loan again.
        for i in 2..2 + REMEMBERED {
            lent.lend(r(i), never);
        }
        assert_eq!(lent.lend(r(0), never), None);
        assert_eq!(lent.lend(r(0), |_| Ok(())), Some(Ok(())));
        // A kernel without the advice (EINVAL) is asked no more, for any range.
        lent.lend(r(100), never);
        assert_eq!(lent.lend(r(100), |_| Err(libc::EINVAL)), Some(Err(libc::EINVAL)));
        lent.lend(r(101), never);
        assert_eq!(lent.lend(r(101), never), None);
    }

    #[test]
    fn a_buffer_lent_twice_moves_onto_huge_pages_and_keeps_its_bytes() {
        let mut buf = vec![0u8; 3 * HUGE_PAGE];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let (start, _) = whole_huge_pages(buf.as_ptr() as usize, buf.len()).expect("one inside");
        assert_eq!(lend(&buf), None, "the first loan moves nothing");
        let answer = lend(&buf);
        assert_eq!(lend(&buf), None, "a moved buffer is not asked about again");
        assert!(buf.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
        match answer {
            Some(Ok(())) => assert!(
                anon_huge_kb_at(start) >= (HUGE_PAGE as u64 >> 10),
                "moved, yet no huge page under {start:#x}"
            ),
            // Kernels before 6.1 do not know the advice; memory too fragmented for a huge
            // page gets EAGAIN or ENOMEM: then nothing moved, and the copies work as before.
            Some(Err(e)) => eprintln!("MADV_COLLAPSE refused here (errno {e}): nothing moved"),
            None => eprintln!("MADV_COLLAPSE refused earlier in this process: not asked"),
        }
    }
}
