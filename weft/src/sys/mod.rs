//! Operating-system work: shared-memory segments, futex wait/wake on shared words,
//! cross-memory copy, clocks. All `unsafe` OS calls live here, each with its invariant
//! written down. Nothing here knows about messages or ranks.

pub mod cma;
pub mod futex;
pub mod segment;

use std::io;

/// The size of a memory page, in bytes.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions; it only reads a system constant.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as usize
    } else {
        4096
    }
}

/// Fills `buf` with random bytes from the kernel (`getrandom(2)`).
pub fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is a valid, exclusively borrowed buffer of `rest.len()` bytes, which
        // is exactly what the kernel writes at most.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

/// `2 * n` lowercase hex characters from `n` random bytes.
pub fn random_hex(n: usize) -> io::Result<String> {
    let mut b = vec![0u8; n];
    random_bytes(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// This process's id.
pub fn pid() -> u32 {
    std::process::id()
}

/// Pins the calling thread to CPU `cpu` (benchmarks; the runtime does not pin by default).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit inside `set` (it checks the index against the set size).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size we pass; pid 0 means this thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn random_hex_has_the_right_shape() {
        let a = super::random_hex(16).unwrap();
        let b = super::random_hex(16).unwrap();
        assert_eq!(a.len(), 32);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
        assert!(super::page_size().is_power_of_two());
    }
}
