//! Device-resident fields (feature `cuda`): the same layout as [`Field`],
//! in GPU memory, exchanged through the same [`Exchanger`](crate::Exchanger).
//!
//! Packing and unpacking run as kernels on the device's `main` stream into
//! a staging buffer on the device; the exchanger's host buffers carry the
//! bytes between ranks (host-staged), so any `comm` backend (in-process
//! ranks, MPI) and any number of ranks per GPU work unchanged. Periodic
//! self-neighbours are copied on the device without leaving it.

use crate::field::{Field, FieldLayout, HaloData, Region};
use crate::HaloError;
use comm::Elem;
use gpu::cuda::cudarc::driver::{
    CudaFunction, CudaSlice, CudaView, CudaViewMut, DeviceRepr, LaunchConfig, PushKernelArg,
    ValidAsZeroBits,
};
use gpu::cuda::Device;
use gpu::GpuError;
use std::sync::{Arc, Mutex};

/// An element type with a device representation and a C name for kernels.
pub trait DeviceElem: Elem + DeviceRepr + ValidAsZeroBits + Default {
    /// The type's name in CUDA C.
    const C_NAME: &'static str;
}

impl DeviceElem for f64 {
    const C_NAME: &'static str = "double";
}

impl DeviceElem for f32 {
    const C_NAME: &'static str = "float";
}

/// A [`Region`] as kernels take it: the first padded index and the extent
/// per axis, the `struct Box3` of [`DeviceRegion::SOURCE`], which kernels
/// of other crates prepend to their own sources.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceRegion {
    lo: [i32; 3],
    n: [i32; 3],
}

// SAFETY: plain `repr(C)` integers, laid out as the kernels' `struct Box3`.
unsafe impl DeviceRepr for DeviceRegion {}

impl DeviceRegion {
    /// The CUDA C definition of `struct Box3` and of `cell(b, q, s0, s1)`,
    /// the padded offset of cell `q` (row-major) of region `b`.
    pub const SOURCE: &'static str = crate::kernels::REGION_SOURCE;
}

impl From<&Region> for DeviceRegion {
    /// The region; [`DeviceField::new`] has checked that padded extents fit
    /// the kernels' 32-bit integers.
    fn from(r: &Region) -> Self {
        DeviceRegion {
            lo: r.lo.map(|x| x as i32),
            n: r.shape().map(|x| x as i32),
        }
    }
}

/// Up to 26 copies as `halo_copy_many` takes them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Copies {
    src: [DeviceRegion; 26],
    dst: [DeviceRegion; 26],
    start: [i64; 27],
    count: i32,
}

// SAFETY: `repr(C)` arrays of integers, laid out as the kernel's `struct
// Copies` (the trailing padding after `count` is never read).
unsafe impl DeviceRepr for Copies {}

pub(crate) fn dev(e: impl std::fmt::Display) -> HaloError {
    HaloError::Device(e.to_string())
}

fn launch(n: usize) -> LaunchConfig {
    gpu::cuda::launch_1d(n.min(1 << 20), 256)
}

/// Refuses a component or region outside `layout`'s padded box: the
/// kernels index the field with no check of their own, so this is what
/// keeps a region from reaching past the allocation.
fn check_inside(layout: &FieldLayout, comp: usize, region: &Region) -> Result<(), HaloError> {
    let p = layout.padded();
    if comp >= layout.components {
        return Err(HaloError::Invalid(format!(
            "component {comp} of a field of {} components",
            layout.components
        )));
    }
    if (0..3).any(|d| region.lo[d] > region.hi[d] || region.hi[d] > p[d]) {
        return Err(HaloError::Invalid(format!(
            "region {:?}..{:?} outside the padded box 0..{p:?} (lo <= hi <= padded extent per axis)",
            region.lo, region.hi
        )));
    }
    Ok(())
}

/// True when the two regions share a cell.
fn overlap(a: &Region, b: &Region) -> bool {
    (0..3).all(|d| a.lo[d].max(b.lo[d]) < a.hi[d].min(b.hi[d]))
}

/// Refuses copies between regions of different shapes, outside the padded
/// box, or where a destination overlaps a source or another destination:
/// the copy kernels run every cell at once, so those would race.
fn check_copies(
    layout: &FieldLayout,
    comp: usize,
    pairs: &[(Region, Region)],
) -> Result<(), HaloError> {
    for (k, (src, dst)) in pairs.iter().enumerate() {
        if src.shape() != dst.shape() {
            return Err(HaloError::Invalid(format!(
                "copy between regions of shapes {:?} and {:?}",
                src.shape(),
                dst.shape()
            )));
        }
        check_inside(layout, comp, src)?;
        check_inside(layout, comp, dst)?;
        for (j, (s2, d2)) in pairs.iter().enumerate() {
            if overlap(dst, s2) || (j != k && overlap(dst, d2)) {
                return Err(HaloError::Invalid(format!(
                    "copy destination {:?}..{:?} overlaps {} {:?}..{:?}",
                    dst.lo,
                    dst.hi,
                    if overlap(dst, s2) {
                        "a source"
                    } else {
                        "another destination"
                    },
                    if overlap(dst, s2) { s2.lo } else { d2.lo },
                    if overlap(dst, s2) { s2.hi } else { d2.hi },
                )));
            }
        }
    }
    Ok(())
}

