//! AMD devices through HIP: the runtime through `hip-sys` (linked at build
//! time against `libamdhip64`), kernels compiled at run time by hiprtc.
//!
//! The same shape as the `cuda` module: a [`Device`] is one rank's handle on
//! one GPU, with two streams of its own (`main` for the work that must
//! follow the exchange, `side` for work that overlaps it) and a cache of
//! compiled kernel modules; several ranks may open the same ordinal.
//! [`DeviceBuffer`] owns one `hipMalloc` allocation. Copies between the host
//! and a device buffer run on `main` and are complete when the call
//! returns; ordering between the two streams is explicit
//! ([`Device::side_after_main`], [`Device::join_side`]).
//!
//! **Current device.** The HIP runtime keeps a current device per host
//! thread, and allocations, streams, events and modules belong to the
//! device current when they are made. Every method here makes its device
//! current first (`hipSetDevice`), so a [`Device`] may be used from any
//! thread and a process may hold devices of several ordinals.
//!
//! **Kernels** are CUDA C sources (the same ones the CUDA backend compiles
//! with NVRTC) compiled by hiprtc for the device's architecture
//! (`--offload-arch=<gcnArchName>`) with `-ffp-contract=off`. HIP's clang
//! contracts `a * b + c` into a fused multiply-add by default (for
//! `y[i] = a * x[i] + y[i]` on gfx90a it emits `v_fmac_f64`; with the flag,
//! `v_mul_f64` then `v_add_f64`). The host code never contracts, so without
//! the flag a kernel would round differently from the host loop it mirrors;
//! this is NVRTC's `--fmad=false` (see the crate documentation).
//! [`compile_for`] runs the same compilation for a named architecture
//! without a device, which is how the crates that own kernels check, in CI,
//! that their sources build for AMD GPUs.
//!
//! hiprtc has no bindings in `hip-sys`; the few functions used are declared
//! here. ROCm 5.x (Debian 12 ships 5.2) exports them from `libamdhip64`;
//! ROCm 6 moved them to `libhiprtc`, which this module does not link.

use crate::GpuError;
use hip_sys::hiprt as sys;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

pub use hip_sys;

/// A grid or block shape (x, y, z).
pub type Dim3 = (u32, u32, u32);

/// What a device is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The ordinal the device was opened with.
    pub ordinal: usize,
    /// The runtime's name for it.
    pub name: String,
    /// The architecture hiprtc compiles for (`gcnArchName`, e.g.
    /// `gfx90a:sramecc+:xnack-`); empty when the runtime did not report a
    /// usable one (hiprtc then targets the current device itself).
    pub arch: String,
    /// The GCN architecture as (major, minor), which HIP reports as the
    /// compute capability; (0, 0) when unavailable.
    pub compute_capability: (i32, i32),
    /// Device memory in bytes.
    pub total_memory: usize,
    /// Compute units.
    pub multiprocessors: usize,
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HIP device {}: {} ({}, gcn {}.{}, {} CUs, {:.1} GiB)",
            self.ordinal,
            self.name,
            if self.arch.is_empty() {
                "arch unknown"
            } else {
                &self.arch
            },
            self.compute_capability.0,
            self.compute_capability.1,
            self.multiprocessors,
            self.total_memory as f64 / (1u64 << 30) as f64
        )
    }
}

/// The runtime's text for an error code.
fn error_text(e: sys::hipError_t) -> String {
    // SAFETY: hipGetErrorString takes any code and returns null or a
    // pointer to a static NUL-terminated string.
    let p = unsafe { sys::hipGetErrorString(e) };
    let name = format!("{e:?}");
    if p.is_null() {
        return name;
    }
    // SAFETY: non-null, static and NUL-terminated (above).
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    if s == name {
        s
    } else {
        format!("{name}: {s}")
    }
}

/// [`GpuError::Driver`] for `call` failing with `e`.
fn driver(call: &str, e: sys::hipError_t) -> GpuError {
    GpuError::Driver {
        call: call.to_string(),
        detail: error_text(e),
    }
}

/// `Ok` for `hipSuccess`, otherwise [`GpuError::Driver`] naming `call`.
///
/// `hip-sys` declares `hipError_t` as a Rust enum, so a code outside it
/// would be undefined behaviour; every code of ROCm 5.2's
/// `hip_runtime_api.h` is one of its variants.
fn check(call: &str, e: sys::hipError_t) -> Result<(), GpuError> {
    if e == sys::hipError_t::hipSuccess {
        Ok(())
    } else {
        Err(driver(call, e))
    }
}

/// Makes device `ordinal` current on the calling thread.
fn set_device(ordinal: usize) -> Result<(), GpuError> {
    let o = c_int::try_from(ordinal)
        .map_err(|_| GpuError::Invalid(format!("device ordinal {ordinal} out of range")))?;
    // SAFETY: takes a plain integer; an invalid ordinal is an error code.
    check("hipSetDevice", unsafe { sys::hipSetDevice(o) })
}

/// The number of HIP devices. A runtime that finds no device or no
/// usable driver (`hipErrorNoDevice`, `hipErrorInsufficientDriver`: a
/// machine without an AMD GPU or without the amdgpu kernel driver) counts
/// as zero devices; other failures are [`GpuError::Driver`].
pub fn device_count() -> Result<usize, GpuError> {
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid place for the count.
    let e = unsafe { sys::hipGetDeviceCount(&mut n) };
    match e {
        sys::hipError_t::hipSuccess => Ok(n.max(0) as usize),
        sys::hipError_t::hipErrorNoDevice | sys::hipError_t::hipErrorInsufficientDriver => Ok(0),
        e => Err(driver("hipGetDeviceCount", e)),
    }
}

/// One of a [`Device`]'s streams.
#[derive(Debug)]
pub struct Stream {
    raw: sys::hipStream_t,
    ordinal: usize,
}

impl Stream {
    fn new(ordinal: usize) -> Result<Stream, GpuError> {
        set_device(ordinal)?;
        let mut raw: sys::hipStream_t = std::ptr::null_mut();
        // SAFETY: `raw` is a valid place for the handle; the flag is one
        // of the runtime's (no implicit synchronisation with stream 0, as
        // the CUDA backend's streams).
        check("hipStreamCreateWithFlags", unsafe {
            sys::hipStreamCreateWithFlags(&mut raw, sys::hipStreamNonBlocking)
        })?;
        Ok(Stream { raw, ordinal })
    }

