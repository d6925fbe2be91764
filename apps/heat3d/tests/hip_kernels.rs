//! heat3d's own device kernels (the Runge-Kutta combinations and the
//! spectral scaling) build for AMD GPUs: hiprtc compiles the exact source
//! `--backend cuda` hands NVRTC, without a device, and without fused
//! multiply-adds. The stencils are the `stencil` crate's, tested there.
#![cfg(feature = "hip")]

use gpu::hip::{build_checked, buildable, compile_for, disassemble};
use heat3d::kernels::{source, ENTRIES, MODULE};

/// MI250X (gfx90a) and MI300 (gfx942, where the installed ROCm knows it).
#[test]
fn builds_for_amd_gpus() {
    let (archs, unknown) = buildable(&["gfx90a", "gfx942"]).unwrap();
    assert!(archs.contains(&"gfx90a"), "gfx90a unknown to this ROCm");
    for a in unknown {
        eprintln!("skipped {a}: not a target of this ROCm's compiler");
    }
    for arch in archs {
        build_checked(arch, MODULE, &source(), &ENTRIES).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The host code never contracts `u + h * b`; with `-ffp-contract=off`
/// the gfx90a code object holds no fused multiply-add. Skipped, with the
/// reason, without llvm-objdump.
#[test]
fn no_fused_multiply_add_on_gfx90a() {
    let code = compile_for("gfx90a", MODULE, &source()).unwrap();
    let text = match disassemble(&code, "gfx90a") {
        Ok(t) => t,
        Err(why) => {
            eprintln!("skipped: no disassembly ({why})");
            return;
        }
    };
    for entry in ENTRIES {
        assert!(
            text.contains(&format!("<{entry}>:")),
            "no {entry} in the disassembly"
        );
    }
    assert!(text.contains("v_mul_f64"), "no double multiply?\n{text}");
    for fma in ["v_fma_f64", "v_fmac_f64"] {
        assert!(!text.contains(fma), "{fma} in the gfx90a code:\n{text}");
    }
}
