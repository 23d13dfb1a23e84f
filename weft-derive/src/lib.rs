//! `#[derive(Equivalence)]` for plain structs (filled in by the derive work).
