//! The device stencils build for AMD GPUs: hiprtc compiles the exact
//! source that `stencil::device` hands NVRTC, for every stencil radius,
//! without a device, and without fused multiply-adds.
#![cfg(feature = "hip")]

use gpu::hip::{build_checked, buildable, compile_for, disassemble};
use stencil::kernels::{module_name, radii, source, ENTRIES, TWO_STEP_ENTRY};

/// MI250X (gfx90a, OpenPFC's GPU) and MI300 (gfx942), for every radius;
/// an architecture the installed ROCm does not know (ROCm 5.2 predates
/// gfx942) is skipped with a note, gfx90a must be known.
#[test]
fn every_radius_builds_for_amd_gpus() {
    let radii: Vec<usize> = radii().collect();
    assert_eq!(radii, (1..=10).collect::<Vec<_>>());
    let (archs, unknown) = buildable(&["gfx90a", "gfx942"]).unwrap();
    assert!(archs.contains(&"gfx90a"), "gfx90a unknown to this ROCm");
    for a in unknown {
        eprintln!("skipped {a}: not a target of this ROCm's compiler");
    }
    for arch in archs {
        for &r in &radii {
            let src = source(r);
            assert!(!src.contains("RADIUS"), "{}", module_name(r));
            // The two-step pass exists at radius 1 only.
            let mut entries = ENTRIES.to_vec();
            if r == 1 {
                entries.push(TWO_STEP_ENTRY);
            }
            build_checked(arch, &module_name(r), &src, &entries).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// The host sweeps never contract `a * b + c`; with `-ffp-contract=off`
/// the code object holds no fused multiply-add (on gfx90a, where the
/// compiler contracts by default). Skipped, with the reason, without
/// llvm-objdump.
#[test]
fn radius_one_has_no_fused_multiply_add_on_gfx90a() {
    let code = compile_for("gfx90a", &module_name(1), &source(1)).unwrap();
    let text = match disassemble(&code, "gfx90a") {
        Ok(t) => t,
        Err(why) => {
            eprintln!("skipped: no disassembly ({why})");
            return;
        }
    };
    for entry in ENTRIES.iter().chain([&TWO_STEP_ENTRY]) {
        assert!(
            text.contains(&format!("<{entry}>:")),
            "no {entry} in the disassembly"
        );
    }
    assert!(
        text.contains("v_mul_f64"),
        "no double multiply at all?\n{text}"
    );
    for fma in ["v_fma_f64", "v_fmac_f64"] {
        assert!(!text.contains(fma), "{fma} in the gfx90a code:\n{text}");
    }
}
