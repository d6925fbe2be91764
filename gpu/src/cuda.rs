//! NVIDIA devices through `cudarc` (driver API, NVRTC), opened at run time.
//!
//! A [`Device`] is one rank's handle on one GPU: the device's primary
//! context (shared by every rank of the process on that GPU), two streams
//! of its own (`main` for the work that must follow the exchange, `side`
//! for work that overlaps it) and a cache of compiled kernel modules.
//! Several ranks may open the same ordinal; each gets its own streams.
//!
//! **Stream ordering is explicit.** `cudarc` can track, per buffer, the
//! events of the streams that used it and make every later use wait; that
//! would serialise an interior stencil on `side` with the halo unpack on
//! `main` even though they touch disjoint cells. [`Device::open`] turns
//! the tracking off, and the code in this workspace orders its streams
//! itself: [`Device::side_after_main`] before work on `side` that reads
//! what `main` wrote, [`Device::join_side`] before `main` touches what
//! `side` wrote. Copies between the host and a device buffer are complete
//! when the call returns.
//!
//! Buffers are allocated on `main`, and `cudarc` frees a buffer on the
//! stream that allocated it, without waiting for other streams (the
//! tracking is off). So work queued on `side` must be joined into `main`
//! before any buffer it uses is dropped: that is the contract of the
//! unsafe [`Device::side`], and why the context (from which other streams
//! could be made) is not handed out.

use crate::GpuError;
use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr,
    DeviceRepr, DriverError, LaunchConfig, ValidAsZeroBits,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use cudarc;

/// What a device is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The ordinal the device was opened with.
    pub ordinal: usize,
    /// The driver's name for it.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Device memory in bytes.
    pub total_memory: usize,
    /// Streaming multiprocessors.
    pub multiprocessors: usize,
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CUDA device {}: {} (compute {}.{}, {} SMs, {:.1} GiB)",
            self.ordinal,
            self.name,
            self.compute_capability.0,
            self.compute_capability.1,
            self.multiprocessors,
            self.total_memory as f64 / (1u64 << 30) as f64
        )
    }
}

fn driver(call: &str) -> impl FnOnce(DriverError) -> GpuError + '_ {
    move |e| GpuError::Driver {
        call: call.to_string(),
        detail: format!("{e:?}"),
    }
}

/// Checks that the driver library can be opened; the first call into a
/// library `cudarc` cannot open would abort the process.
fn check_driver() -> Result<(), GpuError> {
    // SAFETY: only tries to open the library by its usual names.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(GpuError::Library {
            what: "CUDA driver (libcuda)",
            detail: "no libcuda.so found".into(),
        })
    }
}

/// Checks that the NVRTC library can be opened.
fn check_nvrtc() -> Result<(), GpuError> {
    // SAFETY: as in `check_driver`.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(GpuError::Library {
            what: "NVRTC (libnvrtc)",
            detail: "no libnvrtc.so found; it ships with the CUDA toolkit".into(),
        })
    }
}

/// Checks that the cuFFT library can be opened.
pub fn check_cufft() -> Result<(), GpuError> {
    // SAFETY: as in `check_driver`.
    if unsafe { cudarc::cufft::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(GpuError::Library {
            what: "cuFFT (libcufft)",
            detail: "no libcufft.so found; it ships with the CUDA toolkit".into(),
        })
    }
}

/// The number of CUDA devices; [`GpuError::Library`] when there is no
/// driver.
pub fn device_count() -> Result<usize, GpuError> {
    check_driver()?;
    match CudaContext::device_count() {
        Ok(n) => Ok(n.max(0) as usize),
        // A driver without devices (or without permission to them).
        Err(DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE)) => Ok(0),
        Err(e) => Err(driver("cuDeviceGetCount")(e)),
    }
}

/// One rank's handle on one GPU; see the module documentation.
pub struct Device {
    ctx: Arc<CudaContext>,
    info: DeviceInfo,
    main: Arc<CudaStream>,
    side: Arc<CudaStream>,
    modules: Mutex<HashMap<String, Arc<CudaModule>>>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("info", &self.info).finish()
    }
}

