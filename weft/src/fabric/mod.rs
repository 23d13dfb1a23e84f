//! Transports. Each moves packets (a fixed [`Header`] plus an inline payload) between ranks
//! with flow control, offers single-copy bulk pulls where it can, and reports arrivals when
//! polled. The engine sees them only through the [`Fabric`] trait, so it does not know which
//! transport carries a packet.
//!
//! - [`selfloop`]: a rank's messages to itself.
//! - [`shm`]: ranks on the same node, through shared-memory rings.
//! - [`tcp`]: any two ranks, through TCP connections made on first contact.
//! - [`node`]: the production fabric, routing each peer to one of the above.

pub mod node;
pub mod selfloop;
pub mod shm;
pub mod tcp;

use std::time::Duration;

/// What a packet is. The engine's protocols define the meaning; transports only carry it.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    /// First (or only) packet of an eagerly sent message; `len` is the whole message length.
    Eager = 1,
    /// A continuation of the eager message in progress from the same sender.
    Frag = 2,
    /// Rendezvous request-to-send: `aux` is the sender's buffer address, `cookie` its request.
    Rts = 3,
    /// Receiver matched an RTS and pulled the data itself: the sender's request `cookie` is done.
    Fin = 4,
    /// Receiver matched an RTS but cannot pull: send the data as `Data` packets to request `aux`.
    Cts = 5,
    /// Rendezvous data pushed by the sender; `aux` names the receiver's request, `cookie` the offset.
    Data = 6,
    /// A synchronous-mode eager message was matched: sender request `cookie` may complete.
    SyncAck = 7,
    /// Split rendezvous: the receiver pulls the first part itself and asks the sender to
    /// push the last `len` bytes to address `aux`; `cookie` is the sender's request,
    /// `context`/`tag` carry the receiver's request (low/high 32 bits).
    Share = 9,
    /// The sender pushed its part of a split rendezvous: `len` bytes for receiver request `aux`.
    Pushed = 10,
    /// The sender asks to cancel its message `cookie` (the cookie its `Eager` or `Rts` carried)
    /// if it is still unmatched (MPI_Cancel of a send).
    CancelSend = 11,
    /// Reply to `CancelSend` for message `cookie`: `aux` is 1 if it was removed unmatched.
    CancelAck = 12,
    /// A part of an internal active message: `context` names the handler, `cookie` the
    /// origin's request, `aux` the argument, `len` the part's offset in the payload.
    Am = 13,
    /// An answer to an `Am` part: `cookie` names the origin's request, `aux` the offset of
    /// the payload in its reply buffer, `tag` an error class + 1 (the payload then its text;
    /// 0: none); `FLAG_LAST` marks the part's last answer.
    AmReply = 14,
}

impl PacketKind {
    /// Decodes a kind byte; `None` for garbage.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => Self::Eager,
            2 => Self::Frag,
            3 => Self::Rts,
            4 => Self::Fin,
            5 => Self::Cts,
            6 => Self::Data,
            7 => Self::SyncAck,
            9 => Self::Share,
            10 => Self::Pushed,
            11 => Self::CancelSend,
            12 => Self::CancelAck,
            13 => Self::Am,
            14 => Self::AmReply,
            _ => return None,
        })
    }
}

/// Flag bit: the sender wants a [`PacketKind::SyncAck`] when the message is matched.
pub const FLAG_SYNC: u8 = 1;

/// The header every packet carries, on every transport. 40 bytes, `repr(C)`, no pointers
/// (addresses travel as plain integers and are only used through single-copy system calls).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// A [`PacketKind`] as a byte.
    pub kind: u8,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Reserved, zero.
    pub reserved: u16,
    /// Sender's rank in the world.
    pub src: u32,
    /// Communicator context id the message belongs to.
    pub context: u32,
    /// Message tag.
    pub tag: i32,
    /// Whole message length in bytes (not this packet's payload length).
    pub len: u64,
    /// Sender-side request id, or an offset for `Data`.
    pub cookie: u64,
    /// Kind-specific: a buffer address (`Rts`), a receiver request id (`Cts`, `Data`).
    pub aux: u64,
}

impl Header {
    /// The header as bytes in a fixed (little-endian) order, for byte-stream transports.
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0] = self.kind;
        b[1] = self.flags;
        b[2..4].copy_from_slice(&self.reserved.to_le_bytes());
        b[4..8].copy_from_slice(&self.src.to_le_bytes());
        b[8..12].copy_from_slice(&self.context.to_le_bytes());
        b[12..16].copy_from_slice(&self.tag.to_le_bytes());
        b[16..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..32].copy_from_slice(&self.cookie.to_le_bytes());
        b[32..40].copy_from_slice(&self.aux.to_le_bytes());
        b
    }

    /// The inverse of [`Header::encode`].
    pub fn decode(b: &[u8; HEADER_SIZE]) -> Header {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        Header {
            kind: b[0],
            flags: b[1],
            reserved: u16::from_le_bytes([b[2], b[3]]),
            src: u32_at(4),
            context: u32_at(8),
            tag: u32_at(12) as i32,
            len: u64_at(16),
            cookie: u64_at(24),
            aux: u64_at(32),
        }
    }
}

/// Size of [`Header`] in bytes.
pub const HEADER_SIZE: usize = std::mem::size_of::<Header>();
const _: () = assert!(HEADER_SIZE == 40);

