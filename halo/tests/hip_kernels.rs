//! The halo kernels build for AMD GPUs: hiprtc compiles the exact source
//! the device fields hand NVRTC, for every element type, without a device.
#![cfg(feature = "hip")]

use gpu::hip::{build_checked, buildable};

/// MI250X (gfx90a, OpenPFC's GPU) and MI300 (gfx942); one the installed
/// ROCm does not know (ROCm 5.2 predates gfx942) is skipped with a note,
/// gfx90a must be known.
#[test]
fn halo_kernels_build_for_amd_gpus() {
    let (archs, unknown) = buildable(&["gfx90a", "gfx942"]).unwrap();
    assert!(archs.contains(&"gfx90a"), "gfx90a unknown to this ROCm");
    for a in unknown {
        eprintln!("skipped {a}: not a target of this ROCm's compiler");
    }
    for arch in archs {
        for real in halo::kernels::ELEMENT_TYPES {
            let module = halo::kernels::module_name(real);
            build_checked(
                arch,
                &module,
                &halo::kernels::source(real),
                &halo::kernels::ENTRIES,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