    /// The runtime's handle, for calls this module does not wrap. It stays
    /// valid while the [`Device`] lives.
    pub fn raw(&self) -> sys::hipStream_t {
        self.raw
    }

    /// Waits for all work queued on the stream.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        // SAFETY: `raw` is a live stream (destroyed only in Drop).
        check("hipStreamSynchronize", unsafe {
            sys::hipStreamSynchronize(self.raw)
        })
    }

    /// Makes the stream wait for the work queued on `other` so far.
    fn wait_for(&self, other: &Stream) -> Result<(), GpuError> {
        let e = Event::new(self.ordinal, sys::hipEventDisableTiming)?;
        // SAFETY: the event and both streams are live and of one device.
        check("hipEventRecord", unsafe {
            sys::hipEventRecord(e.0, other.raw)
        })?;
        // SAFETY: as above; flags must be 0. The event may be destroyed
        // after the wait is queued (the runtime keeps what it needs).
        check("hipStreamWaitEvent", unsafe {
            sys::hipStreamWaitEvent(self.raw, e.0, 0)
        })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // Errors here cannot be reported; the handle is released anyway.
        let _ = set_device(self.ordinal);
        // SAFETY: `raw` was created by hipStreamCreateWithFlags and is
        // destroyed once, here.
        let _ = unsafe { sys::hipStreamDestroy(self.raw) };
    }
}

// SAFETY: a stream handle may be used from any thread (the runtime
// serialises what it queues); it is destroyed once, in Drop.
unsafe impl Send for Stream {}
// SAFETY: as above; `&Stream` only queues work and waits.
unsafe impl Sync for Stream {}

/// An event handle, destroyed on drop.
#[derive(Debug)]
struct Event(sys::hipEvent_t);

impl Event {
    fn new(ordinal: usize, flags: u32) -> Result<Event, GpuError> {
        set_device(ordinal)?;
        let mut raw: sys::hipEvent_t = std::ptr::null_mut();
        // SAFETY: `raw` is a valid place for the handle; `flags` is one of
        // the runtime's event flags.
        check("hipEventCreateWithFlags", unsafe {
            sys::hipEventCreateWithFlags(&mut raw, flags)
        })?;
        Ok(Event(raw))
    }
}

// SAFETY: an event handle may be used from any thread; it is destroyed
// once, in Drop.
unsafe impl Send for Event {}
// SAFETY: as above; `&Event` only waits on and reads the event.
unsafe impl Sync for Event {}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: the handle was created by hipEventCreateWithFlags and is
        // destroyed once, here.
        let _ = unsafe { sys::hipEventDestroy(self.0) };
    }
}

/// Values a [`DeviceBuffer`] can hold: plain numbers and arrays of them.
///
/// # Safety
///
/// Every bit pattern of `size_of::<Self>()` bytes must be a valid value
/// (no padding, no invalid values, no pointers or references): a buffer's
/// bytes come from `hipMemset`, from the host or from a kernel, and
/// [`Device::download`] turns them into values.
pub unsafe trait DeviceValue: Copy + Send + Sync + 'static {}

macro_rules! device_values {
    ($($t:ty)*) => {
        $(
            // SAFETY: a primitive number: every bit pattern is a value.
            unsafe impl DeviceValue for $t {}
        )*
    };
}
device_values!(u8 u16 u32 u64 usize i8 i16 i32 i64 isize f32 f64);

// SAFETY: an array of values without padding has no padding and every bit
// pattern of it is a value.
unsafe impl<T: DeviceValue, const N: usize> DeviceValue for [T; N] {}

/// `len` values of `T` in device memory (one `hipMalloc` allocation,
/// freed on drop).
pub struct DeviceBuffer<T: DeviceValue> {
    ptr: sys::hipDeviceptr_t,
    len: usize,
    ordinal: usize,
    _values: PhantomData<T>,
}

// SAFETY: the buffer owns its allocation, and the runtime's memory calls
// may be made from any thread; `&DeviceBuffer` only allows reads.
unsafe impl<T: DeviceValue> Send for DeviceBuffer<T> {}
// SAFETY: as above.
unsafe impl<T: DeviceValue> Sync for DeviceBuffer<T> {}

impl<T: DeviceValue> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("type", &std::any::type_name::<T>())
            .field("len", &self.len)
            .field("device", &self.ordinal)
            .finish()
    }
}

impl<T: DeviceValue> DeviceBuffer<T> {
    /// The number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ordinal of the device the buffer lives on.
    pub fn device(&self) -> usize {
        self.ordinal
    }

    /// The device address, for a kernel argument: the launch's argument
    /// array holds a pointer to a variable holding this address.
    pub fn device_ptr(&self) -> sys::hipDeviceptr_t {
        self.ptr
    }

    /// The device address, for an argument the kernel writes through.
    pub fn device_ptr_mut(&mut self) -> sys::hipDeviceptr_t {
        self.ptr
    }

    fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
}

impl<T: DeviceValue> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        let _ = set_device(self.ordinal);
        // SAFETY: `ptr` came from hipMalloc and is freed once, here. Kernels
        // still using it are the launcher's to wait for (see
        // `Device::launch`); copies are complete when their call returns.
        let _ = unsafe { sys::hipFree(self.ptr) };
    }
}

/// A loaded code object, unloaded when the last [`Function`] from it and
/// the device's cache are gone.
#[derive(Debug)]
struct Module {
    raw: sys::hipModule_t,
    ordinal: usize,
}

impl Drop for Module {
    fn drop(&mut self) {
        let _ = set_device(self.ordinal);
        // SAFETY: `raw` came from hipModuleLoadData and is unloaded once,
        // here; the functions taken from it hold the module alive.
        let _ = unsafe { sys::hipModuleUnload(self.raw) };
    }
}

// SAFETY: a loaded module is immutable and the runtime's module calls may
// be made from any thread.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}

/// A kernel of a compiled module, for [`Device::launch`].
pub struct Function {
    raw: sys::hipFunction_t,
    name: String,
    module: Arc<Module>,
}

// SAFETY: a function handle is immutable and valid while its module is
// loaded, which the `Arc` guarantees.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .field("device", &self.module.ordinal)
            .finish()
    }
}

/// One rank's handle on one GPU; see the module documentation.
pub struct Device {
    info: DeviceInfo,
    main: Stream,
    side: Stream,
    modules: Mutex<HashMap<String, Arc<Module>>>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("info", &self.info).finish()
    }
}