/// Why a single-copy pull did not happen.
#[derive(Debug)]
pub enum PullError {
    /// This transport or this pair of processes cannot do single copy (the engine falls back
    /// to having the sender push the data through packets).
    Unsupported,
    /// The pull was attempted and failed: the peer is gone or the address is bad.
    Failed(crate::Error),
}

/// Where a transport delivers arrivals.
pub trait Sink {
    /// A packet arrived (`payload` is valid only during the call).
    fn packet(&mut self, hdr: &Header, payload: &[u8]);
    /// Offers to take the payload of `hdr` (`len` bytes, not yet received) straight into its
    /// final place: a byte-stream transport then reads it there and calls [`Sink::placed`]
    /// instead of [`Sink::packet`], saving a copy. `None`: deliver it as a packet.
    #[inline]
    fn place(&mut self, _hdr: &Header, _len: usize) -> Option<&mut [u8]> {
        None
    }
    /// The payload offered by [`Sink::place`] is now all there.
    #[inline]
    fn placed(&mut self, _hdr: &Header, _len: usize) {}
}

impl<F: FnMut(&Header, &[u8])> Sink for F {
    #[inline]
    fn packet(&mut self, hdr: &Header, payload: &[u8]) {
        self(hdr, payload)
    }
}

/// What the engine needs from the transports. One implementation routes to real transports
/// ([`node::NodeFabric`]); tests use an in-memory fake.
pub trait Fabric {
    /// This process's world rank.
    fn rank(&self) -> u32;
    /// Number of ranks in the world.
    fn size(&self) -> u32;
    /// The universe rank of peer `peer`: a number every process of every job joined to this
    /// one (spawned, or connected through a port) gives that process alike, so it orders
    /// members the same way everywhere (see [`crate::boot::universe_base`]). Peers past the
    /// world are processes of other jobs.
    #[inline]
    fn universe_rank(&self, peer: u32) -> u32 {
        peer
    }
    /// Largest payload one packet to `peer` can carry. Like [`Fabric::eager_limit`], asked
    /// once per peer when the engine starts: it must not change during the job.
    fn max_payload(&self, peer: u32) -> usize;
    /// Largest message sent eagerly to `peer`, when its transport sets its own
    /// (`None`: the engine's `WEFT_EAGER_LIMIT`).
    #[inline]
    fn eager_limit(&self, _peer: u32) -> Option<usize> {
        None
    }
    /// Queues one packet to `peer`. Returns `false` (and sends nothing) when there is no room
    /// now; the caller keeps the packet and tries again after polling.
    fn try_send(&mut self, peer: u32, hdr: &Header, payload: &[u8]) -> bool;
    /// Delivers every packet that has arrived to `sink` (payload valid only during the call).
    /// Returns how many were delivered.
    fn poll<S: Sink>(&mut self, sink: &mut S) -> usize;
    /// Copies `dst.len()` bytes from address `remote` in `peer`'s memory into `dst`.
    ///
    /// # Safety
    /// `remote..remote + dst.len()` is, in `peer`'s address space, a buffer that `peer` has
    /// lent for this copy (it named it in a rendezvous packet): allocated, unmoved and not
    /// written until the copy returns. When `peer` is this process that is Rust's aliasing
    /// rule for a shared borrow, so a made-up address would be undefined behaviour.
    unsafe fn pull(&mut self, peer: u32, remote: u64, dst: &mut [u8]) -> Result<(), PullError>;
    /// Copies `src` to address `remote` in `peer`'s memory (the sender's half of a split
    /// rendezvous).
    ///
    /// # Safety
    /// `remote..remote + src.len()` is, in `peer`'s address space, a buffer that `peer` has
    /// lent for this copy: allocated, unmoved, and neither read nor written by anyone else
    /// until the copy returns (an exclusive borrow, when `peer` is this process).
    unsafe fn push(&mut self, peer: u32, remote: u64, src: &[u8]) -> Result<(), PullError>;
    /// Announces that this rank is about to sleep: after this, a sender that delivers a packet
    /// must wake us. The caller polls once more before calling [`Fabric::sleep`].
    fn prepare_sleep(&mut self);
    /// Sleeps until woken by a delivery or until `timeout`; then withdraws the announcement.
    fn sleep(&mut self, timeout: Duration);
    /// Withdraws the announcement without sleeping (the re-poll found work).
    fn cancel_sleep(&mut self);
    /// Wakes those of `peers` (world ranks; this rank may be among them) that sleep, or are
    /// about to: a flag they may wait on in node-shared memory changed, published before this
    /// call. The same handshake as a packet's delivery; a transport without shared memory has
    /// nothing to do.
    #[inline]
    fn wake_all(&mut self, _peers: &[u32]) {}
    /// Advisory, for the other ranks of the node: at `now_us` ([`crate::sys::monotonic_us`])
    /// this rank is about to give up its CPU (a yield or a sleep; `true`) or has it back
    /// (`false`). A transport without shared memory has no one to tell.
    fn note_waiting(&mut self, _waiting: bool, _now_us: u32) {}
    /// How many µs between `from_us` and `to_us` the other ranks of this node held (or
    /// wanted) the CPU this one is on now, as far as their advisory words say (each one's
    /// latest stretch); `None` when unknown. After a yield that kept the CPU away for a whole
    /// slice, it tells siblings' work (which yielding is right to let through) from an
    /// outsider's.
    fn sibling_time_here(&self, _from_us: u32, _to_us: u32) -> Option<u32> {
        None
    }
}
