//! Frames on an established, authenticated connection.
//!
//! A frame is an 8-byte prefix (payload length, frame kind; little-endian u32s), then for a
//! packet the 40-byte [`Header`] and the payload. A `Bye` frame (no body) says the peer is
//! finalizing: the end of the stream that follows is orderly, not a failure.
//!
//! Receiving reads as much as the socket has into one reused buffer and hands every whole
//! frame to the sink in place; sending writes the frame head and the payload with one
//! `writev`, and keeps whatever the socket did not take in a per-peer queue, so at most one
//! partly written packet waits per peer. No allocation on either path once buffers have
//! grown to their working size.

use crate::fabric::{Header, PacketKind, Sink, HEADER_SIZE};
use std::io::{self, IoSlice, Read, Write};
use std::net::TcpStream;

/// Bytes of the frame prefix.
pub const PREFIX_LEN: usize = 8;
/// Bytes of prefix plus packet header.
pub const FRAME_HEAD: usize = PREFIX_LEN + HEADER_SIZE;
const KIND_PACKET: u32 = 0;
const KIND_BYE: u32 = 1;
/// Largest payload a receiver accepts, whatever the sender's settings (a sanity bound).
const MAX_FRAME_PAYLOAD: usize = 64 << 20;

/// The prefix and header of a packet frame carrying `payload_len` bytes.
pub fn packet_head(hdr: &Header, payload_len: usize) -> [u8; FRAME_HEAD] {
    let mut b = [0u8; FRAME_HEAD];
    b[..4].copy_from_slice(&(payload_len as u32).to_le_bytes());
    b[4..8].copy_from_slice(&KIND_PACKET.to_le_bytes());
    b[PREFIX_LEN..].copy_from_slice(&hdr.encode());
    b
}

/// A `Bye` frame.
pub fn bye_frame() -> [u8; PREFIX_LEN] {
    let mut b = [0u8; PREFIX_LEN];
    b[4..8].copy_from_slice(&KIND_BYE.to_le_bytes());
    b
}

/// A sink that drops what arrives (for the goodbye exchange, when nothing more is expected).
pub struct Discard;

impl Sink for Discard {
    fn packet(&mut self, _hdr: &Header, _payload: &[u8]) {}
}

/// Bytes accepted for a peer but not yet taken by its socket.
#[derive(Default)]
pub struct TxQueue {
    buf: Vec<u8>,
    at: usize,
}

