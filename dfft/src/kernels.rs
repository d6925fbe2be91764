//! The CUDA C source of `dfft`'s device kernels (the pack and unpack of the
//! blocks a device reshape moves, `dfft::cuda::DeviceFft3d`), exactly as
//! the device path hands it to the run-time compiler, available in every
//! build (no GPU feature), so that a test can compile it for AMD GPUs
//! (feature `hip`).

/// The kernel module's name.
pub const RESHAPE_MODULE: &str = "dfft_reshape";

/// The kernels' entry points.
pub const RESHAPE_ENTRIES: [&str; 2] = ["dfft_pack", "dfft_unpack"];

/// The source of module [`RESHAPE_MODULE`]: `kernels/reshape.cu`, used as
/// it is (no substitutions); `dfft::cuda` (feature `cuda`) compiles this.
pub fn reshape_source() -> String {
    include_str!("../kernels/reshape.cu").to_string()
}