impl Device {
    /// Opens device `ordinal`. Errors: no driver ([`GpuError::Library`]),
    /// an ordinal past the device count ([`GpuError::NoDevice`]).
    pub fn open(ordinal: usize) -> Result<Device, GpuError> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(GpuError::NoDevice {
                asked: ordinal,
                count,
            });
        }
        let ctx = CudaContext::new(ordinal).map_err(driver("cuDevicePrimaryCtxRetain"))?;
        // SAFETY: buffers are allocated on `main` and freed there; the only
        // other streams are `side`, whose users join it into `main` before
        // dropping a buffer it used (the contract of the unsafe
        // `Device::side`), and the NCCL links' own stream, which their drop
        // synchronises before their buffers go (`nccl`); the context is not
        // handed out of the crate.
        unsafe { ctx.disable_event_tracking() };
        let attr = |a| ctx.attribute(a).map_err(driver("cuDeviceGetAttribute"));
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().map_err(driver("cuDeviceGetName"))?,
            compute_capability: ctx
                .compute_capability()
                .map_err(driver("cuDeviceComputeCapability"))?,
            total_memory: ctx.total_mem().map_err(driver("cuDeviceTotalMem"))?,
            multiprocessors: attr(
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )? as usize,
        };
        let main = ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        let side = ctx.new_stream().map_err(driver("cuStreamCreate"))?;
        Ok(Device {
            ctx,
            info,
            main,
            side,
            modules: Mutex::new(HashMap::new()),
        })
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The context (inside the crate only: a stream made from it would
    /// escape the ordering the buffers' frees rely on).
    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream for work that follows the exchange (and everything that
    /// does not overlap it).
    pub fn main(&self) -> &Arc<CudaStream> {
        &self.main
    }

    /// The stream for work that overlaps the exchange.
    ///
    /// # Safety
    ///
    /// Every buffer that work queued through the returned stream reads or
    /// writes must stay alive until that work is ordered before the
    /// buffer's free: make `main` wait for `side` ([`Device::join_side`])
    /// before the buffer is dropped, on every path (errors included).
    /// Buffers are freed on `main` without waiting for `side`, so a buffer
    /// dropped earlier may be handed to a new allocation while `side`
    /// still writes it.
    pub unsafe fn side(&self) -> &Arc<CudaStream> {
        &self.side
    }

    /// `(free, total)` device memory in bytes.
    pub fn memory(&self) -> Result<(usize, usize), GpuError> {
        self.ctx.mem_get_info().map_err(driver("cuMemGetInfo"))
    }

    /// A zeroed buffer of `n` values; `what` names it in an
    /// [`GpuError::OutOfMemory`] error.
    pub fn alloc_zeros<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        n: usize,
        what: &str,
    ) -> Result<CudaSlice<T>, GpuError> {
        let bytes = n
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| GpuError::Invalid(format!("{what}: {n} values overflow usize bytes")))?;
        let (free, total) = self.memory()?;
        let oom = |free| GpuError::OutOfMemory {
            what: what.to_string(),
            device: self.info.ordinal,
            bytes,
            free,
            total,
        };
        if bytes > free {
            return Err(oom(free));
        }
        match self.main.alloc_zeros(n.max(1)) {
            Ok(b) => Ok(b),
            Err(DriverError(sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY)) => Err(oom(free)),
            Err(e) => Err(driver("cuMemAlloc")(e)),
        }
    }

    /// A buffer holding a copy of `host`.
    pub fn upload<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        host: &[T],
        what: &str,
    ) -> Result<CudaSlice<T>, GpuError> {
        let mut b = self.alloc_zeros(host.len(), what)?;
        self.copy_to_device(host, &mut b)?;
        Ok(b)
    }

    /// Copies `host` into the start of `dst` (after the work queued on
    /// `main`); complete on return.
    pub fn copy_to_device<T: DeviceRepr>(
        &self,
        host: &[T],
        dst: &mut CudaSlice<T>,
    ) -> Result<(), GpuError> {
        if host.len() > dst.len() {
            return Err(GpuError::Invalid(format!(
                "copy of {} values into a device buffer of {}",
                host.len(),
                dst.len()
            )));
        }
        let mut view = dst.slice_mut(..host.len());
        self.main
            .memcpy_htod(host, &mut view)
            .map_err(driver("cuMemcpyHtoDAsync"))?;
        self.main
            .synchronize()
            .map_err(driver("cuStreamSynchronize"))
    }

    /// Copies every value of `src` (a buffer or a view of one) to `host`,
    /// which must have the same length (after the work queued on `main`);
    /// complete on return.
    pub fn copy_to_host<T: DeviceRepr, S: DevicePtr<T>>(
        &self,
        src: &S,
        host: &mut [T],
    ) -> Result<(), GpuError> {
        if host.len() != src.len() {
            return Err(GpuError::Invalid(format!(
                "copy of {} device values into a host buffer of {} (the lengths must be equal)",
                src.len(),
                host.len()
            )));
        }
        self.main
            .memcpy_dtoh(src, host)
            .map_err(driver("cuMemcpyDtoHAsync"))?;
        self.main
            .synchronize()
            .map_err(driver("cuStreamSynchronize"))
    }

    /// The whole of `src` as a vector.
    pub fn download<T: DeviceRepr + ValidAsZeroBits + Clone>(
        &self,
        src: &CudaSlice<T>,
    ) -> Result<Vec<T>, GpuError> {
        // SAFETY: `ValidAsZeroBits` promises that all-zero bits are a value.
        let zero: T = unsafe { std::mem::zeroed() };
        let mut v = vec![zero; src.len()];
        self.copy_to_host(src, &mut v)?;
        Ok(v)
    }

    /// Kernel `entry` of module `module`, compiling `source()` with NVRTC
    /// the first time the module is asked for (per process and device: the
    /// cache is keyed by module name, so one name must always mean one
    /// source). Compiled for this device's architecture with
    /// `--fmad=false` (see the crate documentation).
    pub fn function(
        &self,
        module: &str,
        source: impl FnOnce() -> String,
        entry: &str,
    ) -> Result<CudaFunction, GpuError> {
        let m = {
            let mut cache = self.modules.lock().unwrap_or_else(|e| e.into_inner());
            match cache.get(module) {
                Some(m) => m.clone(),
                None => {
                    let m = self.compile(module, &source())?;
                    cache.insert(module.to_string(), m.clone());
                    m
                }
            }
        };
        m.load_function(entry).map_err(|e| GpuError::Driver {
            call: format!("cuModuleGetFunction({module}::{entry})"),
            detail: format!("{e:?}"),
        })
    }

    fn compile(&self, module: &str, source: &str) -> Result<Arc<CudaModule>, GpuError> {
        check_nvrtc()?;
        let (major, minor) = self.info.compute_capability;
        let opts = CompileOptions {
            fmad: Some(false),
            options: vec![format!("--gpu-architecture=compute_{major}{minor}")],
            name: Some(format!("{module}.cu")),
            ..CompileOptions::default()
        };
        let ptx = compile_ptx_with_opts(source, opts).map_err(|e| GpuError::Compile {
            module: module.to_string(),
            log: match e {
                CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
                other => format!("{other:?}"),
            },
        })?;
        self.ctx.load_module(ptx).map_err(|e| GpuError::Driver {
            call: format!("cuModuleLoadData({module})"),
            detail: format!("{e:?}"),
        })
    }

    /// Makes `side` wait for the work queued on `main` so far.
    pub fn side_after_main(&self) -> Result<(), GpuError> {
        self.side
            .join(&self.main)
            .map_err(driver("cuStreamWaitEvent"))
    }

    /// Makes `main` wait for the work queued on `side` so far.
    pub fn join_side(&self) -> Result<(), GpuError> {
        self.main
            .join(&self.side)
            .map_err(driver("cuStreamWaitEvent"))
    }

    /// Waits for all work on both streams.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        self.side
            .synchronize()
            .map_err(driver("cuStreamSynchronize"))?;
        self.main
            .synchronize()
            .map_err(driver("cuStreamSynchronize"))
    }

    /// A timing event recorded on `main` now.
    pub fn mark(&self) -> Result<Mark, GpuError> {
        let e = self
            .main
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver("cuEventRecord"))?;
        Ok(Mark(e))
    }
}

