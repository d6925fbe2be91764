//! The device kernels build for AMD GPUs: hiprtc compiles the exact source
//! `--backend cuda` hands NVRTC, without a device.
#![cfg(feature = "hip")]

use gpu::hip::{build_checked, buildable};

/// MI250X (gfx90a, OpenPFC's GPU) and MI300 (gfx942); one the installed
/// ROCm does not know (ROCm 5.2 predates gfx942) is skipped with a note,
/// gfx90a must be known.
#[test]
fn pfc_kernels_build_for_amd_gpus() {
    use pfc::kernels::{source, ENTRIES, MODULE};
    let (archs, unknown) = buildable(&["gfx90a", "gfx942"]).unwrap();
    assert!(archs.contains(&"gfx90a"), "gfx90a unknown to this ROCm");
    for a in unknown {
        eprintln!("skipped {a}: not a target of this ROCm's compiler");
    }
    for arch in archs {
        build_checked(arch, MODULE, &source(), &ENTRIES).unwrap_or_else(|e| panic!("{e}"));
    }
}