/// `hipDeviceProp_t` followed by room to spare: the runtime writes the
/// structure of the version it was built as, so a runtime whose structure
/// outgrew the bindings' still writes inside this buffer.
#[repr(C)]
struct Props {
    props: sys::hipDeviceProp_t,
    _slack: [u8; 4096],
}

/// The device's `gcnArchName`, or an empty string when the runtime does not
/// give one that looks like an AMD GPU target (`gfx...`).
fn arch_name(ordinal: c_int) -> String {
    let mut p = Box::new(Props {
        props: sys::hipDeviceProp_t::default(),
        _slack: [0; 4096],
    });
    // SAFETY: `p.props` is a valid, writable hipDeviceProp_t with 4 KiB of
    // writable memory after it (see `Props`).
    let e = unsafe { sys::hipGetDeviceProperties(&mut p.props, ordinal) };
    if e != sys::hipError_t::hipSuccess {
        return String::new();
    }
    let raw = &p.props.gcnArchName;
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    match String::from_utf8(bytes) {
        Ok(s) if s.starts_with("gfx") && s.len() < raw.len() => s,
        _ => String::new(),
    }
}

impl Device {
    /// Opens device `ordinal`. An ordinal past the device count is
    /// [`GpuError::NoDevice`] (with a count of 0 on a machine without an
    /// AMD GPU).
    pub fn open(ordinal: usize) -> Result<Device, GpuError> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(GpuError::NoDevice {
                asked: ordinal,
                count,
            });
        }
        set_device(ordinal)?;
        let ord = ordinal as c_int; // below the count, which is a c_int
        let mut dev: sys::hipDevice_t = 0;
        // SAFETY: `dev` is a valid place for the handle.
        check("hipDeviceGet", unsafe { sys::hipDeviceGet(&mut dev, ord) })?;

        let mut name = [0 as c_char; 256];
        // SAFETY: `name` has room for `len` bytes.
        check("hipDeviceGetName", unsafe {
            sys::hipDeviceGetName(name.as_mut_ptr(), name.len() as c_int, dev)
        })?;
        name[name.len() - 1] = 0;
        // SAFETY: NUL-terminated within the array (the last byte at least).
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();

        let attr = |a: sys::hipDeviceAttribute_t| -> Result<c_int, GpuError> {
            let mut v: c_int = 0;
            // SAFETY: `v` is a valid place for the value; `a` is one of the
            // runtime's attributes.
            check("hipDeviceGetAttribute", unsafe {
                sys::hipDeviceGetAttribute(&mut v, a, ord)
            })?;
            Ok(v)
        };
        let compute_capability = match (
            attr(sys::hipDeviceAttribute_t::hipDeviceAttributeComputeCapabilityMajor),
            attr(sys::hipDeviceAttribute_t::hipDeviceAttributeComputeCapabilityMinor),
        ) {
            (Ok(major), Ok(minor)) => (major, minor),
            _ => (0, 0),
        };
        let multiprocessors =
            attr(sys::hipDeviceAttribute_t::hipDeviceAttributeMultiprocessorCount)?.max(0) as usize;
        let mut total_memory = 0usize;
        // SAFETY: `total_memory` is a valid place for the size.
        check("hipDeviceTotalMem", unsafe {
            sys::hipDeviceTotalMem(&mut total_memory, dev)
        })?;
        let info = DeviceInfo {
            ordinal,
            name,
            arch: arch_name(ord),
            compute_capability,
            total_memory,
            multiprocessors,
        };
        Ok(Device {
            info,
            main: Stream::new(ordinal)?,
            side: Stream::new(ordinal)?,
            modules: Mutex::new(HashMap::new()),
        })
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The stream for work that follows the exchange (and everything that
    /// does not overlap it).
    pub fn main(&self) -> &Stream {
        &self.main
    }

    /// The stream for work that overlaps the exchange.
    pub fn side(&self) -> &Stream {
        &self.side
    }

    fn current(&self) -> Result<(), GpuError> {
        set_device(self.info.ordinal)
    }

    /// `(free, total)` device memory in bytes.
    pub fn memory(&self) -> Result<(usize, usize), GpuError> {
        self.current()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both are valid places for the sizes.
        check("hipMemGetInfo", unsafe {
            sys::hipMemGetInfo(&mut free, &mut total)
        })?;
        Ok((free, total))
    }

    /// An allocation for `n` values whose contents are left as they are.
    fn alloc<T: DeviceValue>(&self, n: usize, what: &str) -> Result<DeviceBuffer<T>, GpuError> {
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
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid place for the address; at least one byte
        // is asked for, so a success gives a real allocation. The device is
        // current (`memory` above).
        match unsafe { sys::hipMalloc(&mut ptr, bytes.max(1)) } {
            sys::hipError_t::hipSuccess => Ok(DeviceBuffer {
                ptr,
                len: n,
                ordinal: self.info.ordinal,
                _values: PhantomData,
            }),
            sys::hipError_t::hipErrorOutOfMemory => Err(oom(free)),
            e => Err(driver("hipMalloc", e)),
        }
    }

    /// A zeroed buffer of `n` values; `what` names it in an
    /// [`GpuError::OutOfMemory`] error (checked against the free memory
    /// first). Zeroed on `main`; complete on return.
    pub fn alloc_zeros<T: DeviceValue>(
        &self,
        n: usize,
        what: &str,
    ) -> Result<DeviceBuffer<T>, GpuError> {
        let b = self.alloc::<T>(n, what)?;
        // SAFETY: the allocation holds at least `b.bytes()` bytes; `main`
        // is a live stream of this device.
        check("hipMemsetAsync", unsafe {
            sys::hipMemsetAsync(b.ptr, 0, b.bytes(), self.main.raw)
        })?;
        self.main.synchronize()?;
        Ok(b)
    }

    /// A buffer holding a copy of `host`.
    pub fn upload<T: DeviceValue>(
        &self,
        host: &[T],
        what: &str,
    ) -> Result<DeviceBuffer<T>, GpuError> {
        let mut b = self.alloc::<T>(host.len(), what)?;
        // Every byte of `b` is written before anyone can read it; on an
        // error `b` is freed unread.
        self.copy_to_device(host, &mut b)?;
        Ok(b)
    }

    fn same_device<T: DeviceValue>(&self, b: &DeviceBuffer<T>) -> Result<(), GpuError> {
        if b.ordinal == self.info.ordinal {
            Ok(())
        } else {
            Err(GpuError::Invalid(format!(
                "a buffer of device {} used with device {}",
                b.ordinal, self.info.ordinal
            )))
        }
    }

    /// Copies `host` into the start of `dst` (after the work queued on
    /// `main`); complete on return.
    pub fn copy_to_device<T: DeviceValue>(
        &self,
        host: &[T],
        dst: &mut DeviceBuffer<T>,
    ) -> Result<(), GpuError> {
        self.same_device(dst)?;
        if host.len() > dst.len() {
            return Err(GpuError::Invalid(format!(
                "copy of {} values into a device buffer of {}",
                host.len(),
                dst.len()
            )));
        }
        if host.is_empty() {
            return Ok(());
        }
        self.current()?;
        // SAFETY: `host` is readable for these bytes (the runtime only reads
        // through the pointer despite its `*mut` type) and `dst` holds at
        // least as many; the stream is synchronised before `host`'s borrow
        // ends.
        check("hipMemcpyHtoDAsync", unsafe {
            sys::hipMemcpyHtoDAsync(
                dst.ptr,
                host.as_ptr() as *mut c_void,
                std::mem::size_of_val(host),
                self.main.raw,
            )
        })?;
        self.main.synchronize()
    }

    /// Copies the first `host.len()` values of `src` to `host` (after the
    /// work queued on `main`); complete on return.
    pub fn copy_to_host<T: DeviceValue>(
        &self,
        src: &DeviceBuffer<T>,
        host: &mut [T],
    ) -> Result<(), GpuError> {
        self.same_device(src)?;
        if host.len() > src.len() {
            return Err(GpuError::Invalid(format!(
                "copy of {} values out of a device buffer of {}",
                host.len(),
                src.len()
            )));
        }
        if host.is_empty() {
            return Ok(());
        }
        self.current()?;
        // SAFETY: `host` is writable for these bytes and `src` holds at
        // least as many; any bytes are values of T (`DeviceValue`); the
        // stream is synchronised before `host`'s borrow ends.
        check("hipMemcpyDtoHAsync", unsafe {
            sys::hipMemcpyDtoHAsync(
                host.as_mut_ptr() as *mut c_void,
                src.ptr,
                std::mem::size_of_val(host),
                self.main.raw,
            )
        })?;
        self.main.synchronize()
    }

    /// The whole of `src` as a vector.
    pub fn download<T: DeviceValue>(&self, src: &DeviceBuffer<T>) -> Result<Vec<T>, GpuError> {
        // SAFETY: all-zero bytes are a value of T (`DeviceValue`).
        let zero: T = unsafe { std::mem::zeroed() };
        let mut v = vec![zero; src.len()];
        self.copy_to_host(src, &mut v)?;
        Ok(v)
    }

    /// Kernel `entry` of module `module`, compiling `source()` with hiprtc
    /// the first time the module is asked for (per device: the cache is
    /// keyed by module name, so one name must always mean one source).
    /// Compiled for this device's architecture with `-ffp-contract=off`
    /// (see the module documentation). A source the compiler rejects is
    /// [`GpuError::Compile`] with the compiler's log.
    pub fn function(
        &self,
        module: &str,
        source: impl FnOnce() -> String,
        entry: &str,
    ) -> Result<Function, GpuError> {
        let m = {
            let mut cache = self.modules.lock().unwrap_or_else(|e| e.into_inner());
            match cache.get(module) {
                Some(m) => m.clone(),
                None => {
                    let m = Arc::new(self.load(module, &source())?);
                    cache.insert(module.to_string(), m.clone());
                    m
                }
            }
        };
        let call = || format!("hipModuleGetFunction({module}::{entry})");
        let name = CString::new(entry)
            .map_err(|_| GpuError::Invalid(format!("{}: a NUL in the name", call())))?;
        self.current()?;
        let mut raw: sys::hipFunction_t = std::ptr::null_mut();
        // SAFETY: `raw` is a valid place for the handle, `m.raw` a loaded
        // module of this device, `name` NUL-terminated.
        check(&call(), unsafe {
            sys::hipModuleGetFunction(&mut raw, m.raw, name.as_ptr())
        })?;
        Ok(Function {
            raw,
            name: format!("{module}::{entry}"),
            module: m,
        })
    }

    fn load(&self, module: &str, source: &str) -> Result<Module, GpuError> {
        let arch = (!self.info.arch.is_empty()).then_some(self.info.arch.as_str());
        let code = compile(module, source, arch)?;
        self.current()?;
        let mut raw: sys::hipModule_t = std::ptr::null_mut();
        // SAFETY: `raw` is a valid place for the handle; `code` is the code
        // object hiprtc produced, alive for the call.
        check(&format!("hipModuleLoadData({module})"), unsafe {
            sys::hipModuleLoadData(&mut raw, code.as_ptr() as *const c_void)
        })?;
        Ok(Module {
            raw,
            ordinal: self.info.ordinal,
        })
    }

    /// Launches `f` on `main` with `grid` blocks of `block` threads and no
    /// dynamic shared memory; `args[i]` points to the value of the kernel's
    /// i-th parameter (for a buffer: to a variable holding its
    /// [`DeviceBuffer::device_ptr`]).
    ///
    /// # Safety
    ///
    /// - `args` must match the kernel's signature: one entry per parameter,
    ///   in order, each pointing to a live value of the parameter's type.
    /// - Every buffer the kernel touches must belong to this device, be
    ///   large enough for every index the kernel reaches with this launch
    ///   shape, and stay alive until the kernel has finished (a later copy,
    ///   download or synchronize on `main` waits for it).
    /// - Work on `side` must not touch what the kernel writes until
    ///   ordered after it ([`Device::side_after_main`]), and the kernel
    ///   must write only values of each buffer's type (any bits, for the
    ///   [`DeviceValue`] types).
    pub unsafe fn launch(
        &self,
        f: &Function,
        grid: Dim3,
        block: Dim3,
        args: &mut [*mut c_void],
    ) -> Result<(), GpuError> {
        // SAFETY: the caller's contract is this function's.
        unsafe { self.launch_on(&self.main, f, grid, block, args) }
    }

    /// [`Device::launch`] on `side`.
    ///
    /// # Safety
    ///
    /// As [`Device::launch`], with the streams' roles swapped: work on
    /// `main` must not touch what the kernel writes until ordered after it
    /// ([`Device::join_side`]); a buffer must stay alive until the kernel
    /// has finished (a synchronize on `side`).
    pub unsafe fn launch_side(
        &self,
        f: &Function,
        grid: Dim3,
        block: Dim3,
        args: &mut [*mut c_void],
    ) -> Result<(), GpuError> {
        // SAFETY: the caller's contract is this function's.
        unsafe { self.launch_on(&self.side, f, grid, block, args) }
    }

    /// # Safety
    ///
    /// As [`Device::launch`] on `stream`.
    unsafe fn launch_on(
        &self,
        stream: &Stream,
        f: &Function,
        grid: Dim3,
        block: Dim3,
        args: &mut [*mut c_void],
    ) -> Result<(), GpuError> {
        if f.module.ordinal != self.info.ordinal {
            return Err(GpuError::Invalid(format!(
                "kernel {} of device {} launched on device {}",
                f.name, f.module.ordinal, self.info.ordinal
            )));
        }
        self.current()?;
        let params = if args.is_empty() {
            std::ptr::null_mut()
        } else {
            args.as_mut_ptr()
        };
        // SAFETY: `f.raw` is a function of a module that `f` keeps loaded,
        // on this device; `stream` is a live stream of this device; the
        // caller guarantees that `args` matches the kernel and that the
        // buffers it reaches are live and large enough; no `extra`.
        check(&format!("hipModuleLaunchKernel({})", f.name), unsafe {
            sys::hipModuleLaunchKernel(
                f.raw,
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
                0,
                stream.raw,
                params,
                std::ptr::null_mut(),
            )
        })
    }

    /// Makes `side` wait for the work queued on `main` so far.
    pub fn side_after_main(&self) -> Result<(), GpuError> {
        self.side.wait_for(&self.main)
    }

    /// Makes `main` wait for the work queued on `side` so far.
    pub fn join_side(&self) -> Result<(), GpuError> {
        self.main.wait_for(&self.side)
    }

    /// Waits for all work on both streams.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        self.side.synchronize()?;
        self.main.synchronize()
    }

    /// A timing event recorded on `main` now.
    pub fn mark(&self) -> Result<Mark, GpuError> {
        let e = Event::new(self.info.ordinal, sys::hipEventDefault)?;
        // SAFETY: a live event and a live stream of this device.
        check("hipEventRecord", unsafe {
            sys::hipEventRecord(e.0, self.main.raw)
        })?;
        Ok(Mark(e))
    }
}

