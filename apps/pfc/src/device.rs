//! The CUDA backend (feature `cuda`, `--backend cuda`): the step on the
//! GPU, on any number of ranks.
//!
//! `psi` lives on the device as this rank's block of the grid, the layout
//! of the host's (the input of [`DeviceFft3d`], the device form of the
//! host's r2c plan: cuFFT's 3D transform on one rank, batched cuFFT and
//! device reshapes on several). A step is: forward `psi -> spec`; `cube`
//! writes `psi^3` into `work`; forward `work -> spec_n`; `update` applies
//! the semi-implicit factor to each mode of this rank's share of the half
//! spectrum (in the plan's output layout) with the `1 / N` of the
//! unnormalised backward transform folded in; backward `spec -> psi`. The per-mode factors are
//! computed on the host by the same function as the host step's
//! ([`crate::mode_factors`]) and uploaded once. Everything runs on the
//! device's `main` stream, in order.
//!
//! The host keeps `psi` as a mirror for the diagnostics and the output
//! (the free energy's transforms run on the host, from the mirror):
//! [`DeviceSolver::sync_host`] downloads it when the device is ahead,
//! [`DeviceSolver::sync_device`] uploads it when the host was written
//! (an initial field, a restart, [`crate::Solver::set_field`]).
//!
//! **Non-finite values** set a device flag (`bad`) with the first step
//! whose field was non-finite, read whenever the mirror is brought up to
//! date. **Step times** come from device events on `main` around each step.
//!
//! Each rank takes device `device` when given, else its index among the
//! ranks of its machine modulo the device count; ranks of one machine
//! exchange the reshapes device to device (`gpu::links`: in-process, or
//! MPI processes through CUDA IPC), ranks of several machines through host
//! buffers.

use crate::config::{Config, GpuExchange};
use anyhow::{anyhow, bail, Context, Result};
use comm::Communicator;
use dfft::cuda::{DeviceComplex, DeviceFft3d, Route};
use gpu::cuda::cudarc::cufft::{result::estimate_3d, sys::cufftType};
use gpu::cuda::cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use gpu::cuda::{launch_1d, Device, StepTimer};
use std::sync::Arc;

/// `bad` when no step has written a non-finite value.
const NONE_BAD: u64 = u64::MAX;

fn gpu_err(e: gpu::GpuError) -> anyhow::Error {
    anyhow!(e)
}

/// Which copy of `psi` is current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mirror {
    /// Host and device hold the same field.
    Same,
    /// The host was written since the last upload.
    HostNewer,
    /// The device stepped since the last download.
    DeviceNewer,
}

struct Kernels {
    cube: CudaFunction,
    update: CudaFunction,
}

/// The device state of one rank.
pub(crate) struct DeviceSolver {
    dev: Arc<Device>,
    plan: DeviceFft3d,
    psi: CudaSlice<f64>,
    work: CudaSlice<f64>,
    spec: CudaSlice<DeviceComplex>,
    spec_n: CudaSlice<DeviceComplex>,
    /// dt k^2 per mode (cuFFT's half-spectrum order).
    dtk2: CudaSlice<f64>,
    /// 1 / (1 + dt k^2 (r + (1 - k^2)^2)) / N per mode.
    inv: CudaSlice<f64>,
    k: Kernels,
    /// The first step whose field was non-finite ([`NONE_BAD`]: none).
    bad: CudaSlice<u64>,
    mirror: Mirror,
    /// Device time of each step.
    timer: StepTimer,
}

/// The grid's extents as cuFFT takes them.
fn extents(shape: [usize; 3]) -> Result<[i32; 3]> {
    let mut n = [0i32; 3];
    for d in 0..3 {
        n[d] = i32::try_from(shape[d])
            .ok()
            .filter(|&x| x > 0)
            .ok_or_else(|| {
                anyhow!(
                    "grid axis {d} has {} points; cuFFT takes 1..={} per axis",
                    shape[d],
                    i32::MAX
                )
            })?;
    }
    Ok(n)
}

/// Device bytes the step needs for `shape`: `psi` and `psi^3`, the two
/// half spectra, the two factor arrays, the flag, and cuFFT's estimate of
/// the work areas of its two plans (`cufftEstimate3d`).
fn bytes_needed(shape: [usize; 3]) -> Result<u128> {
    let n = extents(shape)?;
    gpu::cuda::check_cufft().map_err(gpu_err)?;
    let estimate = |t: cufftType, name: &str| -> Result<u128> {
        estimate_3d(n[0], n[1], n[2], t)
            .map(|b| b as u128)
            .map_err(|e| anyhow!("cufftEstimate3d({name}) of {shape:?} failed: {:?}", e.0))
    };
    let real: u128 = shape.iter().map(|&x| x as u128).product();
    let modes = shape[0] as u128 * shape[1] as u128 * (shape[2] / 2 + 1) as u128;
    Ok(2 * real * 8
        + 2 * modes * 16
        + 2 * modes * 8
        + 8
        + estimate(cufftType::CUFFT_D2Z, "D2Z")?
        + estimate(cufftType::CUFFT_Z2D, "Z2D")?)
}

