//! The CUDA C source of the device stencils (`kernels/star.cu`), exactly
//! as [`device`](crate) hands it to the run-time compiler, available in
//! every build (no GPU feature), so that a test can compile every variant
//! for AMD GPUs (feature `hip`).

/// The stencil entry points of every module: the four sweep variants, each
/// also over several regions in one launch (`_many`) and reading across a
/// self-periodic box's faces (`_wrap`).
pub const ENTRIES: [&str; 12] = [
    "fd_sweep",
    "fd_tiled",
    "fd_pairs",
    "fd_shuffle",
    "fd_sweep_many",
    "fd_tiled_many",
    "fd_pairs_many",
    "fd_shuffle_many",
    "fd_sweep_wrap",
    "fd_tiled_wrap",
    "fd_pairs_wrap",
    "fd_shuffle_wrap",
];

/// The entry point that advances two Euler steps in one pass, in the
/// radius-1 module only (order 2).
pub const TWO_STEP_ENTRY: &str = "fd_two";

/// The stencil radii the device path compiles: `order / 2` for every
/// [`ORDERS`](crate::ORDERS).
pub fn radii() -> impl Iterator<Item = usize> {
    crate::ORDERS.into_iter().map(|order| order / 2)
}

/// The kernel module's name for stencil radius `radius`.
pub fn module_name(radius: usize) -> String {
    format!("stencil_r{radius}")
}

/// The source of module [`module_name`]`(radius)`: halo's region
/// definitions (`halo::kernels::REGION_SOURCE`), then `kernels/star.cu`
/// with `RADIUS` replaced by `radius`.
pub fn source(radius: usize) -> String {
    format!(
        "{}{}",
        halo::kernels::REGION_SOURCE,
        include_str!("../kernels/star.cu").replace("RADIUS", &radius.to_string())
    )
}
