//! Shared helpers for Weft's side of the benchmarks (`bench/src/bin/*.rs`). Each program mirrors
//! a C program in `bench/c/` (same sizes, counts and method) and prints the same
//! `RESULT <benchmark> <size_bytes> <value> <unit>` lines, which `bench/compare.py` parses.

/// True when the program was started with `--quick` (fewer sizes and iterations: a smoke run).
pub fn quick() -> bool {
    std::env::args().nth(1).as_deref() == Some("--quick")
}

/// Ends the program unless the job has exactly two ranks (the point-to-point benchmarks).
pub fn require_two_ranks(name: &str, nranks: i32) {
    if nranks != 2 {
        eprintln!("{name}: needs exactly 2 ranks, got {nranks}");
        std::process::exit(1);
    }
}

/// Median of the values (the mean of the two middle ones for an even count), as in the C code.
pub fn median(v: &mut [f64]) -> f64 {
    assert!(!v.is_empty(), "median of nothing");
    v.sort_by(|a, b| a.partial_cmp(b).expect("NaN in timings"));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Prints one result line and flushes, so a run killed later still reports what it measured.
pub fn result(bench: &str, size: usize, value: f64, unit: &str, decimals: usize) {
    use std::io::Write;
    println!("RESULT {bench} {size} {value:.decimals$} {unit}");
    std::io::stdout().flush().ok();
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
