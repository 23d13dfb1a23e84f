//! The proof a TCP peer gives that it belongs to the job: a mutual challenge-response over
//! the job secret (HMAC-SHA-256), before anything else it sends is read.
//!
//! ```text
//! connector C (rank c)                          acceptor A (rank a)
//!   Hello     magic, order, c, a, nonce_c  -->
//!                                         <--   Challenge  magic, nonce_a, mac("A")
//!   Proof     mac("C")                     -->
//!                                         <--   Welcome    1 (kept) or 0 (dropped: duplicate)
//! mac(role) = HMAC(secret, role || c || a || nonce_c || nonce_a)
//! ```
//!
//! A proves it holds the secret before C sends its proof, and C before A trusts a byte of
//! its traffic; fresh nonces on both sides make a recorded exchange useless later. Frames
//! flow only after the Welcome.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Protocol name and version, first on the wire.
pub const MAGIC: [u8; 8] = *b"WEFTTCP1";
/// Written in the sender's byte order: a peer reading it differently has another order.
const ORDER: u32 = 0x0102_0304;

/// Bytes of a per-job secret.
pub const SECRET_LEN: usize = 32;
/// Bytes of a nonce.
pub const NONCE_LEN: usize = 32;
/// Bytes of a MAC.
pub const MAC_LEN: usize = 32;

/// Length of [`Hello`] on the wire.
pub const HELLO_LEN: usize = 8 + 4 + 4 + 4 + NONCE_LEN;
/// Length of the challenge on the wire.
pub const CHALLENGE_LEN: usize = 8 + NONCE_LEN + MAC_LEN;
/// Length of the proof.
pub const PROOF_LEN: usize = MAC_LEN;

/// The connector's opening message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The connecting rank.
    pub from: u32,
    /// The rank it wants to reach.
    pub to: u32,
    /// Its fresh nonce.
    pub nonce: [u8; NONCE_LEN],
}

impl Hello {
    /// Wire form.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&ORDER.to_ne_bytes());
        b[12..16].copy_from_slice(&self.from.to_le_bytes());
        b[16..20].copy_from_slice(&self.to.to_le_bytes());
        b[20..].copy_from_slice(&self.nonce);
        b
    }

    /// Parses a hello, or says why it is not one.
    pub fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, String> {
        if b[..8] != MAGIC {
            return Err("it does not speak weft's TCP protocol (bad magic)".into());
        }
        if u32::from_ne_bytes(b[8..12].try_into().unwrap()) != ORDER {
            return Err("it runs on a machine of another byte order (not supported)".into());
        }
        Ok(Hello {
            from: u32::from_le_bytes(b[12..16].try_into().unwrap()),
            to: u32::from_le_bytes(b[16..20].try_into().unwrap()),
            nonce: b[20..].try_into().unwrap(),
        })
    }
}

/// Which side computes a MAC.
#[derive(Clone, Copy)]
pub enum Role {
    /// The acceptor's answer to the hello.
    Acceptor,
    /// The connector's proof.
    Connector,
}

/// The HMAC state over one exchange, before finalizing.
fn keyed(
    secret: &[u8; SECRET_LEN],
    role: Role,
    connector: u32,
    acceptor: u32,
    nonce_c: &[u8; NONCE_LEN],
    nonce_a: &[u8; NONCE_LEN],
) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes any key");
    m.update(match role {
        Role::Acceptor => b"A",
        Role::Connector => b"C",
    });
    m.update(&connector.to_le_bytes());
    m.update(&acceptor.to_le_bytes());
    m.update(nonce_c);
    m.update(nonce_a);
    m
}

/// The MAC one side shows for the exchange between `connector` and `acceptor`.
pub fn mac(
    secret: &[u8; SECRET_LEN],
    role: Role,
    connector: u32,
    acceptor: u32,
    nonce_c: &[u8; NONCE_LEN],
    nonce_a: &[u8; NONCE_LEN],
) -> [u8; MAC_LEN] {
    keyed(secret, role, connector, acceptor, nonce_c, nonce_a)
        .finalize()
        .into_bytes()
        .into()
}

