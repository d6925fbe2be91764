//! The CUDA C source of heat3d's device kernels (`--backend cuda`), exactly
//! as the device path hands it to the run-time compiler, available in
//! every build (no GPU feature), so that a test can compile every variant
//! for AMD GPUs (feature `hip`).

/// The kernels' entry points: the four stencil variants, each also over
/// several regions in one launch (`_many`), the Runge-Kutta combinations
/// and the spectral scaling.
pub const ENTRIES: [&str; 10] = [
    "fd_sweep",
    "fd_tiled",
    "fd_pairs",
    "fd_shuffle",
    "fd_sweep_many",
    "fd_tiled_many",
    "fd_pairs_many",
    "fd_shuffle_many",
    "rk_combine",
    "spectral_scale",
];

/// The entry point that advances two Euler steps in one pass, in the
/// radius-1 module only (order 2).
pub const TWO_STEP_ENTRY: &str = "fd_two";

/// The stencil radii the device path compiles: `order / 2` for every
/// [`ORDERS`](stencil::ORDERS) (the spectral operator uses radius 1).
pub fn radii() -> impl Iterator<Item = usize> {
    stencil::ORDERS.into_iter().map(|order| order / 2)
}

/// The kernel module's name for stencil radius `radius`.
pub fn module_name(radius: usize) -> String {
    format!("heat3d_r{radius}")
}

/// The source of module [`module_name`]`(radius)`: halo's region
/// definitions (`halo::kernels::REGION_SOURCE`), then `kernels/heat3d.cu`
/// with `RADIUS` replaced by `radius`.
pub fn source(radius: usize) -> String {
    format!(
        "{}{}",
        halo::kernels::REGION_SOURCE,
        include_str!("../kernels/heat3d.cu").replace("RADIUS", &radius.to_string())
    )
}
