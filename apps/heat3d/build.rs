//! Turns on the AVX-512 stencil kernels (`cfg(heat3d_avx512)`) when the
//! compiler has the AVX-512 intrinsics of `core::arch` (Rust 1.89 and
//! later); older compilers (down to the workspace's minimum) build the AVX2
//! and scalar kernels only.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(heat3d_avx512)");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let minor = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| {
            v.split_whitespace()
                .nth(1)?
                .split('.')
                .nth(1)?
                .parse::<u32>()
                .ok()
        });
    if minor.is_some_and(|m| m >= 89) {
        println!("cargo:rustc-cfg=heat3d_avx512");
    }
}
