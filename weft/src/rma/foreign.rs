//! Element combiners that a front end has and the core has not: the C compiler's `long
//! double` arithmetic (Rust has no such type). The C ABI registers its table when the
//! program initializes; an origin names an entry by its code (its place in the table plus 1,
//! the same in every process of the job, which all run this library), and a target reached by
//! messages combines with the entry it registered itself. A target whose front end registered
//! none refuses such an accumulate with a clear error.

use std::sync::OnceLock;

/// Combines whole elements, `inout = input ∘ inout`, element by element.
pub type ForeignFn = fn(&[u8], &mut [u8]);

/// One registered combiner.
#[derive(Clone, Copy, Debug)]
pub struct Foreign {
    /// Bytes of one element (packed).
    pub unit: usize,
    /// The function.
    pub combine: ForeignFn,
}

/// The most entries a table may have: codes are 4 bits on the wire, 0 meaning none.
pub const MAX_FOREIGN: usize = 15;

static TABLE: OnceLock<&'static [Foreign]> = OnceLock::new();

/// Registers the front end's table (the first registration stays: every front end of one
/// library registers the same one).
pub fn register(table: &'static [Foreign]) {
    assert!(table.len() <= MAX_FOREIGN, "at most {MAX_FOREIGN} foreign combiners");
    let _ = TABLE.set(table);
}

/// The combiner of `code` (1-based), if this process registered it.
pub fn get(code: u8) -> Option<Foreign> {
    let i = usize::from(code).checked_sub(1)?;
    TABLE.get()?.get(i).copied()
}
