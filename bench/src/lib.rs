//! Shared helpers for the benchmark programs.