/// Checks `shown` against the expected MAC in constant time.
pub fn verify(
    secret: &[u8; SECRET_LEN],
    role: Role,
    connector: u32,
    acceptor: u32,
    nonces: (&[u8; NONCE_LEN], &[u8; NONCE_LEN]),
    shown: &[u8],
) -> bool {
    keyed(secret, role, connector, acceptor, nonces.0, nonces.1)
        .verify_slice(shown)
        .is_ok()
}

/// The acceptor's challenge: its nonce and its own MAC.
pub fn encode_challenge(nonce_a: &[u8; NONCE_LEN], mac_a: &[u8; MAC_LEN]) -> [u8; CHALLENGE_LEN] {
    let mut b = [0u8; CHALLENGE_LEN];
    b[..8].copy_from_slice(&MAGIC);
    b[8..8 + NONCE_LEN].copy_from_slice(nonce_a);
    b[8 + NONCE_LEN..].copy_from_slice(mac_a);
    b
}

/// Splits a challenge into nonce and MAC.
pub fn decode_challenge(
    b: &[u8; CHALLENGE_LEN],
) -> Result<([u8; NONCE_LEN], [u8; MAC_LEN]), String> {
    if b[..8] != MAGIC {
        return Err("it does not speak weft's TCP protocol (bad magic)".into());
    }
    Ok((
        b[8..8 + NONCE_LEN].try_into().unwrap(),
        b[8 + NONCE_LEN..].try_into().unwrap(),
    ))
}

/// Hex text of a secret (how it travels through the process manager).
pub fn secret_to_hex(s: &[u8; SECRET_LEN]) -> String {
    s.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses [`secret_to_hex`]'s output.
pub fn secret_from_hex(t: &str) -> Option<[u8; SECRET_LEN]> {
    let t = t.trim();
    if t.len() != 2 * SECRET_LEN || !t.is_ascii() {
        return None;
    }
    let mut s = [0u8; SECRET_LEN];
    for (i, b) in s.iter_mut().enumerate() {
        *b = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips_and_rejects_garbage() {
        let h = Hello {
            from: 3,
            to: 7,
            nonce: [9; NONCE_LEN],
        };
        assert_eq!(Hello::decode(&h.encode()).unwrap(), h);
        let mut bad = h.encode();
        bad[0] = b'X';
        assert!(Hello::decode(&bad).unwrap_err().contains("magic"));
        let mut swapped = h.encode();
        swapped[8..12].copy_from_slice(&ORDER.swap_bytes().to_ne_bytes());
        assert!(Hello::decode(&swapped).unwrap_err().contains("byte order"));
    }

    #[test]
    fn macs_bind_secret_role_ranks_and_nonces() {
        let s = [1u8; SECRET_LEN];
        let (nc, na) = ([2u8; NONCE_LEN], [3u8; NONCE_LEN]);
        let m = mac(&s, Role::Connector, 1, 2, &nc, &na);
        assert!(verify(&s, Role::Connector, 1, 2, (&nc, &na), &m));
        assert!(!verify(
            &[4; SECRET_LEN],
            Role::Connector,
            1,
            2,
            (&nc, &na),
            &m
        ));
        assert!(!verify(&s, Role::Acceptor, 1, 2, (&nc, &na), &m));
        assert!(!verify(&s, Role::Connector, 2, 1, (&nc, &na), &m));
        assert!(!verify(&s, Role::Connector, 1, 2, (&na, &nc), &m));
        assert!(!verify(&s, Role::Connector, 1, 2, (&nc, &na), &m[..31]));
    }

    #[test]
    fn secret_hex_round_trips() {
        let mut s = [0u8; SECRET_LEN];
        for (i, b) in s.iter_mut().enumerate() {
            *b = (i * 37) as u8;
        }
        assert_eq!(secret_from_hex(&secret_to_hex(&s)), Some(s));
        assert_eq!(secret_from_hex("abc"), None);
        assert_eq!(secret_from_hex(&"zz".repeat(SECRET_LEN)), None);
    }
}