/// A point in a stream's work, for timing on the device.
#[derive(Debug)]
pub struct Mark(CudaEvent);

impl Mark {
    /// Seconds of device time from `self` to `later` (waits for `later`).
    pub fn seconds_until(&self, later: &Mark) -> Result<f64, GpuError> {
        later
            .0
            .synchronize()
            .map_err(driver("cuEventSynchronize"))?;
        let ms = self
            .0
            .elapsed_ms(&later.0)
            .map_err(driver("cuEventElapsedTime"))?;
        Ok(f64::from(ms) * 1e-3)
    }
}

/// Device time of each of a series of steps, holding no more than two
/// steps' events: a step's marks are resolved (waited for) when the next
/// step ends, by which time that step's work is queued, so the device keeps
/// running while the host waits.
#[derive(Debug, Default)]
pub struct StepTimer {
    open: Option<Mark>,
    pending: Option<(Mark, Mark)>,
    seconds: Vec<f64>,
}

impl StepTimer {
    /// Marks the start of a step on `device`'s `main` stream.
    pub fn begin(&mut self, device: &Device) -> Result<(), GpuError> {
        self.open = Some(device.mark()?);
        Ok(())
    }

    /// Marks the end of the step begun last and resolves the one before.
    pub fn end(&mut self, device: &Device) -> Result<(), GpuError> {
        let start = self
            .open
            .take()
            .ok_or_else(|| GpuError::Invalid("StepTimer::end without begin".into()))?;
        let end = device.mark()?;
        if let Some((a, b)) = self.pending.replace((start, end)) {
            self.seconds.push(a.seconds_until(&b)?);
        }
        Ok(())
    }