/// `halo_unpack` of `input` (exactly `region.len()` values, row-major) into
/// component `comp`'s cells of `region` of `data` (a field of `layout`), on
/// `device`'s `main` stream; the parts of a [`DeviceField`], so that its
/// staging buffer can be the input.
fn unpack_into<T: DeviceElem>(
    device: &Device,
    kernel: &CudaFunction,
    layout: FieldLayout,
    data: &mut CudaSlice<T>,
    comp: usize,
    region: &Region,
    input: &CudaView<'_, T>,
) -> Result<(), HaloError> {
    let n = region.len();
    check_inside(&layout, comp, region)?;
    if input.len() != n {
        return Err(HaloError::Invalid(format!(
            "unpack of {} values into a {n}-cell region",
            input.len()
        )));
    }
    let s = layout.strides();
    let (s0, s1) = (s[0] as i64, s[1] as i64);
    let b = DeviceRegion::from(region);
    let len = layout.padded_len();
    let mut field = data.slice_mut(comp * len..(comp + 1) * len);
    let mut l = device.main().launch_builder(kernel);
    l.arg(&mut field).arg(input).arg(&b).arg(&s0).arg(&s1);
    // SAFETY: the arguments match `halo_unpack`; the region lies inside
    // the component (checked above) and `input` holds its `n` cells. `input` is a different allocation from the
    // field (an exchanger's or the field's staging buffer).
    unsafe { l.launch(launch(n)) }.map_err(dev)?;
    Ok(())
}

struct Kernels {
    pack: CudaFunction,
    unpack: CudaFunction,
    copy: CudaFunction,
    copy_many: CudaFunction,
}

/// A field of one or more components in device memory; see
/// [`FieldLayout`] for the layout, which is the host [`Field`]'s.
pub struct DeviceField<T: DeviceElem = f64> {
    device: Arc<Device>,
    layout: FieldLayout,
    data: CudaSlice<T>,
    /// Staging for pack and unpack: as large as the largest face slab.
    staging: Mutex<CudaSlice<T>>,
    kernels: Kernels,
}

impl<T: DeviceElem> std::fmt::Debug for DeviceField<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceField")
            .field("device", &self.device.info().ordinal)
            .field("layout", &self.layout)
            .finish()
    }
}

impl<T: DeviceElem> DeviceField<T> {
    /// A zero-filled field on `device`; `name` labels it in an
    /// out-of-memory error.
    pub fn new(device: &Arc<Device>, layout: FieldLayout, name: &str) -> Result<Self, GpuError> {
        let p = layout.padded();
        if p.iter().any(|&x| x > i32::MAX as usize) {
            return Err(GpuError::Invalid(format!(
                "padded extent {p:?} exceeds the kernels' 32-bit extents"
            )));
        }
        let data = device.alloc_zeros(layout.padded_len() * layout.components, name)?;
        // The largest region an exchange moves: a face slab of the full
        // padded cross-section, as thick as the ghost width.
        let slab = (0..3)
            .map(|d| layout.ghost[d] * p[(d + 1) % 3] * p[(d + 2) % 3])
            .max()
            .unwrap_or(0);
        let staging = device.alloc_zeros(slab.max(1), &format!("{name} (halo staging)"))?;
        let module = crate::kernels::module_name(T::C_NAME);
        let src = || crate::kernels::source(T::C_NAME);
        let [pack, unpack, copy, copy_many] = crate::kernels::ENTRIES;
        let kernels = Kernels {
            pack: device.function(&module, src, pack)?,
            unpack: device.function(&module, src, unpack)?,
            copy: device.function(&module, src, copy)?,
            copy_many: device.function(&module, src, copy_many)?,
        };
        Ok(DeviceField {
            device: device.clone(),
            layout,
            data,
            staging: Mutex::new(staging),
            kernels,
        })
    }

    /// A device copy of a host field.
    pub fn from_host(device: &Arc<Device>, host: &Field<T>, name: &str) -> Result<Self, GpuError> {
        let mut f = Self::new(device, host.layout(), name)?;
        f.upload(host)?;
        Ok(f)
    }

