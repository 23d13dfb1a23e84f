//! Shared-memory segments for ranks of one node: files in /dev/shm that never have a name.
//!
//! Why no name: a named segment (`shm_open`) outlives every process that maps it until
//! someone unlinks it, and whoever is meant to unlink it can be SIGKILLed first (the launcher
//! killed during start-up took its ranks with it before they unlinked: the names stayed in
//! /dev/shm for good). So a segment is created unnamed (`O_TMPFILE` in /dev/shm) and lives
//! exactly as long as a descriptor or a mapping of it does, whoever dies when. A peer on the
//! same node opens it through the creator's descriptor table
//! (`/proc/<pid>/fd/<fd>`, which needs the same permission as reading the creator's
//! `/proc/<pid>/fd` listing: same user, not a ptrace attach, so Yama does not refuse it);
//! [`Segment::handle`] is what the creator publishes for that, and it names the file's
//! device and inode too, so a recycled pid or descriptor number is detected, not mapped.
//!
//! Space is reserved when a segment is created (`posix_fallocate`): tmpfs otherwise hands
//! out pages on first touch, and a full /dev/shm then kills the process that touches one
//! with SIGBUS, long after start-up. Reserved, a too-small /dev/shm is an error at creation,
//! and [`space`] says how much there is.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// Where segments live (a tmpfs; its size limits how much the ranks of a node can share).
pub const DIR: &str = "/dev/shm";

/// A mapping of a shared-memory segment, and (for the creator) the descriptor peers open it
/// through. Unmapped and closed on drop; the memory is freed when the last process holding
/// it lets go.
#[derive(Debug)]
pub struct Segment {
    ptr: NonNull<u8>,
    len: usize,
    /// Kept open by the creator (never read): peers open the segment through it.
    _fd: Option<OwnedFd>,
    handle: String,
}

// SAFETY: a Segment is an owned mapping (like a Box<[u8]> that other processes can also see);
// it has no thread affinity. Concurrent access to its bytes goes through raw pointers whose
// users are responsible for synchronisation.
unsafe impl Send for Segment {}
// SAFETY: `&Segment` hands out only the base pointer, length and handle; see Send.
unsafe impl Sync for Segment {}

fn cpath(path: &str) -> io::Result<CString> {
    CString::new(path).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open and `st` is a valid, exclusively borrowed stat buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn map(fd: &OwnedFd, len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh shared mapping of `len` bytes of an open file at an address the kernel
    // chooses; it aliases no Rust object.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(NonNull::new(p.cast()).expect("mmap returned null"))
}

/// Free and total bytes of the file system segments live on (`statvfs` of [`DIR`]).
pub fn space() -> io::Result<(u64, u64)> {
    let c = cpath(DIR)?;
    // SAFETY: an all-zero `statvfs` is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a valid, exclusively borrowed buffer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let block = st.f_frsize as u64;
    Ok((st.f_bavail as u64 * block, st.f_blocks as u64 * block))
}

/// Why [`Segment::create`] failed: the step, for the caller's message.
#[derive(Debug)]
pub struct CreateError {
    /// The call that failed (`open O_TMPFILE`, `posix_fallocate`, `mmap`).
    pub call: &'static str,
    /// Its error.
    pub error: io::Error,
}

impl std::fmt::Display for CreateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.call, self.error)
    }
}

impl Segment {
    /// Creates an unnamed segment of `len` bytes in [`DIR`] (mode 0600), zero-filled, with
    /// all its space reserved, and maps it.
    pub fn create(len: usize) -> Result<Segment, CreateError> {
        let fail = |call, error| CreateError { call, error };
        if len == 0 {
            return Err(fail(
                "create",
                io::Error::new(io::ErrorKind::InvalidInput, "empty segment"),
            ));
        }
        let dir = cpath(DIR).map_err(|e| fail("open", e))?;
        // SAFETY: `dir` is a valid NUL-terminated path; O_TMPFILE makes an unnamed file in
        // that directory and returns a new descriptor that we own.
        let raw = unsafe {
            libc::open(
                dir.as_ptr(),
                libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
                0o600,
            )
        };
        if raw < 0 {
            return Err(fail("open O_TMPFILE", io::Error::last_os_error()));
        }
        // SAFETY: open succeeded, so `raw` is an open descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // The umask could only clear bits; set 0600 explicitly anyway so the mode never
        // depends on the environment.
        // SAFETY: fd is an open descriptor we own.
        unsafe { libc::fchmod(fd.as_raw_fd(), 0o600) };
        // SAFETY: fd is an open regular file; posix_fallocate sets its size to `len` and
        // allocates every block (tmpfs: every page), or fails without changing the mapping
        // of anything.
        let rc = unsafe { libc::posix_fallocate(fd.as_raw_fd(), 0, len as libc::off_t) };
        if rc != 0 {
            return Err(fail("posix_fallocate", io::Error::from_raw_os_error(rc)));
        }
        let st = fstat(&fd).map_err(|e| fail("fstat", e))?;
        let ptr = map(&fd, len).map_err(|e| fail("mmap", e))?;
        let handle = format!(
            "{}.{}.{:x}.{:x}",
            std::process::id(),
            fd.as_raw_fd(),
            st.st_dev,
            st.st_ino
        );
        Ok(Segment {
            ptr,
            len,
            _fd: Some(fd),
            handle,
        })
    }

