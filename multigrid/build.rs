//! Enables the AVX-512 row kernels (`cfg(mg_avx512)`) when the compiler
//! has stable AVX-512 intrinsics in `core::arch` (Rust 1.89 or later);
//! older compilers, down to the workspace's minimum, build the AVX2 and
//! portable kernels only.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(mg_avx512)");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .unwrap_or_default();
    // "rustc 1.NN.P (...)": the minor version.
    let minor = version
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse::<u32>().ok());
    if minor.is_some_and(|m| m >= 89) {
        println!("cargo:rustc-cfg=mg_avx512");
    }
}
