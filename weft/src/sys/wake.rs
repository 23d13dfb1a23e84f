//! A wake-up file descriptor that other processes of the job can signal: an eventfd(2) its
//! owner can `poll(2)` together with sockets, which a peer duplicates into its own table
//! with pidfd_getfd(2) (Linux 5.6; the same permission as process_vm_readv, so only
//! processes of the same user, and no name in any file system to leave behind).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A nonblocking eventfd.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd has no memory arguments; it returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by eventfd and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A duplicate of descriptor `fd` of process `pid`, in this process.
pub fn take_from(pid: u32, fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, no memory; it returns a descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
    if pidfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `pidfd` was just returned by pidfd_open and is owned by nobody else.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    // SAFETY: pidfd_getfd takes two descriptors and flags, no memory; it returns a new
    // descriptor (close-on-exec) or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_pidfd_getfd,
            pidfd.as_raw_fd(),
            fd as libc::c_int,
            0u32,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by pidfd_getfd and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Signals an eventfd (adds 1). A full counter (it cannot be, as the owner drains it) or any
/// other failure is ignored: the owner's sleep has a timeout.
pub fn signal(fd: &impl AsRawFd) {
    let one: u64 = 1;
    // SAFETY: writes the 8 bytes of a live u64 to an open descriptor.
    unsafe { libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
}

/// Resets an eventfd's counter (a nonblocking read; nothing to read is fine).
pub fn drain(fd: &impl AsRawFd) {
    let mut v: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live, exclusively borrowed u64.
    unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::net::{self, POLLIN};
    use std::time::Duration;

    fn readable(fd: &OwnedFd) -> bool {
        let mut fds = [net::poll_entry(fd.as_raw_fd(), POLLIN)];
        net::poll(&mut fds, Duration::ZERO).unwrap() == 1
    }

    #[test]
    fn a_duplicate_taken_through_a_pidfd_signals_the_original() {
        let e = eventfd().unwrap();
        assert!(!readable(&e));
        let dup = take_from(crate::sys::pid(), e.as_raw_fd()).unwrap();
        signal(&dup);
        signal(&dup);
        assert!(readable(&e));
        drain(&e);
        assert!(!readable(&e), "one read resets the counter");
    }

    #[test]
    fn taking_a_descriptor_that_is_not_open_is_an_error() {
        let e = take_from(crate::sys::pid(), 999_999).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{e}");
    }
}