/// A point in a stream's work, for timing on the device.
#[derive(Debug)]
pub struct Mark(Event);

impl Mark {
    /// Seconds of device time from `self` to `later` (waits for `later`).
    pub fn seconds_until(&self, later: &Mark) -> Result<f64, GpuError> {
        // SAFETY: a live, recorded event.
        check("hipEventSynchronize", unsafe {
            sys::hipEventSynchronize(later.0 .0)
        })?;
        let mut ms = 0f32;
        // SAFETY: `ms` is a valid place for the time; both events are live
        // and recorded with timing.
        check("hipEventElapsedTime", unsafe {
            sys::hipEventElapsedTime(&mut ms, self.0 .0, later.0 .0)
        })?;
        Ok(f64::from(ms) * 1e-3)
    }
}

/// A launch shape of `n` threads in blocks of `block` along x:
/// `(grid, block)`.
pub fn launch_1d(n: usize, block: u32) -> (Dim3, Dim3) {
    let blocks = n.div_ceil(block.max(1) as usize).max(1);
    ((blocks.min(u32::MAX as usize) as u32, 1, 1), (block, 1, 1))
}

/// hiprtc, declared here (`hip-sys` has no bindings for it). Return codes
/// are `hiprtcResult` values, taken as plain integers so that no value the
/// library returns can be an invalid Rust enum.
mod rtc {
    use std::ffi::{c_char, c_int};

