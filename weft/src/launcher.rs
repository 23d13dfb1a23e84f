//! What a process manager needs from Weft to start and serve its ranks: `weft run` uses it,
//! and so can another launcher.
//!
//! A stable extension point of the public API (the layers below it are private). Every item is
//! a plain value or a safe function over values: the PMI-1 wire format the ranks speak, the
//! node mapping a launcher serves (`PMI_process_mapping`), the challenge-response by which TCP
//! peers prove they hold the job's secret, random bytes for secrets and nonces, and this
//! host's name and interface addresses.

/// The PMI-1 wire format: one `cmd=NAME key=value ...` line per message.
pub mod pmi {
    pub use crate::boot::pmi1::{Line, MAX_LINE};
}

/// The node mapping (`PMI_process_mapping`): which node each rank runs on.
pub mod mapping {
    pub use crate::boot::mapping::{encode, single_node};
}

/// The TCP transport's challenge-response: each side of a connection shows an HMAC over both
/// ranks and both nonces, keyed with the job's secret, without sending the secret.
pub mod auth {
    pub use crate::fabric::tcp::auth::*;
    /// The key under which the job's TCP secret (hex) is published to the ranks.
    pub use crate::fabric::tcp::SECRET_KEY;
}

/// Random bytes, this host's names, and what the transports can do here (`weft info`).
pub mod host {
    pub use crate::fabric::tcp::addr::{choose as tcp_listen_addr, Choice as TcpListenAddr};
    pub use crate::sys::cma::works_here as single_copy_works;
    pub use crate::sys::log_limit::LogLimit;
    pub use crate::sys::net::{interface_addrs, IfAddr};
    pub use crate::sys::{hostname, random_bytes, random_hex};
}
