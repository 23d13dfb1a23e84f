//! Network system calls std does not wrap: interface addresses, `poll(2)`, and the socket
//! options the TCP transport sets (keepalive timing, `TCP_USER_TIMEOUT`, buffer sizes).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// One address of a network interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfAddr {
    /// Interface name, e.g. `eth0`.
    pub name: String,
    /// The address.
    pub addr: IpAddr,
    /// Prefix length of its subnet.
    pub prefix: u8,
    /// Whether the interface is up.
    pub up: bool,
    /// Whether it is a loopback interface.
    pub loopback: bool,
}

/// Every IPv4 and IPv6 address of every interface, in the kernel's order.
pub fn interface_addrs() -> io::Result<Vec<IfAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we own into `head`; freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: ifa_addr is non-null and points to a sockaddr whose family field is valid.
        let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
        let (addr, prefix) = match family {
            libc::AF_INET => {
                // SAFETY: for AF_INET entries the address and netmask are sockaddr_in.
                let (a, m) = unsafe {
                    (
                        *(ifa.ifa_addr as *const libc::sockaddr_in),
                        (!ifa.ifa_netmask.is_null())
                            .then(|| *(ifa.ifa_netmask as *const libc::sockaddr_in)),
                    )
                };
                let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
                let bits = m.map_or(32, |m| u32::from_be(m.sin_addr.s_addr).count_ones());
                (IpAddr::V4(ip), bits as u8)
            }
            libc::AF_INET6 => {
                // SAFETY: for AF_INET6 entries the address and netmask are sockaddr_in6.
                let (a, m) = unsafe {
                    (
                        *(ifa.ifa_addr as *const libc::sockaddr_in6),
                        (!ifa.ifa_netmask.is_null())
                            .then(|| *(ifa.ifa_netmask as *const libc::sockaddr_in6)),
                    )
                };
                let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
                let bits = m.map_or(128, |m| {
                    m.sin6_addr
                        .s6_addr
                        .iter()
                        .map(|b| b.count_ones())
                        .sum::<u32>()
                });
                (IpAddr::V6(ip), bits as u8)
            }
            _ => continue,
        };
        let flags = ifa.ifa_flags;
        out.push(IfAddr {
            name,
            addr,
            prefix,
            up: flags & libc::IFF_UP as u32 != 0,
            loopback: flags & libc::IFF_LOOPBACK as u32 != 0,
        });
    }
    // SAFETY: `head` came from getifaddrs and is freed once; no reference into it survives.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// Readiness bits for [`poll`].
pub const POLLIN: i16 = libc::POLLIN;
/// Writable.
pub const POLLOUT: i16 = libc::POLLOUT;
/// Error or hang-up (always reported).
pub const POLLERR_HUP: i16 = libc::POLLERR | libc::POLLHUP;

/// A `pollfd` entry.
pub type PollFd = libc::pollfd;

/// An entry asking for `events` on `fd`.
pub fn poll_entry(fd: RawFd, events: i16) -> PollFd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Waits until one of `fds` is ready or `timeout` passes (zero: just check). Returns how
/// many are ready; `EINTR` counts as none ready.
pub fn poll(fds: &mut [PollFd], timeout: Duration) -> io::Result<usize> {
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `fds` is a valid, exclusively borrowed array of pollfd of the given length.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(n as usize)
}