    /// `hiprtcResult`; 0 is `HIPRTC_SUCCESS`.
    pub(super) type Code = c_int;
    pub(super) const SUCCESS: Code = 0;
    /// `HIPRTC_ERROR_COMPILATION`.
    pub(super) const ERROR_COMPILATION: Code = 6;

    /// `struct _hiprtcProgram`, only ever behind a pointer.
    #[repr(C)]
    pub(super) struct ProgramData {
        _opaque: [u8; 0],
    }
    /// `hiprtcProgram`.
    pub(super) type Program = *mut ProgramData;

    // ROCm 5.x exports hiprtc from libamdhip64, which hip-runtime-sys's
    // build script links already; named again so that these symbols say
    // where they come from.
    #[link(name = "amdhip64")]
    extern "C" {
        /// # Safety
        /// Any code; returns null or a static NUL-terminated string.
        pub(super) fn hiprtcGetErrorString(result: Code) -> *const c_char;

        /// # Safety
        /// `prog` must be valid for writing a handle; `src` and `name`
        /// NUL-terminated strings alive for the call; with `num_headers` 0,
        /// `headers` and `include_names` may be null. A success hands over
        /// a program that must be destroyed once.
        pub(super) fn hiprtcCreateProgram(
            prog: *mut Program,
            src: *const c_char,
            name: *const c_char,
            num_headers: c_int,
            headers: *const *const c_char,
            include_names: *const *const c_char,
        ) -> Code;

        /// # Safety
        /// `prog` a live program; `options` `num_options` pointers to
        /// NUL-terminated strings, all alive for the call.
        pub(super) fn hiprtcCompileProgram(
            prog: Program,
            num_options: c_int,
            options: *const *const c_char,
        ) -> Code;

        /// # Safety
        /// `prog` a live program; `size` valid for writing.
        pub(super) fn hiprtcGetProgramLogSize(prog: Program, size: *mut usize) -> Code;

        /// # Safety
        /// `prog` a live program; `log` writable for the size
        /// `hiprtcGetProgramLogSize` reported.
        pub(super) fn hiprtcGetProgramLog(prog: Program, log: *mut c_char) -> Code;

        /// # Safety
        /// `prog` a live, compiled program; `size` valid for writing.
        pub(super) fn hiprtcGetCodeSize(prog: Program, size: *mut usize) -> Code;

        /// # Safety
        /// `prog` a live, compiled program; `code` writable for the size
        /// `hiprtcGetCodeSize` reported.
        pub(super) fn hiprtcGetCode(prog: Program, code: *mut c_char) -> Code;

        /// # Safety
        /// `prog` points to a live program, which is destroyed (and must
        /// not be used again).
        pub(super) fn hiprtcDestroyProgram(prog: *mut Program) -> Code;
    }

