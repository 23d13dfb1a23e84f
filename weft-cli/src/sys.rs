//! The launcher's operating-system calls: socket pairs, signals, waiting and killing.
//! Every `unsafe` block of the binary lives here.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// A connected pair: the launcher's end (close-on-exec) and the rank's end, whose
/// close-on-exec flag [`clear_cloexec`] clears in the child between fork and exec.
pub fn pmi_socketpair() -> io::Result<(UnixStream, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid array of two ints for socketpair to fill.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if fds[1] < 3 {
        // The launcher started with a standard stream closed: move the rank's end above 2, or
        // the child's stdio setup would overwrite it.
        // SAFETY: fds[1] is open (socketpair succeeded); F_DUPFD_CLOEXEC returns a new fd.
        let moved = unsafe { libc::fcntl(fds[1], libc::F_DUPFD_CLOEXEC, 3) };
        let err = io::Error::last_os_error();
        // SAFETY: fds[1] is open and owned by us; after dup we no longer need it.
        unsafe { libc::close(fds[1]) };
        if moved < 0 {
            // SAFETY: fds[0] is open and owned by us.
            unsafe { libc::close(fds[0]) };
            return Err(err);
        }
        fds[1] = moved;
    }
    // SAFETY: socketpair (and the dup above) succeeded, so both fds are open and owned by
    // nobody else; each is wrapped exactly once.
    let (parent, child) = unsafe {
        (
            UnixStream::from_raw_fd(fds[0]),
            OwnedFd::from_raw_fd(fds[1]),
        )
    };
    Ok((parent, child))
}

/// The CPUs this process may run on (its affinity mask), in increasing order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t and its size is passed; pid 0 is this thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads bit `c` of a valid set; `c` is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Between fork and exec: let `fd` survive exec, die with the launcher, reset signals, and
/// run only on `cpu` when one is given.
///
/// # Safety
/// Call only in a `pre_exec` hook (the child after fork): it uses only async-signal-safe
/// calls (fcntl, prctl, getppid, sigprocmask, sched_setaffinity) and allocates nothing.
pub unsafe fn child_setup(fd: RawFd, launcher: libc::pid_t, cpu: Option<usize>) -> io::Result<()> {
    // SAFETY: fcntl on an fd we own is async-signal-safe; we are in the forked child.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if let Some(cpu) = cpu {
        // SAFETY: a zeroed cpu_set_t on the stack is the empty set; CPU_SET sets one bit
        // below CPU_SETSIZE (the launcher only names CPUs it read from its own mask);
        // sched_setaffinity is a plain system call on this (the child) process.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    // SAFETY: the caller guarantees we are in the forked child, before exec.
    unsafe { die_with_launcher(libc::SIGKILL, launcher) }
}

/// In a forked child: get `sig` when the launcher dies (exit now if it already has), and
/// start with no signal blocked (the launcher blocks the job signals in its threads).
///
/// # Safety
/// Call only between fork and exec: it uses only async-signal-safe calls and allocates
/// nothing.
unsafe fn die_with_launcher(sig: libc::c_int, launcher: libc::pid_t) -> io::Result<()> {
    // SAFETY: prctl, getppid, _exit, sigemptyset and sigprocmask are async-signal-safe and
    // take plain integers or a stack-allocated sigset_t; the caller guarantees we are in the
    // forked child.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        // The launcher may have died before prctl took effect: then nobody would kill us.
        if libc::getppid() != launcher {
            libc::_exit(1);
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
    Ok(())
}

/// Blocks the signals that end the job in the calling thread (and threads it starts later),
/// so one thread can take them with [`wait_signal`].
pub fn block_job_signals() -> io::Result<()> {
    let set = job_signals();
    // SAFETY: `set` is an initialized sigset_t; pthread_sigmask only changes this thread's mask.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

fn job_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initializes it before use and sigaddset
    // takes valid signal numbers.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Waits for one of the signals [`block_job_signals`] blocked.
pub fn wait_signal() -> i32 {
    let set = job_signals();
    let mut sig: libc::c_int = 0;
    loop {
        // SAFETY: `set` is initialized and `sig` is a valid out-pointer.
        let rc = unsafe { libc::sigwait(&set, &mut sig) };
        if rc == 0 {
            return sig;
        }
    }
}

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// `exit(code)`.
    Exited(i32),
    /// Killed by this signal.
    Signaled(i32),
}

impl Status {
    /// The code a shell would report: the exit code, or 128 + the signal number.
    pub fn shell_code(self) -> i32 {
        match self {
            Status::Exited(c) => c,
            Status::Signaled(s) => 128 + s,
        }
    }
}

/// Reaps any child: `Ok(None)` when there are none left.
pub fn wait_any() -> io::Result<Option<(libc::pid_t, Status)>> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid out-pointer; waitpid(-1) reaps a child of this process.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ECHILD) => return Ok(None),
                _ => return Err(e),
            }
        }
        let st = if libc::WIFEXITED(status) {
            Status::Exited(libc::WEXITSTATUS(status))
        } else if libc::WIFSIGNALED(status) {
            Status::Signaled(libc::WTERMSIG(status))
        } else {
            continue; // stopped/continued: not an end
        };
        return Ok(Some((pid, st)));
    }
}

