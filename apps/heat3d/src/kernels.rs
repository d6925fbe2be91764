//! The CUDA C source of heat3d's own device kernels (`--backend cuda`):
//! the Runge-Kutta stage combinations and the spectral step's scaling
//! (the stencil sweeps are [`stencil::kernels`]), available in every build
//! (no GPU feature), so that a test can compile them for AMD GPUs (feature
//! `hip`).

/// The kernels' entry points.
pub const ENTRIES: [&str; 2] = ["rk_combine", "spectral_scale"];

/// The kernel module's name.
pub const MODULE: &str = "heat3d";

/// The module's source: halo's region definitions
/// (`halo::kernels::REGION_SOURCE`), then `kernels/heat3d.cu`.
pub fn source() -> String {
    format!(
        "{}{}",
        halo::kernels::REGION_SOURCE,
        include_str!("../kernels/heat3d.cu")
    )
}