    // The code object manager hiprtc compiles through; `libamd-comgr-dev`
    // comes with `libamdhip64-dev`.
    #[link(name = "amd_comgr")]
    extern "C" {
        /// `amd_comgr_get_isa_count`: how many ISA names comgr knows.
        ///
        /// # Safety
        /// `count` valid for writing.
        pub(super) fn amd_comgr_get_isa_count(count: *mut usize) -> c_int;
        /// `amd_comgr_get_isa_name`: the ISA name of index `index` (below
        /// the count), a static string.
        ///
        /// # Safety
        /// `isa_name` valid for writing.
        pub(super) fn amd_comgr_get_isa_name(index: usize, isa_name: *mut *const c_char) -> c_int;
    }
}

/// hiprtc's text for a result code.
fn rtc_text(r: rtc::Code) -> String {
    // SAFETY: takes any code; returns null or a static NUL-terminated string.
    let p = unsafe { rtc::hiprtcGetErrorString(r) };
    if p.is_null() {
        format!("hiprtc error {r}")
    } else {
        // SAFETY: non-null, static and NUL-terminated (above).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn rtc_check(call: &str, module: &str, r: rtc::Code) -> Result<(), GpuError> {
    if r == rtc::SUCCESS {
        Ok(())
    } else {
        Err(GpuError::Driver {
            call: format!("{call}({module})"),
            detail: rtc_text(r),
        })
    }
}

/// A hiprtc program, destroyed on drop.
struct Program(rtc::Program);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: a live program from hiprtcCreateProgram, destroyed once.
        let _ = unsafe { rtc::hiprtcDestroyProgram(&mut self.0) };
    }
}

impl Program {
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: a live program; `size` is valid for writing.
        if unsafe { rtc::hiprtcGetProgramLogSize(self.0, &mut size) } != rtc::SUCCESS || size == 0 {
            return String::new();
        }
        let mut log = vec![0u8; size];
        // SAFETY: `log` is writable for the size hiprtc reported.
        if unsafe { rtc::hiprtcGetProgramLog(self.0, log.as_mut_ptr() as *mut c_char) }
            != rtc::SUCCESS
        {
            return String::new();
        }
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        String::from_utf8_lossy(&log[..end]).trim_end().to_string()
    }
}

/// hiprtc is not documented as thread-safe in ROCm 5; compilations are
/// serialised.
static COMPILER: Mutex<()> = Mutex::new(());

/// Compiles the CUDA C `source` of kernel module `module` into a code
/// object for the AMD GPU architecture `arch` (`gfx90a` for MI200 such as
/// MI250X, `gfx942` for MI300; a `gcnArchName` with target features such as
/// `gfx90a:sramecc+:xnack-` is taken too), with no device needed: the same
/// hiprtc compilation, with the same options (`-ffp-contract=off`), that
/// [`Device::function`] runs for the device in hand, so a source that
/// builds here builds there for the same architecture.
///
/// Returns the code object (an ELF file, what `hipModuleLoadData` loads).
/// An empty or malformed architecture name is [`GpuError::Invalid`] before
/// anything is compiled; a source the compiler rejects (or an architecture
/// it does not know) is [`GpuError::Compile`] with the compiler's log; a
/// NUL in the module name or source is [`GpuError::Invalid`].
pub fn compile_for(arch: &str, module: &str, source: &str) -> Result<Vec<u8>, GpuError> {
    check_arch(arch)?;
    // ROCm 5.2's hiprtc does not report a processor or target feature it
    // does not know: it corrupts the heap and the process aborts. Both are
    // checked against comgr's list first.
    let targets = comgr_targets()?;
    let mut parts = arch.split(':');
    let processor = parts.next().unwrap_or(arch);
    let of_processor: Vec<&String> = targets
        .iter()
        .filter(|t| t.split(':').next() == Some(processor))
        .collect();
    if of_processor.is_empty() {
        return Err(GpuError::Invalid(format!(
            "GPU architecture {arch:?}: {processor} is not a target of this ROCm's compiler \
             (it knows: {})",
            compiler_architectures()?.join(", ")
        )));
    }
    // comgr lists processors only. The target features of a target ID are
    // `sramecc` and `xnack`, each at most once, and only on the processors
    // that have them (LLVM's AMDGPU processor table).
    let mut seen: Vec<&str> = Vec::new();
    for feature in parts {
        let name = &feature[..feature.len() - 1];
        let has = match name {
            "xnack" => XNACK.contains(&processor),
            "sramecc" => SRAMECC.contains(&processor),
            _ => false,
        };
        if !has || seen.contains(&name) {
            return Err(GpuError::Invalid(format!(
                "GPU architecture {arch:?}: target feature {feature:?} is not one of {processor}'s \
                 (xnack on {}; sramecc on {}; each at most once)",
                XNACK.join(", "),
                SRAMECC.join(", ")
            )));
        }
        seen.push(name);
    }
    compile(module, source, Some(arch))
}

/// The processors with the `xnack` target feature (LLVM's AMDGPU processor
/// table, up to the MI300 processors).
const XNACK: [&str; 17] = [
    "gfx801", "gfx810", "gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a",
    "gfx90c", "gfx940", "gfx941", "gfx942", "gfx1010", "gfx1011", "gfx1012", "gfx1013",
];
/// The processors with the `sramecc` target feature.
const SRAMECC: [&str; 6] = ["gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942"];

/// The targets comgr knows, as `gfx90a:sramecc+:xnack-` (its ISA names
/// without the `amdgcn-amd-amdhsa--` prefix), in comgr's order.
fn comgr_targets() -> Result<Vec<String>, GpuError> {
    let mut count = 0usize;
    // SAFETY: `count` is valid for writing.
    comgr_check("amd_comgr_get_isa_count", unsafe {
        rtc::amd_comgr_get_isa_count(&mut count)
    })?;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: `i` is below the count comgr reported; `name` is valid
        // for writing.
        comgr_check("amd_comgr_get_isa_name", unsafe {
            rtc::amd_comgr_get_isa_name(i, &mut name)
        })?;
        if name.is_null() {
            continue;
        }
        // SAFETY: comgr returns a NUL-terminated static string.
        let isa = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        out.push(isa.rsplit("--").next().unwrap_or(&isa).to_string());
    }
    Ok(out)
}

