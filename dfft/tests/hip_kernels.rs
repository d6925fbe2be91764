//! The reshape kernels build for AMD GPUs: hiprtc compiles the exact source
//! the device reshapes hand NVRTC, without a device.
#![cfg(feature = "hip")]

use gpu::hip::{compile_for, compiler_architectures};

/// MI250X (gfx90a, OpenPFC's GPU) and MI300 (gfx942). An architecture the
/// installed ROCm's compiler does not know (ROCm 5.2 predates gfx942) is
/// skipped with a note; gfx90a must be known.
fn architectures() -> Vec<&'static str> {
    let known = compiler_architectures().unwrap();
    assert!(known.iter().any(|k| k == "gfx90a"), "{known:?}");
    ["gfx90a", "gfx942"]
        .into_iter()
        .filter(|a| {
            let ok = known.iter().any(|k| k == a);
            if !ok {
                eprintln!("skipped {a}: not a target of this ROCm's compiler ({known:?})");
            }
            ok
        })
        .collect()
}

#[test]
fn reshape_kernels_build_for_amd_gpus() {
    use dfft::kernels::{reshape_source, RESHAPE_ENTRIES, RESHAPE_MODULE};
    let src = reshape_source();
    for entry in RESHAPE_ENTRIES {
        assert!(src.contains(&format!("void {entry}(")), "no {entry}");
    }
    for arch in architectures() {
        let code = compile_for(arch, RESHAPE_MODULE, &src)
            .unwrap_or_else(|e| panic!("{RESHAPE_MODULE} for {arch}: {e}"));
        assert!(
            code.starts_with(b"\x7fELF"),
            "{arch}: not an ELF code object"
        );
    }
}