    /// Overwrites every value (ghosts included) with the host field's.
    pub fn upload(&mut self, host: &Field<T>) -> Result<(), GpuError> {
        self.check(host.layout())?;
        self.device.copy_to_device(host.as_slice(), &mut self.data)
    }

    /// Copies every value (ghosts included) into the host field, after the
    /// work queued on the device's `main` stream.
    pub fn download(&self, host: &mut Field<T>) -> Result<(), GpuError> {
        self.check(host.layout())?;
        self.device.copy_to_host(&self.data, host.as_mut_slice())
    }

    fn check(&self, l: FieldLayout) -> Result<(), GpuError> {
        if l != self.layout {
            return Err(GpuError::Invalid(format!(
                "host field layout {l:?} differs from the device field's {:?}",
                self.layout
            )));
        }
        Ok(())
    }

    /// The layout.
    pub fn layout(&self) -> FieldLayout {
        self.layout
    }

    /// The device.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// All values, components one after another (for kernel arguments).
    pub fn data(&self) -> &CudaSlice<T> {
        &self.data
    }

    /// All values, mutable (for kernel arguments).
    pub fn data_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.data
    }

    /// Packs component `comp`'s cells of `region` into `out` (exactly
    /// `region.len()` values, row-major), with a kernel on `main`.
    pub(crate) fn pack_to(
        &self,
        comp: usize,
        region: &Region,
        out: &mut CudaViewMut<'_, T>,
    ) -> Result<(), HaloError> {
        let n = region.len();
        check_inside(&self.layout, comp, region)?;
        if out.len() != n {
            return Err(HaloError::Invalid(format!(
                "pack of a {n}-cell region into {} values",
                out.len()
            )));
        }
        let (s0, s1) = self.strides();
        let b = DeviceRegion::from(region);
        let field = self.data.slice(self.component_range(comp));
        let stream = self.device.main();
        let mut l = stream.launch_builder(&self.kernels.pack);
        l.arg(&field).arg(out).arg(&b).arg(&s0).arg(&s1);
        // SAFETY: the arguments match `halo_pack`; the region lies inside the
        // component (checked above) and `out` holds its `n` cells.
        unsafe { l.launch(launch(n)) }.map_err(dev)?;
        Ok(())
    }

    /// Unpacks `input` (exactly `region.len()` values, row-major) into
    /// component `comp`'s cells of `region`, with a kernel on `main`.
    pub(crate) fn unpack_from(
        &mut self,
        comp: usize,
        region: &Region,
        input: &CudaView<'_, T>,
    ) -> Result<(), HaloError> {
        let DeviceField {
            device,
            layout,
            data,
            kernels,
            ..
        } = self;
        unpack_into(device, &kernels.unpack, *layout, data, comp, region, input)
    }

    fn strides(&self) -> (i64, i64) {
        let s = self.layout.strides();
        (s[0] as i64, s[1] as i64)
    }

    fn component_range(&self, comp: usize) -> std::ops::Range<usize> {
        let n = self.layout.padded_len();
        comp * n..(comp + 1) * n
    }
}

impl<T: DeviceElem> HaloData<T> for DeviceField<T> {
    fn layout(&self) -> FieldLayout {
        self.layout
    }

    fn pack(&self, comp: usize, region: &Region, out: &mut [T]) -> Result<(), HaloError> {
        let n = region.len();
        let mut staging = self.staging.lock().unwrap_or_else(|e| e.into_inner());
        if out.len() != n || n > staging.len() {
            return Err(HaloError::Invalid(format!(
                "pack of a {n}-cell region into {} values (staging {})",
                out.len(),
                staging.len()
            )));
        }
        let mut st = staging.slice_mut(..n);
        self.pack_to(comp, region, &mut st)?;
        self.device.copy_to_host(&st, out).map_err(dev)
    }

    fn unpack(&mut self, comp: usize, region: &Region, input: &[T]) -> Result<(), HaloError> {
        let n = region.len();
        let DeviceField {
            device,
            layout,
            data,
            staging,
            kernels,
        } = self;
        let staging = staging.get_mut().unwrap_or_else(|e| e.into_inner());
        if input.len() != n || n > staging.len() {
            return Err(HaloError::Invalid(format!(
                "unpack of {} values into a {n}-cell region (staging {})",
                input.len(),
                staging.len()
            )));
        }
        device.copy_to_device(input, staging).map_err(dev)?;
        // The staging buffer is next written by a copy queued on the same
        // stream, after this kernel.
        unpack_into(
            device,
            &kernels.unpack,
            *layout,
            data,
            comp,
            region,
            &staging.slice(..n),
        )
    }