/// The AMD GPU processors (`gfx90a`, ...) this ROCm's code object manager
/// (comgr, which hiprtc compiles through) can generate code for, without
/// target features, in comgr's order. Each ROCm release knows the
/// processors of its time: Debian 12's ROCm 5.2 knows gfx90a (MI200) but
/// not gfx940 to gfx942 (MI300), which [`compile_for`] then refuses.
pub fn compiler_architectures() -> Result<Vec<String>, GpuError> {
    let mut out: Vec<String> = Vec::new();
    for t in comgr_targets()? {
        let processor = t.split(':').next().unwrap_or(&t).to_string();
        if !processor.is_empty() && !out.contains(&processor) {
            out.push(processor);
        }
    }
    Ok(out)
}

/// The architectures of `wanted` this ROCm's compiler can build for (in
/// `wanted`'s order), and those it cannot: what a build check runs, and
/// what it reports as skipped.
pub fn buildable<'a>(wanted: &[&'a str]) -> Result<(Vec<&'a str>, Vec<&'a str>), GpuError> {
    let known = compiler_architectures()?;
    Ok(wanted.iter().partition(|a| known.iter().any(|k| k == *a)))
}

/// Compiles kernel module `module` from `source` for `arch`
/// ([`compile_for`]) and checks what came out: every name of `entries` is
/// a kernel of the source (`void name(`) and a symbol of the code object,
/// an ELF file. Returns the code object; a check that fails is
/// [`GpuError::Compile`] naming the module, the architecture and what is
/// missing.
pub fn build_checked(
    arch: &str,
    module: &str,
    source: &str,
    entries: &[&str],
) -> Result<Vec<u8>, GpuError> {
    let fail = |what: String| GpuError::Compile {
        module: module.to_string(),
        log: format!("{arch}: {what}"),
    };
    let code = compile_for(arch, module, source)?;
    if !code.starts_with(b"\x7fELF") {
        return Err(fail("the code object is not an ELF file".into()));
    }
    for e in entries {
        let sym = [e.as_bytes(), b"\0"].concat();
        if !code.windows(sym.len()).any(|w| w == sym.as_slice()) {
            return Err(fail(format!("no symbol {e} in the code object")));
        }
    }
    Ok(code)
}

/// The disassembly of code object `code` for `arch` by llvm-objdump
/// (`$LLVM_OBJDUMP`, or `llvm-objdump` on the path), or why there is none
/// (the tool is missing or failed).
pub fn disassemble(code: &[u8], arch: &str) -> Result<String, String> {
    let tool = std::env::var("LLVM_OBJDUMP").unwrap_or_else(|_| "llvm-objdump".into());
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "gpu-hip-{}-{}.co",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
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

fn comgr_check(call: &str, status: c_int) -> Result<(), GpuError> {
    if status == 0 {
        Ok(())
    } else {
        Err(GpuError::Driver {
            call: call.to_string(),
            detail: format!("comgr status {status}"),
        })
    }
}

/// `Ok` for an AMD GPU architecture name as hiprtc's `--offload-arch` takes
/// it: `gfx` and the processor's digits and letters, then any number of
/// `:feature+` / `:feature-` target features.
fn check_arch(arch: &str) -> Result<(), GpuError> {
    let bad = |why: &str| {
        Err(GpuError::Invalid(format!(
            "GPU architecture {arch:?}: {why} (valid: an AMD architecture name such as \
             gfx90a, gfx942 or gfx90a:sramecc+:xnack-)"
        )))
    };
    if arch.is_empty() {
        return bad("empty");
    }
    let mut parts = arch.split(':');
    let processor = parts.next().unwrap_or("");
    match processor.strip_prefix("gfx") {
        Some(id) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric()) => {}
        _ => return bad("the processor must be `gfx` followed by its digits and letters"),
    }
    for feature in parts {
        let name = feature
            .strip_suffix('+')
            .or_else(|| feature.strip_suffix('-'));
        match name {
            Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric()) => {}
            _ => {
                return bad(&format!(
                    "target feature {feature:?} is not a name ending in + or -"
                ))
            }
        }
    }
    Ok(())
}

