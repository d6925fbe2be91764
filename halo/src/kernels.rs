//! The CUDA C sources of `halo`'s device kernels, exactly as the device
//! path hands them to the run-time compiler, available in every build (no
//! GPU feature): `DeviceField` (feature `cuda`) compiles
//! [`source`]`(T::C_NAME)` as module [`module_name`]`(T::C_NAME)`, and a
//! test compiles the same text for AMD GPUs (feature `hip`).

/// The C names of the element types the kernels are instantiated for
/// (`halo::DeviceElem::C_NAME` of `f64` and `f32`).
pub const ELEMENT_TYPES: [&str; 2] = ["double", "float"];

/// The CUDA C definition of `struct Box3` (a region as kernels take it:
/// first padded index and extent per axis) and of `cell(b, q, s0, s1)`, the
/// padded offset of cell `q` (row-major) of region `b`. Other crates'
/// kernels prepend it to their own sources.
pub const REGION_SOURCE: &str = include_str!("../kernels/region.cuh");

/// The kernel module's name for element type `real` (a C type name).
pub fn module_name(real: &str) -> String {
    format!("halo_{real}")
}

/// The source of the pack, unpack and copy kernels (`halo_pack`,
/// `halo_unpack`, `halo_copy`, `halo_copy_many`) for element type `real` (a
/// C type name, one of [`ELEMENT_TYPES`]): [`REGION_SOURCE`], then
/// `kernels/halo.cu` with `REAL` replaced by `real`.
pub fn source(real: &str) -> String {
    format!(
        "{}{}",
        REGION_SOURCE,
        include_str!("../kernels/halo.cu").replace("REAL", real)
    )
}

/// The kernels' entry points.
pub const ENTRIES: [&str; 4] = ["halo_pack", "halo_unpack", "halo_copy", "halo_copy_many"];
