//! Operating-system work: shared-memory segments, futex wait/wake on shared words,
//! cross-memory copy, clocks. All `unsafe` OS calls live here.
