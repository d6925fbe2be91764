//! Local 3D real transforms on NVIDIA GPUs through cuFFT (feature `cuda`).
//!
//! [`DeviceR2c`] transforms a whole grid held by one rank: forward D2Z
//! from a row-major `n0 x n1 x n2` real array (last axis fastest) to the
//! `n0 x n1 x (n2 / 2 + 1)` half spectrum, and backward Z2D, both
//! unnormalised (cuFFT's convention); the caller folds `1 / N` into
//! whatever it multiplies the spectrum by. The distributed transform's
//! reshapes are not on the device yet: a grid split over several ranks
//! is refused with an error that says so.

use gpu::cuda::cudarc::cufft::{sys, CudaFft};
use gpu::cuda::cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use gpu::cuda::{check_cufft, Device};
use gpu::GpuError;

/// A complex value as cuFFT stores it.
pub type DeviceComplex = sys::double2;

fn cufft(call: &str) -> impl FnOnce(gpu::cuda::cudarc::cufft::result::CufftError) -> GpuError + '_ {
    move |e| GpuError::Driver {
        call: call.to_string(),
        detail: format!("{:?}", e.0),
    }
}

/// Forward and backward 3D real transforms of one rank's whole grid.
pub struct DeviceR2c {
    shape: [usize; 3],
    forward: CudaFft,
    backward: CudaFft,
}

impl std::fmt::Debug for DeviceR2c {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceR2c")
            .field("shape", &self.shape)
            .finish()
    }
}

impl DeviceR2c {
    /// Plans both transforms of `shape` on `device`'s `main` stream. `ranks`
    /// is the number of ranks the grid is split over; more than one is an
    /// error for now.
    pub fn new(device: &Device, shape: [usize; 3], ranks: usize) -> Result<Self, GpuError> {
        if ranks != 1 {
            return Err(GpuError::Invalid(format!(
                "the device FFT transforms a grid held by one rank; this grid is split over \
                 {ranks} ranks (run the spectral operator on the device with one rank, or on \
                 the cpu backend with any number)"
            )));
        }
        if shape.iter().any(|&n| n == 0 || n > i32::MAX as usize) {
            return Err(GpuError::Invalid(format!(
                "FFT shape {shape:?} out of range (valid: 1..={} per axis)",
                i32::MAX
            )));
        }
        check_cufft()?;
        let n = shape.map(|x| x as i32);
        let s = device.main().clone();
        let forward = CudaFft::plan_3d(n[0], n[1], n[2], sys::cufftType::CUFFT_D2Z, s.clone())
            .map_err(cufft("cufftPlan3d(D2Z)"))?;
        let backward = CudaFft::plan_3d(n[0], n[1], n[2], sys::cufftType::CUFFT_Z2D, s)
            .map_err(cufft("cufftPlan3d(Z2D)"))?;
        Ok(DeviceR2c {
            shape,
            forward,
            backward,
        })
    }

    /// Real values: `n0 n1 n2`.
    pub fn real_len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Complex values of the half spectrum: `n0 n1 (n2 / 2 + 1)`.
    pub fn spectrum_len(&self) -> usize {
        self.shape[0] * self.shape[1] * (self.shape[2] / 2 + 1)
    }

    /// The half spectrum's shape.
    pub fn spectrum_shape(&self) -> [usize; 3] {
        [self.shape[0], self.shape[1], self.shape[2] / 2 + 1]
    }

    fn check(&self, real: usize, spec: usize) -> Result<(), GpuError> {
        if real != self.real_len() || spec != self.spectrum_len() {
            return Err(GpuError::Invalid(format!(
                "FFT buffers of {real} real and {spec} complex values; the plan for {:?} needs {} and {}",
                self.shape,
                self.real_len(),
                self.spectrum_len()
            )));
        }
        Ok(())
    }

    /// `spec = FFT(real)` (unnormalised), queued on the plan's stream.
    pub fn forward(
        &self,
        real: &CudaView<'_, f64>,
        spec: &mut CudaSlice<DeviceComplex>,
    ) -> Result<(), GpuError> {
        self.check(real.len(), spec.len())?;
        self.forward
            .exec_d2z(real, spec)
            .map_err(cufft("cufftExecD2Z"))
    }

    /// `real = IFFT(spec)` (unnormalised; `spec` is overwritten), queued on
    /// the plan's stream.
    pub fn backward(
        &self,
        spec: &mut CudaSlice<DeviceComplex>,
        real: &mut CudaViewMut<'_, f64>,
    ) -> Result<(), GpuError> {
        self.check(real.len(), spec.len())?;
        self.backward
            .exec_z2d(spec, real)
            .map_err(cufft("cufftExecZ2D"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_grids_are_refused() {
        let Ok(d) = Device::open(0) else {
            eprintln!("skipped: no CUDA device");
            return;
        };
        let e = DeviceR2c::new(&d, [8, 8, 8], 2).unwrap_err().to_string();
        assert!(e.contains("split over 2 ranks"), "{e}");
    }

    /// Forward then backward returns the input times N, and a single mode
    /// lands in its bin with amplitude N / 2.
    #[test]
    fn round_trip_and_one_mode() {
        let Ok(d) = Device::open(0) else {
            eprintln!("skipped: no CUDA device");
            return;
        };
        let shape = [6, 10, 12];
        let plan = DeviceR2c::new(&d, shape, 1).unwrap();
        let n: usize = shape.iter().product();
        let tau = 2.0 * std::f64::consts::PI;
        let host: Vec<f64> = (0..n)
            .map(|q| {
                let (i, j, k) = (q / 120, (q / 12) % 10, q % 12);
                (tau * (i as f64 / 6.0 + 2.0 * j as f64 / 10.0 + 3.0 * k as f64 / 12.0)).cos()
            })
            .collect();
        let real = d.upload(&host, "real").unwrap();
        let mut spec = d
            .alloc_zeros::<DeviceComplex>(plan.spectrum_len(), "spec")
            .unwrap();
        plan.forward(&real.slice(..), &mut spec).unwrap();
        let s = d.download(&spec).unwrap();
        let h = 12 / 2 + 1;
        for (q, v) in s.iter().enumerate() {
            let (i, j, k) = (q / (10 * h), (q / h) % 10, q % h);
            let want = if (i, j, k) == (1, 2, 3) {
                n as f64 / 2.0
            } else {
                0.0
            };
            assert!(
                (v.x - want).abs() < 1e-9 && v.y.abs() < 1e-9,
                "bin {:?}: {v:?}",
                (i, j, k)
            );
        }
        let mut back = d.alloc_zeros::<f64>(n, "back").unwrap();
        plan.backward(&mut spec, &mut back.slice_mut(..)).unwrap();
        let b = d.download(&back).unwrap();
        for q in 0..n {
            assert!((b[q] / n as f64 - host[q]).abs() < 1e-12, "at {q}");
        }
    }
}
