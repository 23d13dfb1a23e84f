//! Operating-system work: shared-memory segments, futex wait/wake on shared words,
//! cross-memory copy, clocks. All `unsafe` OS calls live here, each with its invariant
//! written down. Nothing here knows about messages or ranks.

pub mod cma;
pub mod cpu;
pub mod futex;
pub mod huge;
pub mod log_limit;
pub mod membarrier;
pub mod net;
#[cfg(feature = "pmix")]
pub mod pmix;
pub mod segment;
pub mod thread;
pub mod wake;

use std::io;

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

/// Bytes of the second-level cache of CPU 0 (each CPU's own on the machines here), read once
/// from sysfs; 0 when the system does not say.
pub fn l2_cache_bytes() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
        let read = |index: &std::path::Path, what: &str| {
            std::fs::read_to_string(index.join(what)).map(|s| s.trim().to_owned())
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .flatten()
            .map(|e| e.path())
            .filter(|index| read(index, "level").is_ok_and(|l| l == "2"))
            .filter(|index| read(index, "type").is_ok_and(|t| t != "Instruction"))
            .find_map(|index| read(&index, "size").ok().and_then(|s| cache_size(&s)))
            .unwrap_or(0)
    })
}

/// A cache size as sysfs writes it ("2048K", "1M", "512").
fn cache_size(text: &str) -> Option<usize> {
    let (digits, unit) = match text.as_bytes().last()? {
        b'K' => (&text[..text.len() - 1], 1 << 10),
        b'M' => (&text[..text.len() - 1], 1 << 20),
        b'G' => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

/// CPUs online on this machine (the same answer for every process on it, whatever its
/// affinity), read once.
pub fn online_cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| {
        // SAFETY: sysconf reads a system value; no memory is passed.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
    })
}

/// The CPU the calling thread runs on now (`None` when the system cannot say).
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments and only returns a value (vDSO on Linux).
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).ok()
}

/// Microseconds of `CLOCK_MONOTONIC` (one clock for every process of the machine), modulo
/// 2^32: for comparing nearby instants across processes with wrapping arithmetic.
pub fn monotonic_us() -> u32 {
    // SAFETY: an all-zero timespec is valid; clock_gettime writes it (vDSO on Linux).
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000)
        .wrapping_add(ts.tv_nsec as u64 / 1000) as u32
}

/// This host's name, from uname(2).
pub fn hostname() -> String {
    // SAFETY: utsname is plain old data, so all-zero is a valid value; uname fills it and
    // NUL-terminates every field (POSIX).
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown-host".into();
    }
    // SAFETY: uname returned 0, so `nodename` holds a NUL-terminated string.
    let name = unsafe { std::ffi::CStr::from_ptr(u.nodename.as_ptr()) };
    name.to_string_lossy().into_owned()
}

/// Takes ownership of socket `fd`, inherited from the launcher, marking it close-on-exec so
/// programs this process starts do not inherit it.
///
/// # Safety
/// `fd` is an open descriptor that nothing else in this process owns or will use (I/O
/// safety, as for `FromRawFd::from_raw_fd`): the returned stream owns it and closes it when
/// dropped. Call this at most once per descriptor.
pub unsafe fn adopt_inherited_socket(fd: i32) -> std::io::Result<std::os::unix::net::UnixStream> {
    use std::os::fd::FromRawFd;
    // SAFETY: fcntl on any integer is sound; it only reports EBADF for a closed fd.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is open (checked above); setting FD_CLOEXEC changes no memory.
    unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
    // SAFETY: `fd` is open (checked above) and, by the caller's contract, owned by nobody
    // else and adopted once, so the UnixStream is its sole owner.
    // Reads and writes on a UnixStream are plain read(2)/write(2), valid on any stream socket.
    Ok(unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) })
}

/// Copies `n` bytes from `src` to `dst`, inline for the tiny sizes of small messages
/// (a `memcpy` call costs more than the copy there) and nothing at all for `n == 0`.
///
/// # Safety
/// `src` must be readable and `dst` writable for `n` bytes, and the ranges must not overlap.
#[inline(always)]
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: (every arm) the caller guarantees `n` readable bytes at `src` and `n` writable,
    // non-overlapping bytes at `dst`; each unaligned access stays inside `0..n` (the two
    // accesses of an arm overlap in the middle when `n` is not twice their width).
    unsafe {
        match n {
            0 => {}
            1..=3 => {
                *dst = *src;
                *dst.add(n / 2) = *src.add(n / 2);
                *dst.add(n - 1) = *src.add(n - 1);
            }
            4..=7 => {
                let a = (src as *const u32).read_unaligned();
                let b = (src.add(n - 4) as *const u32).read_unaligned();
                (dst as *mut u32).write_unaligned(a);
                (dst.add(n - 4) as *mut u32).write_unaligned(b);
            }
            8..=16 => {
                let a = (src as *const u64).read_unaligned();
                let b = (src.add(n - 8) as *const u64).read_unaligned();
                (dst as *mut u64).write_unaligned(a);
                (dst.add(n - 8) as *mut u64).write_unaligned(b);
            }
            _ => std::ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn copy_bytes_every_small_size() {
        let src: Vec<u8> = (1..=40).collect();
        for n in 0..=40 {
            let mut dst = vec![0u8; 41];
            // SAFETY: both buffers hold at least n bytes and are distinct.
            unsafe { super::copy_bytes(src.as_ptr(), dst.as_mut_ptr(), n) };
            assert_eq!(&dst[..n], &src[..n], "n = {n}");
            assert!(dst[n..].iter().all(|&b| b == 0), "wrote past n = {n}");
        }
    }

    #[test]
    fn random_hex_has_the_right_shape() {
        let a = super::random_hex(16).unwrap();
        let b = super::random_hex(16).unwrap();
        assert_eq!(a.len(), 32);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }

    #[test]
    fn cache_sizes_read_as_sysfs_writes_them() {
        assert_eq!(super::cache_size("2048K"), Some(2 << 20));
        assert_eq!(super::cache_size("1M"), Some(1 << 20));
        assert_eq!(super::cache_size("512"), Some(512));
        assert_eq!(super::cache_size("K"), None);
        assert_eq!(super::cache_size("lots"), None);
        // This machine's, when it says: a second-level cache is more than a few lines.
        let l2 = super::l2_cache_bytes();
        assert!(l2 == 0 || l2 >= 64 << 10, "{l2}");
    }
}
