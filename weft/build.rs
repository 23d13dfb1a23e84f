//! Links libpmix when the `pmix` feature is on (found with pkg-config `pmix`, as Debian's
//! libpmix-dev installs it); does nothing otherwise.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_PMIX").is_none() {
        return;
    }
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let out = Command::new("pkg-config")
        .args(["--libs-only-L", "pmix"])
        .output();
    match out {
        Ok(o) if o.status.success() => {
            for dir in String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|w| w.strip_prefix("-L"))
            {
                println!("cargo:rustc-link-search=native={dir}");
            }
        }
        Ok(o) => panic!(
            "the `pmix` feature needs libpmix: `pkg-config --libs pmix` failed ({}); install \
             Debian's libpmix-dev or set PKG_CONFIG_PATH",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!("the `pmix` feature needs pkg-config to find libpmix: {e}"),
    }
    println!("cargo:rustc-link-lib=dylib=pmix");
}