impl TxQueue {
    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.at == self.buf.len()
    }

    /// Appends the bytes of `parts` after skipping the first `skip` of them.
    pub fn push_from(&mut self, parts: &[&[u8]], mut skip: usize) {
        if self.is_empty() {
            self.buf.clear();
            self.at = 0;
        }
        for p in parts {
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            self.buf.extend_from_slice(&p[skip..]);
            skip = 0;
        }
    }

    /// Writes as much as the socket takes. Returns whether the queue is now empty.
    pub fn flush(&mut self, stream: &mut TcpStream) -> io::Result<bool> {
        while !self.is_empty() {
            match stream.write(&self.buf[self.at..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.buf.clear();
        self.at = 0;
        Ok(true)
    }
}

/// Frames up to this many bytes are gathered into one buffer and written with `send`, which
/// takes one buffer, rather than with `writev`, which first copies in an array of them.
const GATHER_UP_TO: usize = 256;

/// Writes `parts` (at most two) with one system call as far as the socket takes them;
/// returns the number of bytes written (0 when the socket is full).
pub fn write_parts(stream: &mut TcpStream, parts: &[&[u8]]) -> io::Result<usize> {
    debug_assert!(!parts.is_empty() && parts.len() <= 2);
    let second = parts.get(1).copied().unwrap_or(&[]);
    let total = parts[0].len() + second.len();
    if total <= GATHER_UP_TO {
        let mut one = [0u8; GATHER_UP_TO];
        one[..parts[0].len()].copy_from_slice(parts[0]);
        one[parts[0].len()..total].copy_from_slice(second);
        return retry_interrupted(|| stream.write(&one[..total]));
    }
    let slices = [IoSlice::new(parts[0]), IoSlice::new(second)];
    retry_interrupted(|| crate::sys::net::send_vectored(stream, &slices))
}

/// Runs a write until it is not interrupted; a full socket is 0 bytes written.
fn retry_interrupted(mut write: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
    loop {
        match write() {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// What reading a connection found.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// The socket is drained for now.
    Drained,
    /// The peer said `Bye` and then closed: an orderly end.
    Closed,
}

/// A frame whose payload is being read straight into the sink's buffer.
#[derive(Clone, Copy)]
struct Placing {
    hdr: Header,
    len: usize,
    /// Bytes of the payload in place so far.
    done: usize,
}

/// The receive side of one connection.
pub struct RxBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    placing: Option<Placing>,
    /// The last frame was large: read just the next frame's head when the buffer is empty,
    /// so that a large payload after it can be read straight into place, not through here.
    head_first: bool,
    /// The peer sent `Bye`.
    pub bye: bool,
    /// The peer number packets are delivered under, when it is not the source they carry
    /// (a process of another job names itself by its own world rank).
    deliver_as: Option<u32>,
}

impl RxBuf {
    /// A buffer of `capacity` bytes (grown when a frame needs more).
    pub fn new(capacity: usize) -> Self {
        RxBuf {
            buf: vec![0; capacity.max(FRAME_HEAD * 2)],
            start: 0,
            end: 0,
            placing: None,
            head_first: false,
            bye: false,
            deliver_as: None,
        }
    }

    /// The same buffer delivering packets as coming from peer number `peer` (their source
    /// is still checked against the rank the reader names).
    pub fn delivering_as(mut self, peer: u32) -> Self {
        self.deliver_as = Some(peer);
        self
    }

    /// Reads what `stream` has and delivers every whole frame to `sink`. `peer` is the
    /// authenticated rank on the other end: a packet claiming another source is refused.
    /// Returns how many packets were delivered and whether the stream ended (in order).
    pub fn read_from<S: Sink + ?Sized>(
        &mut self,
        stream: &mut TcpStream,
        peer: u32,
        sink: &mut S,
    ) -> io::Result<(usize, ReadOutcome)> {
        let mut delivered = 0;
        // A few reads at most, so one busy peer cannot starve the others.
        for _ in 0..4 {
            if self.placing.is_some() {
                match self.continue_placing(stream, sink)? {
                    true => {
                        delivered += 1;
                        continue;
                    }
                    false => break,
                }
            }
            if self.end == self.buf.len() {
                self.make_room(FRAME_HEAD);
            }
            let want = if self.head_first && self.start == self.end {
                FRAME_HEAD
            } else {
                self.buf.len() - self.end
            };
            let n = match stream.read(&mut self.buf[self.end..self.end + want]) {
                Ok(0) => {
                    delivered += self.deliver(peer, sink)?;
                    if self.bye && self.start == self.end {
                        return Ok((delivered, ReadOutcome::Closed));
                    }
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the connection was closed without a goodbye (the peer's process \
                         ended or its host failed)",
                    ));
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let filled = n == want;
            self.end += n;
            delivered += self.deliver(peer, sink)?;
            if !filled && self.placing.is_none() {
                break;
            }
        }
        Ok((delivered, ReadOutcome::Drained))
    }

    /// Reads more of a payload being placed straight into the sink's buffer (asked for
    /// again on every call, so nothing is held between polls). Returns whether it is all in.
    fn continue_placing<S: Sink + ?Sized>(
        &mut self,
        stream: &mut TcpStream,
        sink: &mut S,
    ) -> io::Result<bool> {
        let Some(Placing { hdr, len, mut done }) = self.placing else {
            return Ok(true);
        };
        loop {
            let (r, asked) = match sink.place(&hdr, len) {
                Some(dst) => (stream.read(&mut dst[done..]), len - done),
                // The receive is gone (it cannot be, for matched rendezvous data): drop it.
                None => {
                    let m = (len - done).min(self.buf.len());
                    (stream.read(&mut self.buf[..m]), m)
                }
            };
            match r {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the connection was closed in the middle of a frame (the peer's \
                         process ended or its host failed)",
                    ))
                }
                Ok(k) => {
                    done += k;
                    if done == len {
                        self.placing = None;
                        sink.placed(&hdr, len);
                        return Ok(true);
                    }
                    if k < asked {
                        // A short read: the socket is empty for now, and asking again would
                        // only cost a system call that finds it so.
                        self.placing = Some(Placing { hdr, len, done });
                        return Ok(false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.placing = Some(Placing { hdr, len, done });
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Hands over every whole frame buffered; keeps a partial one (making room for it),
    /// except a large partial one the sink takes in place: its payload is then read from
    /// `stream` straight into the sink's buffer.
    fn deliver<S: Sink + ?Sized>(&mut self, peer: u32, sink: &mut S) -> io::Result<usize> {
        let mut n = 0;
        loop {
            let avail = self.end - self.start;
            if avail < PREFIX_LEN {
                break;
            }
            let p = &self.buf[self.start..self.start + PREFIX_LEN];
            let plen = u32::from_le_bytes(p[..4].try_into().unwrap()) as usize;
            let kind = u32::from_le_bytes(p[4..8].try_into().unwrap());
            match kind {
                KIND_BYE => {
                    self.bye = true;
                    self.start += PREFIX_LEN;
                    continue;
                }
                KIND_PACKET if plen <= MAX_FRAME_PAYLOAD => {}
                _ => {
                    return Err(bad_data(format!(
                        "a frame of kind {kind} with {plen} bytes (corrupt stream)"
                    )))
                }
            }
            if avail < FRAME_HEAD {
                self.make_room(FRAME_HEAD + plen);
                break;
            }
            let h = self.start + PREFIX_LEN;
            let mut hdr = Header::decode(self.buf[h..h + HEADER_SIZE].try_into().unwrap());
            if hdr.src != peer || PacketKind::from_u8(hdr.kind).is_none() {
                return Err(bad_data(format!(
                    "a packet of kind {} from rank {} on the connection of rank {peer} \
                     (corrupt stream)",
                    hdr.kind, hdr.src
                )));
            }
            if let Some(id) = self.deliver_as {
                hdr.src = id;
            }
            let total = FRAME_HEAD + plen;
            self.head_first = plen >= PLACE_MIN;
            if avail < total {
                let have = avail - FRAME_HEAD;
                if plen - have >= PLACE_MIN {
                    if let Some(dst) = sink.place(&hdr, plen) {
                        // The rest is read straight into place by `continue_placing`.
                        dst[..have].copy_from_slice(&self.buf[h + HEADER_SIZE..self.end]);
                        self.placing = Some(Placing {
                            hdr,
                            len: plen,
                            done: have,
                        });
                        self.start = 0;
                        self.end = 0;
                        return Ok(n);
                    }
                }
                self.make_room(total);
                break;
            }
            sink.packet(&hdr, &self.buf[h + HEADER_SIZE..self.start + total]);
            self.start += total;
            n += 1;
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(n)
    }

    /// Ensures a frame of `total` bytes starting at `start` fits: moves the partial frame
    /// to the front, and grows the buffer if even that is too small.
    fn make_room(&mut self, total: usize) {
        if self.start > 0 && (self.start + total > self.buf.len() || self.end == self.buf.len()) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.start + total > self.buf.len() {
            self.buf.resize(self.start + total, 0);
        }
        if self.end == self.buf.len() {
            let grown = self.buf.len() * 2;
            self.buf.resize(grown, 0);
        }
    }
}

/// Smallest remainder of a frame worth reading straight into the receiver's buffer.
const PLACE_MIN: usize = 16 << 10;

fn bad_data(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    fn hdr(src: u32, tag: i32) -> Header {
        Header {
            kind: PacketKind::Eager as u8,
            src,
            tag,
            ..Header::default()
        }
    }

    /// Reads until `want` packets arrived (or the stream ends), collecting (tag, payload).
    fn collect(rx: &mut RxBuf, s: &mut TcpStream, peer: u32, want: usize) -> Vec<(i32, Vec<u8>)> {
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while got.len() < want {
            assert!(std::time::Instant::now() < deadline, "timed out");
            let (_, out) = rx
                .read_from(s, peer, &mut |h: &Header, p: &[u8]| {
                    got.push((h.tag, p.to_vec()))
                })
                .unwrap();
            if out == ReadOutcome::Closed {
                break;
            }
        }
        got
    }

    #[test]
    fn frames_of_every_size_arrive_whole_and_in_order_through_a_small_buffer() {
        let (mut a, mut b) = pair();
        let mut rx = RxBuf::new(256);
        let mut tx = TxQueue::default();
        let sizes = [0usize, 1, 7, 48, 200, 257, 4096, 100_000, 3];
        let mut sent = Vec::new();
        let mut got = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let payload: Vec<u8> = (0..n).map(|j| (i * 31 + j) as u8).collect();
            let head = packet_head(&hdr(5, i as i32), n);
            let parts: [&[u8]; 2] = [&head, &payload];
            // The queue keeps what the socket refuses; drain it by reading on the other side.
            while !tx.flush(&mut a).unwrap() {
                got.extend(collect(&mut rx, &mut b, 5, 0));
                rx.read_from(&mut b, 5, &mut |h: &Header, p: &[u8]| {
                    got.push((h.tag, p.to_vec()))
                })
                .unwrap();
            }
            let w = write_parts(&mut a, &parts).unwrap();
            tx.push_from(&parts, w);
            sent.push((i as i32, payload));
        }
        while !tx.flush(&mut a).unwrap() {
            rx.read_from(&mut b, 5, &mut |h: &Header, p: &[u8]| {
                got.push((h.tag, p.to_vec()))
            })
            .unwrap();
        }
        let rest = sent.len() - got.len();
        got.extend(collect(&mut rx, &mut b, 5, rest));
        assert_eq!(got, sent);
    }

    #[test]
    fn bye_then_close_is_orderly_and_a_bare_close_is_an_error() {
        let (mut a, mut b) = pair();
        let mut rx = RxBuf::new(1024);
        a.write_all(&packet_head(&hdr(1, 9), 0)).unwrap();
        a.write_all(&bye_frame()).unwrap();
        drop(a);
        let mut tags = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            assert!(std::time::Instant::now() < deadline);
            let (_, out) = rx
                .read_from(&mut b, 1, &mut |h: &Header, _: &[u8]| tags.push(h.tag))
                .unwrap();
            if out == ReadOutcome::Closed {
                break;
            }
        }
        assert_eq!(tags, [9]);

        let (a, mut b) = pair();
        drop(a);
        let mut rx = RxBuf::new(1024);
        let e = loop {
            match rx.read_from(&mut b, 1, &mut Discard) {
                Err(e) => break e,
                Ok(_) => std::thread::yield_now(),
            }
        };
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_packet_claiming_another_source_or_garbage_is_refused() {
        let (mut a, mut b) = pair();
        a.write_all(&packet_head(&hdr(2, 0), 0)).unwrap();
        let mut rx = RxBuf::new(1024);
        let e = loop {
            match rx.read_from(&mut b, 1, &mut Discard) {
                Err(e) => break e,
                Ok(_) => std::thread::yield_now(),
            }
        };
        assert!(e.to_string().contains("from rank 2"), "{e}");

        let (mut a, mut b) = pair();
        a.write_all(&[0xff; 64]).unwrap();
        let mut rx = RxBuf::new(1024);
        let e = loop {
            match rx.read_from(&mut b, 1, &mut Discard) {
                Err(e) => break e,
                Ok(_) => std::thread::yield_now(),
            }
        };
        assert!(e.to_string().contains("corrupt"), "{e}");
    }

    /// Takes `Data` payloads in place into `dst` at the packet's offset (`cookie`).
    struct Placer {
        dst: Vec<u8>,
        placed: Vec<usize>,
        packets: usize,
    }

    impl Sink for Placer {
        fn packet(&mut self, _hdr: &Header, _payload: &[u8]) {
            self.packets += 1;
        }
        fn place(&mut self, hdr: &Header, len: usize) -> Option<&mut [u8]> {
            let off = hdr.cookie as usize;
            Some(&mut self.dst[off..off + len])
        }
        fn placed(&mut self, _hdr: &Header, len: usize) {
            self.placed.push(len);
        }
    }

    #[test]
    fn large_data_frames_are_read_straight_into_place_across_polls() {
        let (mut a, mut b) = pair();
        let total = 1 << 20;
        let data: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
        let mut sink = Placer {
            dst: vec![0; total],
            placed: Vec::new(),
            packets: 0,
        };
        let mut rx = RxBuf::new(4096);
        let mut tx = TxQueue::default();
        let chunk = 256 << 10;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        for (i, part) in data.chunks(chunk).enumerate() {
            let h = Header {
                kind: PacketKind::Data as u8,
                src: 3,
                cookie: (i * chunk) as u64,
                ..Header::default()
            };
            let head = packet_head(&h, part.len());
            let parts: [&[u8]; 2] = [&head, part];
            while !tx.flush(&mut a).unwrap() {
                assert!(std::time::Instant::now() < deadline);
                rx.read_from(&mut b, 3, &mut sink).unwrap();
            }
            let w = write_parts(&mut a, &parts).unwrap();
            tx.push_from(&parts, w);
        }
        while sink.placed.len() + sink.packets < total / chunk {
            assert!(std::time::Instant::now() < deadline, "timed out");
            let _ = tx.flush(&mut a).unwrap();
            rx.read_from(&mut b, 3, &mut sink).unwrap();
        }
        assert!(!sink.placed.is_empty(), "nothing was placed");
        assert!(sink.dst == data, "placed data differs");
    }

    /// Takes every payload in place into a fresh vector; records (tag, placed?, payload).
    #[derive(Default)]
    struct Recorder {
        got: Vec<(i32, bool, Vec<u8>)>,
        slot: Vec<u8>,
    }

    impl Sink for Recorder {
        fn packet(&mut self, hdr: &Header, payload: &[u8]) {
            self.got.push((hdr.tag, false, payload.to_vec()));
        }
        fn place(&mut self, _hdr: &Header, len: usize) -> Option<&mut [u8]> {
            self.slot.resize(len, 0);
            Some(&mut self.slot)
        }
        fn placed(&mut self, hdr: &Header, _len: usize) {
            let payload = std::mem::take(&mut self.slot);
            self.got.push((hdr.tag, true, payload));
        }
    }

    #[test]
    fn a_large_frame_after_a_large_frame_is_read_straight_into_place_whole() {
        let (mut a, mut b) = pair();
        let sizes = [100usize, 64 << 10, 64 << 10, 10, 40 << 10, 20 << 10, 3];
        let frames: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 7 + j) as u8).collect())
            .collect();
        let mut rx = RxBuf::new(128 << 10);
        let mut sink = Recorder::default();
        let mut tx = TxQueue::default();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        for (i, f) in frames.iter().enumerate() {
            let head = packet_head(&hdr(4, i as i32), f.len());
            let parts: [&[u8]; 2] = [&head, f];
            while !tx.flush(&mut a).unwrap() {
                assert!(std::time::Instant::now() < deadline);
                rx.read_from(&mut b, 4, &mut sink).unwrap();
            }
            let w = write_parts(&mut a, &parts).unwrap();
            tx.push_from(&parts, w);
            // One frame at a time: each is read when it is the only one on the way.
            while sink.got.len() <= i {
                assert!(std::time::Instant::now() < deadline, "timed out");
                let _ = tx.flush(&mut a).unwrap();
                rx.read_from(&mut b, 4, &mut sink).unwrap();
            }
        }
        let tags: Vec<i32> = sink.got.iter().map(|g| g.0).collect();
        assert_eq!(tags, (0..frames.len() as i32).collect::<Vec<_>>());
        for (g, f) in sink.got.iter().zip(&frames) {
            assert!(g.2 == *f, "frame {} differs", g.0);
        }
        // After a large frame only the next head is read, so the large frames that follow
        // one (2: after 1; 5: after 4) go straight into place, whole.
        assert!(
            sink.got[2].1 && sink.got[5].1,
            "{:?}",
            sink.got.iter().map(|g| (g.0, g.1)).collect::<Vec<_>>()
        );
        assert!(
            !sink.got[3].1 && !sink.got[6].1,
            "small frames go through the buffer"
        );
    }
}
