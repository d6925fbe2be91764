//! The CUDA C source of pfc's device kernels (`--backend cuda`), exactly as
//! the device path hands it to the run-time compiler, available in every
//! build (no GPU feature), so that a test can compile it for AMD GPUs
//! (feature `hip`).

/// The kernel module's name.
pub const MODULE: &str = "pfc";

/// The kernels' entry points: the cube of the field and the semi-implicit
/// update of the modes.
pub const ENTRIES: [&str; 2] = ["cube", "update"];

/// The source of module [`MODULE`]: `kernels/pfc.cu`, used as it is (no
/// substitutions).
pub fn source() -> String {
    include_str!("../kernels/pfc.cu").to_string()
}