fn setsockopt_int(fd: &impl AsRawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: `value` is a live c_int and its size is passed; the fd is borrowed and open.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            &value as *const i32 as *const libc::c_void,
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes a connection fail once the peer has been unreachable for about `timeout`: data
/// unacknowledged for that long (`TCP_USER_TIMEOUT`), or keepalive probes unanswered while
/// the connection is idle.
pub fn set_dead_peer_timeout(sock: &impl AsRawFd, timeout: Duration) -> io::Result<()> {
    let secs = timeout.as_secs().clamp(2, 3600) as i32;
    setsockopt_int(sock, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    setsockopt_int(
        sock,
        libc::IPPROTO_TCP,
        libc::TCP_KEEPIDLE,
        (secs / 2).max(1),
    )?;
    setsockopt_int(sock, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 1)?;
    setsockopt_int(
        sock,
        libc::IPPROTO_TCP,
        libc::TCP_KEEPCNT,
        (secs / 2).max(1),
    )?;
    let ms = timeout.as_millis().clamp(1000, i32::MAX as u128) as i32;
    setsockopt_int(sock, libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, ms)
}

/// Bounds how much data not yet sent a TCP socket queues (`TCP_NOTSENT_LOWAT`): writes take
/// no more once that much waits behind what is on the wire (data in flight is not counted).
pub fn set_notsent_lowat(sock: &impl AsRawFd, bytes: usize) -> io::Result<()> {
    let b = bytes.min(i32::MAX as usize) as i32;
    setsockopt_int(sock, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, b)
}

/// The socket's `TCP_NOTSENT_LOWAT`.
pub fn notsent_lowat(sock: &impl AsRawFd) -> io::Result<usize> {
    let mut value: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `value` is a live, writable c_int and `len` a live socklen_t holding its size,
    // which the kernel updates; the fd is borrowed and open.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            &mut value as *mut i32 as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value as u32 as usize)
}

/// Sets the congestion-control algorithm of a TCP socket (`TCP_CONGESTION`), e.g. `reno`.
/// The kernel refuses a name it does not have (`ENOENT`) or that unprivileged processes may
/// not choose (`EPERM`: not in `net.ipv4.tcp_allowed_congestion_control`).
pub fn set_congestion_control(sock: &impl AsRawFd, name: &str) -> io::Result<()> {
    let bytes = name.as_bytes();
    // SAFETY: `bytes` is a live buffer whose length is passed; the fd is borrowed and open.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            bytes.as_ptr() as *const libc::c_void,
            bytes.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The congestion-control algorithm of a TCP socket.
pub fn congestion_control(sock: &impl AsRawFd) -> io::Result<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: `buf` is a live, writable buffer of `len` bytes, and `len` a live socklen_t the
    // kernel updates; the fd is borrowed and open.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let name = &buf[..(len as usize).min(buf.len())];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// Sets `SO_SNDBUF` and `SO_RCVBUF` (the kernel caps them at `net.core.[wr]mem_max`).
pub fn set_buffer_sizes(sock: &impl AsRawFd, bytes: usize) -> io::Result<()> {
    let b = bytes.min(i32::MAX as usize) as i32;
    setsockopt_int(sock, libc::SOL_SOCKET, libc::SO_SNDBUF, b)?;
    setsockopt_int(sock, libc::SOL_SOCKET, libc::SO_RCVBUF, b)
}

/// Writes `parts` to a connected socket in one `sendmsg(2)` with `MSG_NOSIGNAL`, as much as
/// it takes now: a peer that is gone is an `EPIPE` error, not a SIGPIPE that would kill a C
/// program that did not ignore it (`TcpStream::write_vectored` is `writev`, which raises it;
/// std's `write` already passes the flag).
pub fn send_vectored(sock: &impl AsRawFd, parts: &[io::IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // `IoSlice` is ABI-compatible with `iovec` on Unix (std's promise); the kernel only reads
    // them, during the call.
    msg.msg_iov = parts.as_ptr().cast_mut().cast::<libc::iovec>();
    msg.msg_iovlen = parts.len() as _;
    // SAFETY: `msg` points at `parts`, live for the call; an open socket descriptor.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Lets a listening socket queue as many connections not yet accepted as the system allows
/// (`net.core.somaxconn`; the standard library asks for 128), so a burst of peers dialling
/// one rank at once is not refused.
pub fn widen_listen_backlog(listener: &impl AsRawFd) -> io::Result<()> {
    // SAFETY: listen(2) on an open, bound socket descriptor, no memory arguments; calling it
    // again on a listening socket only changes its backlog (the kernel caps it at somaxconn).
    if unsafe { libc::listen(listener.as_raw_fd(), libc::c_int::MAX) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The pending error of a socket (`SO_ERROR`), e.g. the outcome of a nonblocking connect.
pub fn take_socket_error(sock: &impl AsRawFd) -> io::Result<Option<io::Error>> {
    let mut v: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `v` and `len` are live and sized for a c_int option.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut v as *mut i32 as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((v != 0).then(|| io::Error::from_raw_os_error(v)))
}

/// Starts a nonblocking connect to `addr`: returns the socket at once, connected or with
/// the connection in progress (wait for it to become writable, then [`take_socket_error`]).
/// `buffer` > 0 sets the socket buffer sizes first, as they must be before the handshake
/// (the receive window's scale is agreed then; shrinking it later can stall the stream).
pub fn connect_nonblocking(
    addr: std::net::SocketAddr,
    buffer: usize,
) -> io::Result<std::net::TcpStream> {
    use std::os::fd::FromRawFd;
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket creation; the fd is owned by the TcpStream below.
    let fd = unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket nobody else owns; the stream closes it on drop.
    let stream = unsafe { std::net::TcpStream::from_raw_fd(fd) };
    if buffer > 0 {
        set_buffer_sizes(&stream, buffer)?;
    }
    let (storage, len) = sockaddr_of(addr);
    // SAFETY: `storage` holds a valid sockaddr of `len` bytes for the socket's family.
    let rc = unsafe { libc::connect(fd, &storage as *const _ as *const libc::sockaddr, len) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
    }
    Ok(stream)
}

fn sockaddr_of(addr: std::net::SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        std::net::SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
            (
                storage,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        }
        std::net::SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
            (
                storage,
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_vectored_writes_every_part_and_a_gone_peer_is_an_error() {
        use std::io::Read;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        let parts = [io::IoSlice::new(b"head"), io::IoSlice::new(b"-body")];
        assert_eq!(send_vectored(&a, &parts).unwrap(), 9);
        let mut got = [0u8; 9];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"head-body");
        drop(b);
        // The first write after the peer closed may still be taken; one soon fails (EPIPE
        // or a reset), as an error rather than a signal.
        let failed = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(5));
            send_vectored(&a, &parts).is_err()
        });
        assert!(failed, "writes to a closed peer kept succeeding");
    }

    #[test]
    fn congestion_control_is_set_and_read_back_and_a_refusal_is_an_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        // reno is built into every kernel and always allowed.
        set_congestion_control(&s, "reno").unwrap();
        assert_eq!(congestion_control(&s).unwrap(), "reno");
        let e = set_congestion_control(&s, "no-such-algorithm").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{e}");
        assert_eq!(congestion_control(&s).unwrap(), "reno", "a refusal changes nothing");
    }

    #[test]
    fn the_unsent_queue_bound_is_set_and_read_back() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_notsent_lowat(&s, 256 << 10).unwrap();
        assert_eq!(notsent_lowat(&s).unwrap(), 256 << 10);
    }

    #[test]
    fn loopback_is_listed() {
        let all = interface_addrs().unwrap();
        assert!(
            all.iter()
                .any(|a| a.loopback && a.addr == IpAddr::V4(Ipv4Addr::LOCALHOST) && a.prefix == 8),
            "{all:?}"
        );
    }

    #[test]
    fn nonblocking_connect_completes_and_poll_sees_it() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = connect_nonblocking(l.local_addr().unwrap(), 1 << 20).unwrap();
        let mut fds = [poll_entry(s.as_raw_fd(), POLLOUT)];
        assert_eq!(poll(&mut fds, Duration::from_secs(5)).unwrap(), 1);
        assert!(take_socket_error(&s).unwrap().is_none());
        set_dead_peer_timeout(&s, Duration::from_secs(10)).unwrap();
        let refused = {
            let l2 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let a = l2.local_addr().unwrap();
            drop(l2);
            a
        };
        let s2 = connect_nonblocking(refused, 0).unwrap();
        let mut fds = [poll_entry(s2.as_raw_fd(), POLLOUT)];
        poll(&mut fds, Duration::from_secs(5)).unwrap();
        assert!(take_socket_error(&s2).unwrap().is_some());
    }
}