/// Opens this rank's device ([`gpu::place`]) and checks, before anything
/// is allocated on the host or the device, that the device memory the step
/// needs (for every rank sharing the device) is free. Returns the device
/// for [`DeviceSolver::new`].
pub(crate) fn preflight(comm: &dyn Communicator, cfg: &Config) -> Result<Arc<Device>> {
    let at = gpu::place::place(comm, cfg.device)?;
    let dev = at.open().map_err(gpu_err)?;
    let shape = cfg.shape();
    let ranks = comm.size();
    let per_rank = if ranks == 1 {
        bytes_needed(shape)?
    } else {
        // This rank's share: psi and psi^3, two spectra and two factor
        // arrays, and the distributed transform's two work buffers and
        // message buffers (about four spectra).
        extents(shape)?;
        let real: u128 = shape.iter().map(|&x| x as u128).product();
        let modes = shape[0] as u128 * shape[1] as u128 * (shape[2] / 2 + 1) as u128;
        let share = |x: u128| x.div_ceil(ranks as u128);
        2 * share(real) * 8 + 2 * share(modes) * 16 + 2 * share(modes) * 8 + 4 * share(modes) * 16
    };
    gpu::place::check_memory(comm, &dev, at, per_rank, || {
        format!(
            "the {shape:?} grid (psi, psi^3, two half spectra, two factor arrays and the transforms' work areas)"
        )
    })
    .context("use fewer points (periods, points_per_period), more GPUs, or the cpu backend")?;
    Ok(Arc::new(dev))
}

impl DeviceSolver {
    /// Plans the transforms of `input` (the host plan's input layout) on
    /// `dev` (collective), uploads the per-mode factors and this rank's
    /// block of `psi`.
    pub(crate) fn new(
        dev: Arc<Device>,
        comm: &dyn Communicator,
        cfg: &Config,
        input: &dfft::Layout,
        psi: &[f64],
    ) -> Result<Self> {
        let shape = cfg.shape();
        let opts = dfft::Options {
            output: dfft::Output::Transposed,
            ..dfft::Options::default()
        };
        let route = match cfg.gpu_exchange {
            GpuExchange::Auto => Route::Auto,
            GpuExchange::Staged => Route::Staged,
            GpuExchange::Nccl => Route::Nccl,
        };
        let plan = DeviceFft3d::with_route(comm, &dev, input, opts, route)?;
        if psi.len() != plan.input_len() {
            bail!(
                "the host field holds {} values; this rank's block of the {shape:?} grid has {}",
                psi.len(),
                plan.input_len()
            );
        }
        let src = crate::kernels::source;
        let f = |name: &str| {
            dev.function(crate::kernels::MODULE, src, name)
                .map_err(gpu_err)
        };
        let [cube, update] = crate::kernels::ENTRIES;
        let k = Kernels {
            cube: f(cube)?,
            update: f(update)?,
        };
        let n = shape.iter().product::<usize>() as f64;
        let factors = crate::mode_factors(cfg);
        let (mut dtk2, mut inv) = (vec![0.0; plan.output_len()], vec![0.0; plan.output_len()]);
        plan.output_layout().for_each_local(comm.rank(), |q, o| {
            let m = factors(q);
            dtk2[o] = m.dtk2;
            // cuFFT leaves both transforms unnormalised.
            inv[o] = m.inv / n;
        });
        let alloc = |len: usize, what: &str| -> Result<CudaSlice<f64>> {
            dev.alloc_zeros(len, what).map_err(gpu_err)
        };
        let spectrum = |what: &str| -> Result<CudaSlice<DeviceComplex>> {
            dev.alloc_zeros(plan.output_len(), what).map_err(gpu_err)
        };
        let mut s = DeviceSolver {
            psi: alloc(plan.input_len(), "field psi")?,
            work: alloc(plan.input_len(), "psi^3")?,
            spec: spectrum("spectrum of psi")?,
            spec_n: spectrum("spectrum of psi^3")?,
            dtk2: dev.upload(&dtk2, "factors dt k^2").map_err(gpu_err)?,
            inv: dev.upload(&inv, "implicit factors").map_err(gpu_err)?,
            bad: dev.upload(&[NONE_BAD], "flag").map_err(gpu_err)?,
            k,
            plan,
            dev,
            mirror: Mirror::HostNewer,
            timer: StepTimer::default(),
        };
        s.sync_device(psi)?;
        Ok(s)
    }