    /// What a process on this node passes to [`Segment::open`] to map this segment (while
    /// this process lives and holds it): `<pid>.<fd>.<dev>.<inode>`, ASCII without spaces.
    pub fn handle(&self) -> &str {
        &self.handle
    }

    /// Opens and maps the segment another process of this node created, by its
    /// [`Segment::handle`]; its length is the segment's size.
    pub fn open(handle: &str) -> io::Result<Segment> {
        let bad = || io::Error::new(io::ErrorKind::InvalidInput, "not a segment handle");
        let mut parts = handle.split('.');
        let mut next_num = |radix| {
            parts
                .next()
                .and_then(|p| u64::from_str_radix(p, radix).ok())
                .ok_or_else(bad)
        };
        let (pid, fd, dev, ino) = (next_num(10)?, next_num(10)?, next_num(16)?, next_num(16)?);
        let path = cpath(&format!("/proc/{pid}/fd/{fd}"))?;
        // SAFETY: `path` is a valid NUL-terminated path; open returns a new descriptor that
        // we own (O_NOFOLLOW is not wanted: the /proc entry is the magic link we follow).
        let raw = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open succeeded, so `raw` is an open descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let st = fstat(&fd)?;
        if st.st_dev as u64 != dev || st.st_ino as u64 != ino {
            // The creator is gone and its pid or descriptor number now means another file.
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the segment is gone (its creator's descriptor now names another file)",
            ));
        }
        let len = st.st_size as usize;
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "empty segment"));
        }
        Ok(Segment {
            ptr: map(&fd, len)?,
            len,
            _fd: None,
            handle: handle.to_owned(),
        })
    }

    /// Closes the creator's descriptor: once every peer has mapped the segment, nobody can
    /// open it any more, and it lives exactly as long as the mappings.
    pub fn close_descriptor(&mut self) {
        self._fd = None;
    }

    /// Base address of the mapping (page-aligned).
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: creation refuses it).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping this Segment created and owns; users of raw
        // pointers into it are required to have stopped using them before dropping it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_open_share_and_nothing_named() {
        let before: Vec<_> = std::fs::read_dir(DIR)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        let a = Segment::create(1 << 20).unwrap();
        let b = Segment::open(a.handle()).unwrap();
        assert_eq!(b.len(), 1 << 20);
        let proc_link = format!("/proc/self/fd/{}", a.handle().split('.').nth(1).unwrap());
        let target = std::fs::read_link(&proc_link).unwrap();
        assert!(target.to_string_lossy().contains("(deleted)"), "{target:?}");
        let mode = std::fs::metadata(&proc_link).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o600
        );
        // SAFETY: both mappings are 1 MiB long, offset 12345 is inside; single thread.
        unsafe {
            a.as_ptr().add(12345).write_volatile(42);
            assert_eq!(b.as_ptr().add(12345).read_volatile(), 42);
        }
        // Nothing appeared in the directory: there is no name to leave behind.
        let after: Vec<_> = std::fs::read_dir(DIR)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert!(after.iter().all(|p| before.contains(p)), "{after:?}");
        // A handle whose descriptor now names another file is refused.
        let parts: Vec<&str> = a.handle().split('.').collect();
        let wrong = format!(
            "{}.{}.{}.{:x}",
            parts[0],
            parts[1],
            parts[2],
            u64::from_str_radix(parts[3], 16).unwrap() + 1
        );
        assert!(Segment::open(&wrong).is_err());
        assert!(Segment::open("12").is_err());
    }

    #[test]
    fn space_is_reserved_at_creation() {
        let (free, total) = space().unwrap();
        assert!(free <= total && total > 0);
        let a = Segment::create(256 << 20).unwrap();
        let (free_after, _) = space().unwrap();
        // Other tests create and drop segments meanwhile, a few MiB at most: 256 MiB
        // reserved shows through them.
        assert!(free_after + (128 << 20) <= free, "{free} -> {free_after}");
        drop(a);
        // More than there is fails at creation, naming the call.
        let e = Segment::create(usize::try_from(total).unwrap() + (1 << 30)).unwrap_err();
        assert_eq!(e.call, "posix_fallocate", "{e}");
        assert_eq!(e.error.raw_os_error(), Some(libc::ENOSPC), "{e}");
    }
}
