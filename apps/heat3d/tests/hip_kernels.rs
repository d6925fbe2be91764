//! The device kernels build for AMD GPUs: hiprtc compiles the exact source
//! `--backend cuda` hands NVRTC, for every stencil radius, without a device,
//! and without fused multiply-adds.
#![cfg(feature = "hip")]

use gpu::hip::{compile_for, compiler_architectures};
use heat3d::kernels::{module_name, radii, source, ENTRIES};

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

/// The disassembly of `code` by llvm-objdump (`$LLVM_OBJDUMP` or
/// `llvm-objdump` on the path), or why there is none.
fn disassemble(code: &[u8], arch: &str, name: &str) -> Result<String, String> {
    let tool = std::env::var("LLVM_OBJDUMP").unwrap_or_else(|_| "llvm-objdump".into());
    let path = std::env::temp_dir().join(format!("{name}-{}.co", std::process::id()));
    std::fs::write(&path, code).map_err(|e| format!("writing {}: {e}", path.display()))?;
    let out = std::process::Command::new(&tool)
        .arg("-d")
        .arg(format!("--mcpu={arch}"))
        .arg(&path)
        .output();
    let _ = std::fs::remove_file(&path);
    let out = out.map_err(|e| format!("{tool} not runnable: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{tool} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn every_radius_builds_for_amd_gpus() {
    let radii: Vec<usize> = radii().collect();
    assert_eq!(radii, (1..=10).collect::<Vec<_>>());
    for arch in architectures() {
        for &r in &radii {
            let module = module_name(r);
            let src = source(r);
            assert!(!src.contains("RADIUS"), "{module}");
            for entry in ENTRIES {
                assert!(src.contains(&format!("{entry}(")), "{module}: no {entry}");
            }
            let code = compile_for(arch, &module, &src)
                .unwrap_or_else(|e| panic!("{module} for {arch}: {e}"));
            assert!(
                code.starts_with(b"\x7fELF"),
                "{module} for {arch}: not an ELF code object"
            );
            // Every entry point is a symbol of the code object.
            for entry in ENTRIES {
                let sym = [entry.as_bytes(), b"\0"].concat();
                assert!(
                    code.windows(sym.len()).any(|w| w == sym.as_slice()),
                    "{module} for {arch}: no symbol {entry}"
                );
            }
        }
    }
}

/// The host code never contracts `a * b + c`; with `-ffp-contract=off` the
/// code object holds no fused multiply-add (on gfx90a, where the compiler
/// contracts by default). Skipped, with the reason, without llvm-objdump.
#[test]
fn radius_one_has_no_fused_multiply_add_on_gfx90a() {
    let code = compile_for("gfx90a", &module_name(1), &source(1)).unwrap();
    let text = match disassemble(&code, "gfx90a", "heat3d_r1") {
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
    assert!(
        text.contains("v_mul_f64"),
        "no double multiply at all?\n{text}"
    );
    for fma in ["v_fma_f64", "v_fmac_f64"] {
        assert!(!text.contains(fma), "{fma} in the gfx90a code:\n{text}");
    }
}