/// Compiles `source` with hiprtc into a code object for `arch` (a
/// `gcnArchName`; `None`: the current device's), with `-ffp-contract=off`:
/// the one compilation path of [`Device::function`] and [`compile_for`].
fn compile(module: &str, source: &str, arch: Option<&str>) -> Result<Vec<u8>, GpuError> {
    let nul =
        |what: &str| GpuError::Invalid(format!("kernel module {module}: a NUL in the {what}"));
    let src = CString::new(source).map_err(|_| nul("source"))?;
    let name = CString::new(format!("{module}.cu")).map_err(|_| nul("name"))?;
    let mut options = vec![CString::new("-ffp-contract=off").expect("no NUL")];
    if let Some(a) = arch {
        options.push(CString::new(format!("--offload-arch={a}")).map_err(|_| nul("architecture"))?);
    }
    let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();

    let _lock = COMPILER.lock().unwrap_or_else(|e| e.into_inner());
    let mut raw: rtc::Program = std::ptr::null_mut();
    // SAFETY: `raw` is valid for writing; `src` and `name` are
    // NUL-terminated and outlive the call; no headers.
    rtc_check("hiprtcCreateProgram", module, unsafe {
        rtc::hiprtcCreateProgram(
            &mut raw,
            src.as_ptr(),
            name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    })?;
    let program = Program(raw);
    // SAFETY: a live program; `option_ptrs` holds `len` pointers to
    // NUL-terminated strings (`options`) that outlive the call.
    let r = unsafe {
        rtc::hiprtcCompileProgram(program.0, option_ptrs.len() as c_int, option_ptrs.as_ptr())
    };
    if r != rtc::SUCCESS {
        let log = program.log();
        return Err(if r == rtc::ERROR_COMPILATION {
            GpuError::Compile {
                module: module.to_string(),
                log: if log.is_empty() {
                    format!("{} (no log)", rtc_text(r))
                } else {
                    log
                },
            }
        } else {
            GpuError::Driver {
                call: format!("hiprtcCompileProgram({module})"),
                detail: format!("{}; log: {log}", rtc_text(r)),
            }
        });
    }
    let mut size = 0usize;
    // SAFETY: a live, compiled program; `size` is valid for writing.
    rtc_check("hiprtcGetCodeSize", module, unsafe {
        rtc::hiprtcGetCodeSize(program.0, &mut size)
    })?;
    let mut code = vec![0u8; size];
    // SAFETY: `code` is writable for the size hiprtc reported.
    rtc_check("hiprtcGetCode", module, unsafe {
        rtc::hiprtcGetCode(program.0, code.as_mut_ptr() as *mut c_char)
    })?;
    if code.is_empty() {
        return Err(GpuError::Driver {
            call: format!("hiprtcGetCode({module})"),
            detail: "an empty code object".into(),
        });
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device to test on, or `None` (and a note) where there is none.
    fn device() -> Option<Device> {
        match Device::open(0) {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("skipped: no HIP device ({e})");
                None
            }
        }
    }

    const AXPY: &str = r#"extern "C" __global__ void axpy(double a, const double* x, double* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }"#;

    #[test]
    fn missing_device_is_a_clear_error() {
        let n = device_count().unwrap();
        let e = Device::open(n + 3).unwrap_err();
        assert_eq!(
            e,
            GpuError::NoDevice {
                asked: n + 3,
                count: n
            }
        );
        assert!(e.to_string().contains(&format!("device {}", n + 3)), "{e}");
    }

    /// hiprtc needs no device when told the architecture: this runs
    /// everywhere the runtime is installed.
    #[test]
    fn hiprtc_compiles_without_a_device() {
        let known = compiler_architectures().unwrap();
        assert!(known.iter().any(|k| k == "gfx90a"), "{known:?}");
        for arch in ["gfx90a", "gfx90a:sramecc+:xnack-", "gfx942"] {
            if !known.iter().any(|k| arch.starts_with(k.as_str())) {
                eprintln!("{arch}: not a target of this ROCm's compiler (it knows {known:?})");
                continue;
            }
            let code = compile_for(arch, "test_axpy_offline", AXPY).unwrap();
            // An ELF code object.
            assert_eq!(&code[..4], b"\x7fELF", "{arch}");
        }
        let e = compile_for("gfx90a", "test_bad_offline", "this is not C").unwrap_err();
        match &e {
            GpuError::Compile { module, log } => {
                assert_eq!(module, "test_bad_offline");
                assert!(log.contains("error"), "{log}");
            }
            other => panic!("{other}"),
        }
        assert!(matches!(
            compile_for("gfx90a", "test_nul", "a\0b"),
            Err(GpuError::Invalid(_))
        ));
    }

    /// Names that are not architectures are refused before hiprtc runs,
    /// with the name and examples of valid ones in the message.
    #[test]
    fn malformed_architecture_names_are_refused() {
        for arch in [
            "",
            "gfx",
            "sm_90",
            "90a",
            "gfx90a:",
            "gfx90a:xnack",
            "gfx90a::xnack-",
            "gfx 90a",
            "--offload-arch=gfx90a",
        ] {
            match compile_for(arch, "test_arch", AXPY) {
                Err(GpuError::Invalid(m)) => {
                    assert!(m.contains(&format!("{arch:?}")), "{m}");
                    assert!(m.contains("gfx942"), "{m}");
                }
                other => panic!("{arch:?}: {other:?}"),
            }
        }
        let e = compile_for("", "test_arch", AXPY).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
        // Well formed but unknown to the compiler: refused, not handed to
        // hiprtc (ROCm 5.2's would abort the process).
        match compile_for("gfx9999", "test_arch", AXPY) {
            Err(GpuError::Invalid(m)) => {
                assert!(m.contains("not a target of this ROCm's compiler"), "{m}");
                assert!(m.contains("gfx90a"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        // Target features the processor lacks (ROCm 5.2's hiprtc would
        // abort on these too), unknown ones, and repeated ones.
        for arch in [
            "gfx90a:nosuchfeature+",
            "gfx1030:xnack+",
            "gfx803:sramecc-",
            "gfx90a:xnack+:xnack-",
        ] {
            match compile_for(arch, "test_arch", AXPY) {
                Err(GpuError::Invalid(m)) => assert!(m.contains("target feature"), "{m}"),
                other => panic!("{arch}: {other:?}"),
            }
        }
    }

    /// hiprtc contracts `a * x + y` into an FMA unless told not to; the
    /// compilation path has `-ffp-contract=off`, so the code object holds a
    /// multiply and an add. Skipped (with the reason) without llvm-objdump.
    #[test]
    fn no_fused_multiply_add_in_the_code_object() {
        let code = compile_for("gfx90a", "test_axpy_fma", AXPY).unwrap();
        let text = match disassemble(&code, "gfx90a") {
            Ok(t) => t,
            Err(why) => {
                eprintln!("skipped: no disassembly ({why})");
                return;
            }
        };
        assert!(
            !text.contains("v_fma_f64") && !text.contains("v_fmac_f64"),
            "{text}"
        );
        assert!(
            text.contains("v_mul_f64") && text.contains("v_add_f64"),
            "{text}"
        );
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
        let z = d.alloc_zeros::<u32>(1000, "zeros").unwrap();
        assert_eq!(z.len(), 1000);
        assert!(d.download(&z).unwrap().iter().all(|&v| v == 0));
    }

    #[test]
    fn compiled_kernel_round_trip() {
        let Some(d) = device() else { return };
        eprintln!("{}", d.info());
        let f = d
            .function("test_axpy", || AXPY.to_string(), "axpy")
            .unwrap();
        let n = 1000usize;
        let x: Vec<f64> = (0..n).map(|i| (i as f64).sin()).collect();
        let y0: Vec<f64> = (0..n).map(|i| (i as f64).cos()).collect();
        let xd = d.upload(&x, "x").unwrap();
        let mut yd = d.upload(&y0, "y").unwrap();
        let mut a = 1.0 / 3.0;
        let mut px = xd.device_ptr();
        let mut py = yd.device_ptr_mut();
        let mut ni = n as i32;
        let mut args = [
            &mut a as *mut f64 as *mut c_void,
            &mut px as *mut sys::hipDeviceptr_t as *mut c_void,
            &mut py as *mut sys::hipDeviceptr_t as *mut c_void,
            &mut ni as *mut i32 as *mut c_void,
        ];
        let (grid, block) = launch_1d(n, 128);
        // SAFETY: the arguments match the kernel's signature; both buffers
        // hold n values and live past the download below.
        unsafe { d.launch(&f, grid, block, &mut args) }.unwrap();
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