/// Waits until some child has exited and returns its pid without reaping it (`waitid` with
/// `WNOWAIT`): `Ok(None)` when there are no children.
pub fn wait_exited_peek() -> io::Result<Option<libc::pid_t>> {
    loop {
        // SAFETY: an all-zero siginfo_t is a valid value of this plain C struct.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid out-pointer; P_ALL with WNOWAIT only reports a child.
        let rc = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ECHILD) => return Ok(None),
                _ => return Err(e),
            }
        }
        // SAFETY: waitid succeeded with WEXITED, so `info` describes a child (SIGCHLD).
        return Ok(Some(unsafe { info.si_pid() }));
    }
}

/// Reaps child `pid`, which has exited: `Ok(None)` when it is already reaped.
pub fn reap(pid: libc::pid_t) -> io::Result<Option<Status>> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid out-pointer; waitpid reaps only our child `pid`.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ECHILD) => return Ok(None),
                _ => return Err(e),
            }
        }
        if rc == 0 {
            return Ok(None);
        }
        return Ok(if libc::WIFEXITED(status) {
            Some(Status::Exited(libc::WEXITSTATUS(status)))
        } else if libc::WIFSIGNALED(status) {
            Some(Status::Signaled(libc::WTERMSIG(status)))
        } else {
            None
        });
    }
}

/// Sends `sig` to process (or, negative, process group) `pid`, ignoring "no such process".
pub fn kill(pid: libc::pid_t, sig: i32) {
    // SAFETY: kill(2) takes plain integers; a stale pid gives ESRCH, which we ignore.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// The conventional short name of a signal.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return format!("signal {sig}"),
    };
    name.to_owned()
}

/// Between fork and exec of a remote-start command: receive SIGTERM when the launcher dies,
/// and start with no signal blocked (the launcher blocks the job signals in its threads).
///
/// # Safety
/// Call only in a `pre_exec` hook: it uses only async-signal-safe calls and allocates nothing.
pub unsafe fn rsh_child_setup(launcher: libc::pid_t) -> io::Result<()> {
    // SAFETY: the caller guarantees we are in the forked child, before exec.
    unsafe { die_with_launcher(libc::SIGTERM, launcher) }
}

/// The IPv4 addresses of the interfaces that are up, with the interface names, in the order
/// the kernel lists them (loopback included).
pub fn ipv4_interfaces() -> io::Result<Vec<(String, std::net::Ipv4Addr, bool)>> {
    Ok(weft::launcher::host::interface_addrs()?
        .into_iter()
        .filter(|a| a.up)
        .filter_map(|a| match a.addr {
            std::net::IpAddr::V4(ip) => Some((a.name, ip, a.loopback)),
            std::net::IpAddr::V6(_) => None,
        })
        .collect())
}

/// A resource limit's soft and hard values (`None`: unlimited).
pub fn rlimit(resource: libc::__rlimit_resource_t) -> io::Result<(Option<u64>, Option<u64>)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, exclusively borrowed rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(resource, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 on every target
    let f = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v as u64);
    Ok((f(r.rlim_cur), f(r.rlim_max)))
}

/// Raises the soft limit on open descriptors to the hard limit (the launcher holds a few
/// per rank); returns the soft limit now in force (`None`: unlimited).
pub fn raise_nofile() -> io::Result<Option<u64>> {
    let (soft, hard) = rlimit(libc::RLIMIT_NOFILE)?;
    if soft != hard {
        let r = libc::rlimit {
            rlim_cur: hard.map_or(libc::RLIM_INFINITY, |h| h as libc::rlim_t),
            rlim_max: hard.map_or(libc::RLIM_INFINITY, |h| h as libc::rlim_t),
        };
        // SAFETY: `r` is a valid rlimit; raising the soft limit up to the hard one is
        // always allowed and changes nothing but this process's limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } == 0 {
            return Ok(hard);
        }
    }
    Ok(soft)
}

/// Whether the launcher runs with an effective user id of 0 (RLIMIT_NPROC does not bind it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}
