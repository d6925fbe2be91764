//! Enables the vector kernels (`cfg(mg_simd)`: AVX2 and AVX-512) when the
//! compiler is Rust 1.89 or later: the AVX-512 intrinsics are stable there,
//! and x86 intrinsics can be called without `unsafe` inside functions
//! compiled for their target features (as the kernels do). Older compilers,
//! down to the workspace's minimum, build the portable kernels only.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(mg_simd)");
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
        println!("cargo:rustc-cfg=mg_simd");
    }
}
