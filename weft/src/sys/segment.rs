//! POSIX shared-memory segments (`shm_open` + `ftruncate` + `mmap(MAP_SHARED)`).
//!
//! A segment is created sparse: `ftruncate` reserves its size but the kernel hands out pages
//! only when they are first touched, so a large, mostly idle segment costs little memory.
//! Names are `/weft-<job_id>-<rank>-<32 random hex>`; the launcher sweeps
//! `/dev/shm/weft-<job_id>-*` after a job, so the prefix must stay exactly that.

use std::ffi::CString;
use std::io;
use std::ptr::NonNull;

/// A mapping of a shared-memory segment. Unmapped on drop (the name is not unlinked then:
/// call [`unlink`] once every process that needs the name has opened it).
#[derive(Debug)]
pub struct Segment {
    ptr: NonNull<u8>,
    len: usize,
    name: String,
}

// SAFETY: a Segment is an owned mapping (like a Box<[u8]> that other processes can also see);
// it has no thread affinity. Concurrent access to its bytes goes through raw pointers whose
// users are responsible for synchronisation.
unsafe impl Send for Segment {}
// SAFETY: `&Segment` hands out only the base pointer, length and name; see Send.
unsafe impl Sync for Segment {}

/// The segment name for `job_id` and `rank` with a random suffix (with the leading `/`).
pub fn segment_name(job_id: &str, rank: u32) -> io::Result<String> {
    // The job id is kept verbatim so the launcher's sweep pattern matches; only '/' (which
    // a POSIX shm name cannot hold past its first character) and NUL are replaced.
    let clean: String = job_id
        .chars()
        .map(|c| if c == '/' || c == '\0' { '_' } else { c })
        .collect();
    Ok(format!("/weft-{clean}-{rank}-{}", super::random_hex(16)?))
}

fn cname(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"))
}

struct Fd(libc::c_int);
impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own this descriptor and close it once.
        unsafe { libc::close(self.0) };
    }
}

fn map(fd: &Fd, len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh shared mapping of `len` bytes of an open shm descriptor at an address
    // the kernel chooses; it aliases no Rust object.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.0,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(NonNull::new(p.cast()).expect("mmap returned null"))
}

impl Segment {
    /// Creates a new segment `name` (O_CREAT|O_EXCL, mode 0600) of `len` bytes, zero-filled
    /// and sparse, and maps it.
    pub fn create(name: &str, len: usize) -> io::Result<Segment> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty segment"));
        }
        let c = cname(name)?;
        // SAFETY: `c` is a valid NUL-terminated string; shm_open has no other preconditions.
        let fd = unsafe {
            libc::shm_open(
                c.as_ptr(),
                libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = Fd(fd);
        // The umask could only clear bits; set 0600 explicitly anyway so the mode never
        // depends on the environment.
        // SAFETY: fd is an open descriptor we own.
        unsafe { libc::fchmod(fd.0, 0o600) };
        let setup = (|| {
            // SAFETY: fd is an open shm descriptor; ftruncate on it only sets its size.
            if unsafe { libc::ftruncate(fd.0, len as libc::off_t) } != 0 {
                return Err(io::Error::last_os_error());
            }
            map(&fd, len)
        })();
        match setup {
            Ok(ptr) => Ok(Segment {
                ptr,
                len,
                name: name.to_owned(),
            }),
            Err(e) => {
                let _ = unlink(name);
                Err(e)
            }
        }
    }

    /// Opens and maps an existing segment by name; its length is the segment's size.
    pub fn open(name: &str) -> io::Result<Segment> {
        let c = cname(name)?;
        // SAFETY: `c` is a valid NUL-terminated string.
        let fd = unsafe { libc::shm_open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = Fd(fd);
        // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open and `st` is a valid, exclusively borrowed stat buffer.
        if unsafe { libc::fstat(fd.0, &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let len = st.st_size as usize;
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "empty segment"));
        }
        Ok(Segment {
            ptr: map(&fd, len)?,
            len,
            name: name.to_owned(),
        })
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

    /// The name the segment was created or opened with.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping this Segment created and owns; users of raw
        // pointers into it are required to have stopped using them before dropping it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Removes the name of a segment. Existing mappings stay valid until unmapped.
pub fn unlink(name: &str) -> io::Result<()> {
    let c = cname(name)?;
    // SAFETY: `c` is a valid NUL-terminated string.
    if unsafe { libc::shm_unlink(c.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn create_open_share_unlink() {
        let name = segment_name("unit-seg", 3).unwrap();
        assert!(name.starts_with("/weft-unit-seg-3-"), "{name}");
        assert_eq!(name.len(), "/weft-unit-seg-3-".len() + 32);
        let a = Segment::create(&name, 1 << 20).unwrap();
        let path = format!("/dev/shm{name}");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(Segment::create(&name, 4096).is_err(), "O_EXCL");
        let b = Segment::open(&name).unwrap();
        assert_eq!(b.len(), 1 << 20);
        // SAFETY: both mappings are 1 MiB long, offset 12345 is inside; single thread.
        unsafe {
            a.as_ptr().add(12345).write_volatile(42);
            assert_eq!(b.as_ptr().add(12345).read_volatile(), 42);
        }
        unlink(&name).unwrap();
        assert!(std::fs::metadata(&path).is_err());
        // SAFETY: as above; the mapping outlives the name.
        unsafe { assert_eq!(a.as_ptr().add(12345).read_volatile(), 42) };
        assert!(Segment::open(&name).is_err());
    }
}
