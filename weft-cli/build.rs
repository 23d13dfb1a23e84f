//! Writes, for `weft info --abi`, which functions of the standard the C ABI (weft's `c_abi`,
//! exported by weft-abi) implements and which it does not yet, from the same scan weft-abi's
//! build uses.

#[allow(dead_code)]
#[path = "../weft/build/exports.rs"]
mod exports;

fn main() {
    let weft = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../weft");
    println!("cargo:rerun-if-changed=../weft/src/c_abi");
    println!("cargo:rerun-if-changed=../weft/abi/functions.txt");
    let mut out = String::new();
    for (name, implemented) in exports::functions(&weft) {
        out.push_str(if implemented { "+ " } else { "- " });
        out.push_str(&name);
        out.push('\n');
    }
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("abi_functions.txt");
    std::fs::write(dest, out).unwrap();
}
