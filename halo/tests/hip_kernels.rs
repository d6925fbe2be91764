//! The device kernels build for AMD GPUs: hiprtc compiles the exact source
//! `DeviceField` hands NVRTC, for every element type, without a device.
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
fn halo_kernels_build_for_amd_gpus() {
    for arch in architectures() {
        for real in halo::kernels::ELEMENT_TYPES {
            let module = halo::kernels::module_name(real);
            let src = halo::kernels::source(real);
            for entry in halo::kernels::ENTRIES {
                assert!(
                    src.contains(&format!("void {entry}(")),
                    "{module}: no {entry}"
                );
            }
            let code = compile_for(arch, &module, &src)
                .unwrap_or_else(|e| panic!("{module} for {arch}: {e}"));
            assert!(
                code.starts_with(b"\x7fELF"),
                "{module} for {arch}: not an ELF code object"
            );
        }
    }
}