    /// Device seconds of every ended step (waits for the last).
    pub fn seconds(&mut self) -> Result<&[f64], GpuError> {
        if let Some((a, b)) = self.pending.take() {
            self.seconds.push(a.seconds_until(&b)?);
        }
        Ok(&self.seconds)
    }
}

/// A launch shape of `n` threads in blocks of `block` along x.
pub fn launch_1d(n: usize, block: u32) -> LaunchConfig {
    let blocks = n.div_ceil(block as usize).max(1);
    LaunchConfig {
        grid_dim: (blocks.min(u32::MAX as usize) as u32, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device to test on, or `None` (and a note) where there is none.
    fn device() -> Option<Device> {
        match Device::open(0) {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("skipped: no CUDA device ({e})");
                None
            }
        }
    }

    #[test]
    fn missing_device_is_a_clear_error() {
        match device_count() {
            Ok(n) => {
                let e = Device::open(n + 3).unwrap_err();
                assert_eq!(
                    e,
                    GpuError::NoDevice {
                        asked: n + 3,
                        count: n
                    }
                );
            }
            Err(e) => {
                let s = e.to_string();
                assert!(s.contains("libcuda") && s.contains("driver"), "{s}");
                assert!(matches!(Device::open(0), Err(GpuError::Library { .. })));
            }
        }
    }

    #[test]
    fn allocation_larger_than_the_device_is_refused() {
        let Some(d) = device() else { return };
        let total = d.info().total_memory;
        let e = d
            .alloc_zeros::<f64>(total / 8 * 2, "a field twice the device")
            .unwrap_err();
        assert!(
            matches!(e, GpuError::OutOfMemory { bytes, .. } if bytes >= 2 * (total / 8) * 8),
            "{e}"
        );
    }

    #[test]
    fn compiled_kernel_round_trip() {
        let Some(d) = device() else { return };
        let src = || {
            r#"extern "C" __global__ void axpy(double a, const double* x, double* y, int n) {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) y[i] = a * x[i] + y[i];
            }"#
            .to_string()
        };
        let f = d.function("test_axpy", src, "axpy").unwrap();
        let n = 1000usize;
        let x: Vec<f64> = (0..n).map(|i| (i as f64).sin()).collect();
        let y0: Vec<f64> = (0..n).map(|i| (i as f64).cos()).collect();
        let xd = d.upload(&x, "x").unwrap();
        let mut yd = d.upload(&y0, "y").unwrap();
        let a = 1.0 / 3.0;
        let ni = n as i32;
        use cudarc::driver::PushKernelArg;
        let mut b = d.main().launch_builder(&f);
        b.arg(&a).arg(&xd).arg(&mut yd).arg(&ni);
        // SAFETY: the signature matches the kernel; both buffers hold n values.
        unsafe { b.launch(launch_1d(n, 128)) }.unwrap();
        let y = d.download(&yd).unwrap();
        for i in 0..n {
            // No contraction on either side: the same bits.
            assert_eq!(y[i].to_bits(), (a * x[i] + y0[i]).to_bits(), "at {i}");
        }
        let e = d
            .function("test_bad", || "this is not C".into(), "f")
            .unwrap_err();
        assert!(matches!(e, GpuError::Compile { .. }), "{e}");
    }
}
