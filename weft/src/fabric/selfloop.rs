//! The self transport: packets a rank sends to itself, kept in a queue in this process.

use super::Header;
use std::collections::VecDeque;

/// A FIFO of packets from this rank to itself. Payload bytes live in one reused buffer.
#[derive(Default)]
pub struct SelfLoop {
    packets: VecDeque<(Header, std::ops::Range<usize>)>,
    bytes: Vec<u8>,
}

impl SelfLoop {
    /// Largest payload one self packet carries (messages are fragmented above it like anywhere).
    pub const MAX_PAYLOAD: usize = 1 << 20;

    /// Queues a packet. Always has room.
    pub fn send(&mut self, hdr: &Header, payload: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(payload);
        self.packets.push_back((*hdr, start..start + payload.len()));
    }

    /// Delivers the queued packets in order; packets queued while delivering wait for the next
    /// call, so a handler that answers itself cannot loop forever.
    pub fn poll<S: FnMut(&Header, &[u8])>(&mut self, sink: &mut S) -> usize {
        let n = self.packets.len();
        if n == 0 {
            return 0;
        }
        let bytes = std::mem::take(&mut self.bytes);
        let batch: Vec<_> = self.packets.drain(..n).collect();
        for (hdr, range) in &batch {
            sink(hdr, &bytes[range.clone()]);
        }
        // Packets sent during delivery were appended to the fresh `self.bytes`; keep the old
        // allocation if nothing new arrived, so steady-state self traffic does not allocate.
        if self.bytes.is_empty() {
            self.bytes = bytes;
            self.bytes.clear();
        }
        n
    }

    /// Whether packets are waiting.
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }
}
