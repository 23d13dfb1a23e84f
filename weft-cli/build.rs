//! Writes, for `weft info --abi`, which functions of the standard the C ABI (weft-abi)
//! implements and which it does not yet, from the same scan weft-abi's build uses.

#[path = "../weft-abi/build/exports.rs"]
mod exports;

fn main() {
    let abi = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../weft-abi");
    println!("cargo:rerun-if-changed=../weft-abi/src");
    println!("cargo:rerun-if-changed=../weft-abi/abi/functions.txt");
    let mut out = String::new();
    for (name, implemented) in exports::functions(&abi) {
        out.push_str(if implemented { "+ " } else { "- " });
        out.push_str(&name);
        out.push('\n');
    }
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("abi_functions.txt");
    std::fs::write(dest, out).unwrap();
}