    fn copy_region(&mut self, comp: usize, src: &Region, dst: &Region) -> Result<(), HaloError> {
        check_copies(&self.layout, comp, &[(*src, *dst)])?;
        let (s0, s1) = self.strides();
        let (a, b) = (DeviceRegion::from(src), DeviceRegion::from(dst));
        let n = src.len();
        let range = self.component_range(comp);
        let mut field = self.data.slice_mut(range);
        let stream = self.device.main();
        let mut l = stream.launch_builder(&self.kernels.copy);
        l.arg(&mut field).arg(&a).arg(&b).arg(&s0).arg(&s1);
        // SAFETY: both regions lie inside the component and are disjoint
        // (checked above), so no thread reads what another writes.
        unsafe { l.launch(launch(n)) }.map_err(dev)?;
        Ok(())
    }

    fn copy_regions(&mut self, comp: usize, pairs: &[(Region, Region)]) -> Result<(), HaloError> {
        check_copies(&self.layout, comp, pairs)?;
        for chunk in pairs.chunks(26) {
            let empty = DeviceRegion {
                lo: [0; 3],
                n: [1; 3],
            };
            let mut c = Copies {
                src: [empty; 26],
                dst: [empty; 26],
                start: [0; 27],
                count: chunk.len() as i32,
            };
            for (p, (src, dst)) in chunk.iter().enumerate() {
                c.src[p] = DeviceRegion::from(src);
                c.dst[p] = DeviceRegion::from(dst);
                c.start[p + 1] = c.start[p] + src.len() as i64;
            }
            let n = c.start[chunk.len()] as usize;
            if n == 0 {
                continue;
            }
            let (s0, s1) = self.strides();
            let range = self.component_range(comp);
            let mut field = self.data.slice_mut(range);
            let stream = self.device.main();
            let mut l = stream.launch_builder(&self.kernels.copy_many);
            l.arg(&mut field).arg(&c).arg(&s0).arg(&s1);
            // SAFETY: every region lies inside the component and no
            // destination overlaps a source or another destination (checked
            // above), so no thread reads what another writes.
            unsafe { l.launch(launch(n)) }.map_err(dev)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{check_copies, check_inside, DeviceElem};
    use crate::{FieldLayout, Region};

    fn reg(lo: [usize; 3], hi: [usize; 3]) -> Region {
        Region { lo, hi }
    }

    /// The kernels index the field unchecked, so a region past the padded
    /// box, a missing component or copies that would race are refused
    /// before any launch (no device needed to check the checks).
    #[test]
    fn regions_outside_the_box_and_racing_copies_are_refused() {
        let l = FieldLayout {
            owned: [4, 5, 6],
            ghost: [1, 1, 2],
            components: 2,
        };
        // Padded box 6 x 7 x 10.
        assert!(check_inside(&l, 1, &reg([0; 3], [6, 7, 10])).is_ok());
        assert!(check_inside(&l, 0, &reg([3, 3, 3], [3, 3, 3])).is_ok());
        for bad in [
            reg([0; 3], [7, 7, 10]),
            reg([0; 3], [6, 8, 10]),
            reg([0; 3], [6, 7, 11]),
            reg([2, 0, 0], [1, 7, 10]),
            reg([1 << 40, 0, 0], [(1 << 40) + 2, 2, 2]),
        ] {
            assert!(check_inside(&l, 0, &bad).is_err(), "{bad:?} accepted");
        }
        assert!(check_inside(&l, 2, &reg([0; 3], [1; 3])).is_err());

        let (a, b) = (reg([1, 1, 2], [2, 6, 8]), reg([5, 1, 2], [6, 6, 8]));
        assert!(check_copies(&l, 0, &[(a, b)]).is_ok());
        // Shapes differ, a destination outside, onto its own source.
        assert!(check_copies(&l, 0, &[(a, reg([5, 1, 2], [6, 6, 7]))]).is_err());
        assert!(check_copies(&l, 0, &[(a, reg([6, 1, 2], [7, 6, 8]))]).is_err());
        assert!(check_copies(&l, 0, &[(a, reg([1, 1, 3], [2, 6, 9]))]).is_err());
        // Two copies: one's destination on the other's source, or the two
        // destinations on one another.
        let c = reg([2, 1, 2], [3, 6, 8]);
        assert!(check_copies(&l, 0, &[(a, b), (c, reg([4, 1, 2], [5, 6, 8]))]).is_ok());
        assert!(check_copies(&l, 0, &[(a, b), (b, c)]).is_err());
        assert!(check_copies(&l, 0, &[(a, b), (c, b)]).is_err());
    }

    /// `kernels::ELEMENT_TYPES` (what the HIP test compiles) names every
    /// element type a device field can have.
    #[test]
    fn kernel_element_types_are_the_device_elements() {
        assert_eq!([f64::C_NAME, f32::C_NAME], crate::kernels::ELEMENT_TYPES);
    }
}