    /// The device, for the report.
    pub(crate) fn device(&self) -> &Device {
        &self.dev
    }

    /// How each reshape of the forward transform travels (`DeviceDirect`,
    /// `DeviceStaged` or `DeviceNccl`).
    pub(crate) fn reshape_protocols(&self) -> Vec<String> {
        self.plan.protocols()
    }

    /// Notes that the host field was written.
    pub(crate) fn host_written(&mut self) {
        self.mirror = Mirror::HostNewer;
    }

    /// Uploads the host field when it was written since the last upload.
    pub(crate) fn sync_device(&mut self, psi: &[f64]) -> Result<()> {
        if self.mirror == Mirror::HostNewer {
            if psi.len() != self.psi.len() {
                bail!(
                    "the host field holds {} values; the device field {}",
                    psi.len(),
                    self.psi.len()
                );
            }
            self.dev
                .copy_to_device(psi, &mut self.psi)
                .map_err(gpu_err)?;
            self.mirror = Mirror::Same;
        }
        Ok(())
    }

    /// Downloads the field into the host's `psi` when the device stepped
    /// since; then returns the first step whose field was non-finite, if
    /// any.
    pub(crate) fn sync_host(&mut self, psi: &mut [f64]) -> Result<Option<u64>> {
        if self.mirror == Mirror::DeviceNewer {
            if psi.len() != self.psi.len() {
                bail!(
                    "the host field holds {} values; the device field {}",
                    psi.len(),
                    self.psi.len()
                );
            }
            self.dev.copy_to_host(&self.psi, psi).map_err(gpu_err)?;
            self.mirror = Mirror::Same;
        }
        let b = self.dev.download(&self.bad).map_err(gpu_err)?[0];
        Ok((b != NONE_BAD).then_some(b))
    }

    /// Device seconds of each step so far.
    pub(crate) fn step_seconds(&mut self) -> Result<Vec<f64>> {
        Ok(self.timer.seconds().map_err(gpu_err)?.to_vec())
    }

    /// Step number `step` (counted like the host's, from the start of the
    /// first run) from the field on the device, queued on `main` and timed
    /// with device events. The host field must have been handed to
    /// [`Self::sync_device`] first.
    pub(crate) fn step(
        &mut self,
        comm: &dyn Communicator,
        nonlinear: bool,
        step: u64,
    ) -> Result<()> {
        if self.mirror == Mirror::HostNewer {
            bail!("the host field was written and not uploaded before a device step");
        }
        self.timer.begin(&self.dev).map_err(gpu_err)?;
        self.plan
            .forward(comm, &self.psi.slice(..), &mut self.spec)?;
        let main = self.dev.main();
        if nonlinear {
            let len = self.psi.len();
            let n = len as i64;
            let mut l = main.launch_builder(&self.k.cube);
            l.arg(&self.psi).arg(&mut self.work).arg(&n);
            // SAFETY: the arguments match `cube`'s parameters (two double
            // pointers, a long); `psi` and `work` are distinct allocations
            // of `n` values each, and the kernel touches indices below `n`.
            unsafe { l.launch(launch_1d(len.min(1 << 22), 256)) }
                .map_err(|e| anyhow!("launching cube: {e:?}"))?;
            self.plan
                .forward(comm, &self.work.slice(..), &mut self.spec_n)?;
        }
        let m = self.spec.len();
        let modes = m as i64;
        let nl = i32::from(nonlinear);
        let mut l = main.launch_builder(&self.k.update);
        l.arg(&mut self.spec)
            .arg(&self.spec_n)
            .arg(&self.dtk2)
            .arg(&self.inv)
            .arg(&modes)
            .arg(&nl)
            .arg(&step)
            .arg(&mut self.bad);
        // SAFETY: the arguments match `update`'s parameters in order and
        // type (double2 and double pointers, long, int, unsigned long long,
        // unsigned long long pointer); `spec`, `spec_n`, `dtk2` and `inv`
        // each hold `modes` values (allocated from the plan's spectrum
        // length) and the kernel touches indices below `modes`; `bad` holds
        // one value; `spec` is the only buffer written besides `bad`.
        unsafe { l.launch(launch_1d(m.min(1 << 22), 256)) }
            .map_err(|e| anyhow!("launching update: {e:?}"))?;
        self.plan
            .backward(comm, &mut self.spec, &mut self.psi.slice_mut(..))?;
        self.timer.end(&self.dev).map_err(gpu_err)?;
        self.mirror = Mirror::DeviceNewer;
        Ok(())
    }
}
