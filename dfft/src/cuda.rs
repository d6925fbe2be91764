//! 3D real transforms on NVIDIA GPUs through cuFFT (feature `cuda`).
//!
//! [`DeviceR2c`] transforms a whole grid held by one rank: forward D2Z
//! from a row-major `n0 x n1 x n2` real array (last axis fastest) to the
//! `n0 x n1 x (n2 / 2 + 1)` half spectrum, and backward Z2D, both
//! unnormalised (cuFFT's convention); the caller folds `1 / N` into
//! whatever it multiplies the spectrum by.
//!
//! [`DeviceFft3d`] is the distributed transform on the device: the plan of
//! [`Fft3d`](crate::Fft3d) (its axis order, layouts and minimum-reshape
//! selection, computed by the same code) executed with batched cuFFT 1D
//! transforms (2D where two consecutive transforms share a layout and
//! their axes are the two fastest) and reshapes whose blocks are packed and
//! unpacked by kernels on the device and exchanged through host buffers
//! with the communicator's `alltoallv` (host-staged, so any communicator
//! works). On one rank it is [`DeviceR2c`]. Unnormalised, like cuFFT; the
//! rounding is cuFFT's, so results agree with the host transform to
//! rounding, not bit for bit.

use crate::fft::{plan_steps, Planned};
use crate::{FftError, Kind, Layout, Options};
use comm::{CommExt, Communicator};
use gpu::cuda::cudarc::cufft::{sys, CudaFft, FftDirection};
use gpu::cuda::cudarc::driver::{
    CudaFunction, CudaSlice, CudaView, CudaViewMut, DeviceRepr, PushKernelArg,
};
use gpu::cuda::{check_cufft, launch_1d, Device};
use gpu::links::{reach, LinkError, LinkSpec, Links};
use gpu::nccl::{NcclComm, NcclLinks};
use gpu::GpuError;
use std::sync::Arc;

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

fn device(e: impl std::fmt::Display) -> FftError {
    FftError::Device(e.to_string())
}

fn link_err(e: LinkError) -> FftError {
    match e {
        LinkError::Comm(c) => FftError::Comm(c),
        other => FftError::Device(other.to_string()),
    }
}

/// Tags of the device reshapes' notices: above the halo's (`halo` uses
/// tags below 2^17) and below the in-process communicator's 2^24; each
/// plan takes 256 (two per reshape and direction), 64 plans in turn.
const TAG_BASE: u32 = 1 << 23;

fn cufft_err(
    call: &'static str,
) -> impl Fn(gpu::cuda::cudarc::cufft::result::CufftError) -> FftError {
    move |e| FftError::Device(format!("{call}: {:?}", e.0))
}

/// A block of a reshape as the kernels take it (`struct Block` of
/// `kernels/reshape.cu`): `n[0] x n[1] x n[2]` elements at strides `s`
/// from element `off` of the array, contiguous from element `at` of the
/// message buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    off: i64,
    n: [i64; 3],
    s: [i64; 3],
    at: i64,
}

// SAFETY: `repr(C)` integers, laid out as the kernels' `struct Block`.
unsafe impl DeviceRepr for Block {}

/// One direction of a reshape: the blocks this rank sends to and receives
/// from every rank (in elements), and their sizes and places in the
/// message buffers (in doubles, as `alltoallv` takes them).
struct Move {
    /// Device-to-device links to the other ranks (ranks of one machine), or
    /// `None` (host-staged, or NCCL).
    links: Option<Links<f64>>,
    /// NCCL links to the other ranks (and, in tests, to this one), or
    /// `None`.
    nccl: Option<NcclLinks<f64>>,
    /// The peer of each outgoing and each incoming link.
    link_out: Vec<usize>,
    link_in: Vec<usize>,
    send: Vec<Block>,
    recv: Vec<Block>,
    send_counts: Vec<usize>,
    send_displs: Vec<usize>,
    recv_counts: Vec<usize>,
    recv_displs: Vec<usize>,
}

impl Move {
    /// The blocks of moving `from` to `to`, elements of `esize` doubles:
    /// each travels in the receiver's memory order (as on the host), so
    /// both sides agree on its layout.
    fn new(from: &Layout, to: &Layout, rank: usize, p: usize, esize: usize) -> Move {
        let order = to.order();
        let (fb, fs) = (from.box_of(rank), from.strides(rank));
        let (tb, ts) = (to.box_of(rank), to.strides(rank));
        let block = |own: &comm::IndexBox, st: [usize; 3], region: &comm::IndexBox, at: usize| {
            let sh = region.shape();
            let off = if region.is_empty() {
                0
            } else {
                (0..3).map(|d| (region.lo[d] - own.lo[d]) * st[d]).sum()
            };
            Block {
                off: off as i64,
                n: order.map(|d| sh[d] as i64),
                s: order.map(|d| st[d] as i64),
                at: at as i64,
            }
        };
        let mut m = Move {
            links: None,
            nccl: None,
            link_out: Vec::new(),
            link_in: Vec::new(),
            send: Vec::with_capacity(p),
            recv: Vec::with_capacity(p),
            send_counts: Vec::with_capacity(p),
            send_displs: Vec::with_capacity(p),
            recv_counts: Vec::with_capacity(p),
            recv_displs: Vec::with_capacity(p),
        };
        let (mut sa, mut ra) = (0, 0);
        for q in 0..p {
            let out = fb.intersect(&to.box_of(q));
            let inn = from.box_of(q).intersect(&tb);
            m.send.push(block(&fb, fs, &out, sa));
            m.recv.push(block(&tb, ts, &inn, ra));
            m.send_counts.push(out.len() * esize);
            m.send_displs.push(sa * esize);
            m.recv_counts.push(inn.len() * esize);
            m.recv_displs.push(ra * esize);
            sa += out.len();
            ra += inn.len();
        }
        m
    }

    /// The link descriptions of this move, on tags `tag` (notices) and
    /// `tag + 1` (acknowledgements): one link per peer with a non-empty
    /// block each way, keyed by the receiver; this rank itself only with
    /// `with_self`. Records each link's peer in `link_out` / `link_in`.
    fn specs(
        &mut self,
        comm: &dyn Communicator,
        tag: u32,
        with_self: bool,
    ) -> (Vec<LinkSpec>, Vec<LinkSpec>) {
        let me = comm.rank();
        let spec = |peer: usize, key: usize, len: usize| LinkSpec {
            peer,
            key: key as u32,
            len,
            notice_tag: tag,
            ack_tag: tag + 1,
        };
        let (mut outs, mut ins) = (Vec::new(), Vec::new());
        for q in (0..comm.size()).filter(|&q| with_self || q != me) {
            if self.send_counts[q] > 0 {
                outs.push(spec(q, q, self.send_counts[q]));
                self.link_out.push(q);
            }
            if self.recv_counts[q] > 0 {
                ins.push(spec(q, me, self.recv_counts[q]));
                self.link_in.push(q);
            }
        }
        (outs, ins)
    }

    /// Sets up the device-to-device links of this move (collective), on
    /// tags `tag` (notices) and `tag + 1` (acknowledgements).
    fn link(
        &mut self,
        comm: &dyn Communicator,
        dev: &Arc<Device>,
        tag: u32,
    ) -> Result<(), FftError> {
        let (outs, ins) = self.specs(comm, tag, false);
        self.links = Links::new(comm, dev, &outs, &ins).map_err(link_err)?;
        Ok(())
    }

    /// Sets up the NCCL links of this move over `nccl` (collective), on
    /// tag `tag` (notices); `loopback`: this rank's own block goes through
    /// NCCL too (a test of the remote path on one GPU).
    fn link_nccl(
        &mut self,
        comm: &dyn Communicator,
        nccl: &Arc<NcclComm>,
        tag: u32,
        loopback: bool,
    ) -> Result<(), FftError> {
        let (outs, ins) = self.specs(comm, tag, loopback);
        self.nccl = Some(NcclLinks::over(comm, nccl, &outs, &ins).map_err(link_err)?);
        Ok(())
    }

    fn send_len(&self) -> usize {
        self.send_counts.iter().sum()
    }

    fn recv_len(&self) -> usize {
        self.recv_counts.iter().sum()
    }
}

/// Batched cuFFT calls along one or two axes of a local array.
struct Lines {
    /// Forward (D2Z or Z2Z).
    fwd: CudaFft,
    /// Backward Z2D of a real transform; `None` for Z2Z, whose plan runs
    /// both directions.
    bwd: Option<CudaFft>,
    /// `(input, output)` offsets of each call: real (f64) and complex
    /// elements for a real transform, complex for a complex one.
    calls: Vec<(usize, usize)>,
}

enum DeviceStep {
    Reshape {
        fwd: Box<Move>,
        bwd: Box<Move>,
        /// Doubles per element: 1 for real, 2 for complex data.
        esize: i32,
    },
    Lines(Lines),
}

/// The shape of `layout`'s local array of `rank` in memory order
/// (slowest first), and the position of `axis` in it.
fn memory_shape(layout: &Layout, rank: usize, axis: usize) -> ([usize; 3], usize) {
    let sh = layout.local_shape(rank);
    let o = layout.order();
    (
        o.map(|d| sh[d]),
        o.iter()
            .position(|&d| d == axis)
            .expect("an order holds every axis"),
    )
}

fn c(x: usize) -> i32 {
    x as i32
}

/// A plan of `batch` rank-`n.len()` transforms; `embed` and `dist` as
/// cuFFT's advanced layout (`stride` the innermost stride).
#[allow(clippy::too_many_arguments)]
fn plan(
    dev: &Device,
    n: &[usize],
    (iembed, istride, idist): (&[usize], usize, usize),
    (oembed, ostride, odist): (&[usize], usize, usize),
    ty: sys::cufftType,
    batch: usize,
) -> Result<CudaFft, FftError> {
    let n: Vec<i32> = n.iter().map(|&x| c(x)).collect();
    let ie: Vec<i32> = iembed.iter().map(|&x| c(x)).collect();
    let oe: Vec<i32> = oembed.iter().map(|&x| c(x)).collect();
    CudaFft::plan_many(
        &n,
        Some(&ie),
        c(istride),
        c(idist),
        Some(&oe),
        c(ostride),
        c(odist),
        ty,
        c(batch),
        dev.main().clone(),
    )
    .map_err(cufft_err("cufftPlanMany"))
}

/// One side of cuFFT's advanced layout: storage extents, innermost
/// stride, distance between transforms.
type Side = (Vec<usize>, usize, usize);

/// The advanced layout of the transforms along the axis at position `pos`
/// of local arrays of memory shapes `mi` (input) and `mo` (output: the
/// same but for the halved axis of a real transform), or along positions
/// 1 and 2 together (`two`): the lengths, both sides, the batch, and the
/// `(input, output)` offsets of the calls (one per outer plane when the
/// axis is the middle one, whose lines no single stride and distance
/// describe).
fn geometry(
    mi: [usize; 3],
    mo: [usize; 3],
    pos: usize,
    two: bool,
) -> (Vec<usize>, Side, Side, usize, Vec<(usize, usize)>) {
    if two {
        let (ei, eo) = (vec![mi[1], mi[2]], vec![mo[1], mo[2]]);
        let (di, dout) = (mi[1] * mi[2], mo[1] * mo[2]);
        return (ei.clone(), (ei, 1, di), (eo, 1, dout), mi[0], vec![(0, 0)]);
    }
    match pos {
        2 => (
            vec![mi[2]],
            (vec![mi[2]], 1, mi[2]),
            (vec![mo[2]], 1, mo[2]),
            mi[0] * mi[1],
            vec![(0, 0)],
        ),
        0 => {
            // The other two axes are the same on both sides.
            let s = mi[1] * mi[2];
            (
                vec![mi[0]],
                (vec![mi[0]], s, 1),
                (vec![mo[0]], s, 1),
                s,
                vec![(0, 0)],
            )
        }
        _ => (
            vec![mi[1]],
            (vec![mi[1]], mi[2], 1),
            (vec![mo[1]], mi[2], 1),
            mi[2],
            (0..mi[0])
                .map(|i| (i * mi[1] * mi[2], i * mo[1] * mo[2]))
                .collect(),
        ),
    }
}

impl Lines {
    /// The transforms along `axis` from layout `from` to layout `to` (the
    /// same layout for a complex transform; the real and the complex one
    /// for the real-to-complex transform along the halved axis, `real`),
    /// together with the next axis in memory when `two`.
    fn new(
        dev: &Device,
        (from, to): (&Layout, &Layout),
        rank: usize,
        axis: usize,
        two: bool,
        real: bool,
    ) -> Result<Lines, FftError> {
        let (mi, pos) = memory_shape(from, rank, axis);
        let (mo, _) = memory_shape(to, rank, axis);
        let (n, i, o, batch, calls) = geometry(mi, mo, pos, two);
        let (i, o) = ((&i.0[..], i.1, i.2), (&o.0[..], o.1, o.2));
        use sys::cufftType::{CUFFT_D2Z, CUFFT_Z2D, CUFFT_Z2Z};
        let (fwd, bwd) = if real {
            (
                plan(dev, &n, i, o, CUFFT_D2Z, batch)?,
                Some(plan(dev, &n, o, i, CUFFT_Z2D, batch)?),
            )
        } else {
            (plan(dev, &n, i, o, CUFFT_Z2Z, batch)?, None)
        };
        Ok(Lines { fwd, bwd, calls })
    }
}

/// The distributed real-to-complex transform on the device (halved axis
/// 2); see the module documentation.
pub struct DeviceFft3d {
    dev: Arc<Device>,
    rank: usize,
    input: Layout,
    output: Layout,
    /// One rank: cuFFT's 3D plan.
    single: Option<DeviceR2c>,
    /// How the reshapes travel.
    route: Taken,
    steps: Vec<DeviceStep>,
    work: [CudaSlice<DeviceComplex>; 2],
    /// Device message buffers (doubles) and their host copies.
    dsend: CudaSlice<f64>,
    drecv: CudaSlice<f64>,
    hsend: Vec<f64>,
    hrecv: Vec<f64>,
    pack: CudaFunction,
    unpack: CudaFunction,
}

impl std::fmt::Debug for DeviceFft3d {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceFft3d")
            .field("input", &self.input)
            .field("output", &self.output)
            .field("reshapes", &self.reshapes())
            .finish()
    }
}

/// How the reshapes of a [`DeviceFft3d`] travel between ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// Device to device where every rank is on this machine
    /// ([`gpu::links`]: threads of one process, or processes sharing
    /// buffers through CUDA IPC), through host buffers otherwise.
    Auto,
    /// Packed on the device, copied through host buffers, `alltoallv`.
    Staged,
    /// NCCL sends and receives between device buffers ([`gpu::nccl`]):
    /// one GPU per rank, any number of machines; a rank's own block is
    /// copied on its GPU.
    Nccl,
}

/// The route a plan took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Taken {
    Direct,
    Staged,
    Nccl,
}

impl DeviceFft3d {
    /// Plans the transform of real data in `input` on `dev` (collective).
    /// `options.selection` and `options.output` choose the layouts as on
    /// the host; `options.batch` must be 1. The reshapes go device to
    /// device when every rank is on this machine (`gpu::links`: threads of
    /// one process, or processes sharing buffers through CUDA IPC), through
    /// host buffers and `alltoallv` otherwise (`options.protocol` is not
    /// used).
    pub fn new(
        comm: &dyn Communicator,
        dev: &Arc<Device>,
        input: &Layout,
        options: Options,
    ) -> Result<Self, FftError> {
        Self::build(comm, dev, input, options, Route::Auto, false)
    }

    /// As [`new`](Self::new), with the reshapes always host-staged.
    pub fn host_staged(
        comm: &dyn Communicator,
        dev: &Arc<Device>,
        input: &Layout,
        options: Options,
    ) -> Result<Self, FftError> {
        Self::build(comm, dev, input, options, Route::Staged, false)
    }

    /// As [`new`](Self::new), the reshapes along `route`. [`Route::Nccl`]
    /// is an error, on every rank, where NCCL cannot be loaded on some rank
    /// or two ranks share a GPU.
    pub fn with_route(
        comm: &dyn Communicator,
        dev: &Arc<Device>,
        input: &Layout,
        options: Options,
        route: Route,
    ) -> Result<Self, FftError> {
        Self::build(comm, dev, input, options, route, false)
    }

    /// Whether the reshapes go device to device through [`gpu::links`].
    pub fn is_direct(&self) -> bool {
        self.route == Taken::Direct
    }

    /// How the reshapes travel: `direct`, `staged` or `nccl`.
    pub fn route_name(&self) -> &'static str {
        match self.route {
            Taken::Direct => "direct",
            Taken::Staged => "staged",
            Taken::Nccl => "nccl",
        }
    }

    /// How each reshape of the forward transform travels, as the apps
    /// report it (`DeviceDirect`, `DeviceStaged` or `DeviceNccl`, one per
    /// reshape; empty without one).
    pub fn protocols(&self) -> Vec<String> {
        let name = match self.route {
            Taken::Direct => "DeviceDirect",
            Taken::Staged => "DeviceStaged",
            Taken::Nccl => "DeviceNccl",
        };
        vec![name.to_string(); self.reshapes()]
    }

    fn build(
        comm: &dyn Communicator,
        dev: &Arc<Device>,
        input: &Layout,
        options: Options,
        route: Route,
        loopback: bool,
    ) -> Result<Self, FftError> {
        let p = comm.size();
        let rank = comm.rank();
        if input.ranks() != p {
            return Err(FftError::Invalid(format!(
                "layout grid {:?} holds {} ranks but the communicator has {p}",
                input.dims(),
                input.ranks()
            )));
        }
        if options.batch != 1 {
            return Err(FftError::Invalid(format!(
                "the device transform takes one field at a time, batch {} was asked for (valid: 1)",
                options.batch
            )));
        }
        let g = input.global();
        if g.iter().any(|&n| n > i32::MAX as usize) || input.local_len(rank) > i32::MAX as usize {
            return Err(FftError::Invalid(format!(
                "FFT shape {g:?} out of range for cuFFT's 32-bit plans (valid: at most {} per \
                 axis and per rank)",
                i32::MAX
            )));
        }
        check_cufft().map_err(device)?;
        let kind = Kind::R2C { halved: 2 };
        let planned = plan_steps(input, kind, options, p)?;
        let output = match planned.last() {
            Some(Planned::Reshape { to, .. }) => to.clone(),
            Some(Planned::Fft { layout, .. }) => layout.clone(),
            Some(Planned::Rfft { complex, .. }) => complex.clone(),
            None => unreachable!("a transform has steps"),
        };
        use crate::kernels::{reshape_source, RESHAPE_ENTRIES, RESHAPE_MODULE};
        let pack = dev
            .function(RESHAPE_MODULE, reshape_source, RESHAPE_ENTRIES[0])
            .map_err(device)?;
        let unpack = dev
            .function(RESHAPE_MODULE, reshape_source, RESHAPE_ENTRIES[1])
            .map_err(device)?;
        let single = if p == 1 && input.order() == [0, 1, 2] {
            Some(DeviceR2c::new(dev, g, 1).map_err(device)?)
        } else {
            None
        };
        // Device-to-device reshapes when every rank is on this machine.
        let direct = route == Route::Auto && p > 1 && reach(comm).map_err(link_err)?.is_some();
        // One NCCL communicator for every reshape of the plan.
        let nccl = match route {
            Route::Nccl => Some(NcclComm::new(comm, dev).map_err(link_err)?),
            _ => None,
        };
        static PLANS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let mut plan_no = [PLANS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)];
        comm.broadcast(&mut plan_no, 0)?;
        let tag0 = TAG_BASE + (plan_no[0] % 64) * 256;
        let mut steps = Vec::new();
        // Complex values of a work buffer: the input's doubles, the
        // output, and every layout between.
        let mut work_len = input
            .local_len(rank)
            .div_ceil(2)
            .max(output.local_len(rank));
        // Doubles of the message buffers (the host-staged path needs both,
        // on the device and on the host).
        let (mut send_len, mut recv_len) = (0, 0);
        if single.is_none() {
            let mut i = 0;
            while i < planned.len() {
                // Two transforms in one layout whose axes are the two
                // fastest run as one 2D plan.
                let pair = |a: usize| match planned.get(i + 1) {
                    Some(Planned::Fft { axis, layout }) => {
                        let (_, pa) = memory_shape(layout, rank, a);
                        let (_, pb) = memory_shape(layout, rank, *axis);
                        pa == 2 && pb == 1
                    }
                    _ => false,
                };
                match &planned[i] {
                    Planned::Reshape { from, to, real } => {
                        let esize = if *real { 1 } else { 2 };
                        let mut fwd = Move::new(from, to, rank, p, esize);
                        let mut bwd = Move::new(to, from, rank, p, esize);
                        if direct {
                            // Only this rank's own block goes through
                            // `dsend`; the rest through the links' buffers.
                            let t = tag0 + 4 * steps.len() as u32;
                            fwd.link(comm, dev, t)?;
                            bwd.link(comm, dev, t + 2)?;
                            if fwd.links.is_none() || bwd.links.is_none() {
                                // The driver refused IPC between these
                                // processes (every rank learns it in the
                                // same call): host-staged from the start.
                                drop((fwd, bwd, steps));
                                return Self::build(
                                    comm,
                                    dev,
                                    input,
                                    options,
                                    Route::Staged,
                                    false,
                                );
                            }
                            send_len = send_len
                                .max(fwd.send_counts[rank])
                                .max(bwd.send_counts[rank]);
                        } else if let Some(nc) = &nccl {
                            // As direct: this rank's own block through
                            // `dsend` (unless it loops back through NCCL).
                            let t = tag0 + 4 * steps.len() as u32;
                            fwd.link_nccl(comm, nc, t, loopback)?;
                            bwd.link_nccl(comm, nc, t + 2, loopback)?;
                            send_len = send_len
                                .max(fwd.send_counts[rank])
                                .max(bwd.send_counts[rank]);
                        } else {
                            send_len = send_len.max(fwd.send_len()).max(bwd.send_len());
                            recv_len = recv_len.max(fwd.recv_len()).max(bwd.recv_len());
                        }
                        let per = |n: usize| if *real { n.div_ceil(2) } else { n };
                        work_len = work_len
                            .max(per(from.local_len(rank)))
                            .max(per(to.local_len(rank)));
                        steps.push(DeviceStep::Reshape {
                            fwd: Box::new(fwd),
                            bwd: Box::new(bwd),
                            esize: esize as i32,
                        });
                        i += 1;
                    }
                    Planned::Rfft {
                        axis,
                        real,
                        complex,
                    } => {
                        let two = pair(*axis);
                        work_len = work_len
                            .max(real.local_len(rank).div_ceil(2))
                            .max(complex.local_len(rank));
                        steps.push(DeviceStep::Lines(Lines::new(
                            dev,
                            (real, complex),
                            rank,
                            *axis,
                            two,
                            true,
                        )?));
                        i += if two { 2 } else { 1 };
                    }
                    Planned::Fft { axis, layout } => {
                        let two = pair(*axis);
                        work_len = work_len.max(layout.local_len(rank));
                        steps.push(DeviceStep::Lines(Lines::new(
                            dev,
                            (layout, layout),
                            rank,
                            *axis,
                            two,
                            false,
                        )?));
                        i += if two { 2 } else { 1 };
                    }
                }
            }
        } else {
            work_len = 1;
        }
        let alloc_c = |n: usize, what: &str| dev.alloc_zeros::<DeviceComplex>(n.max(1), what);
        let work = [
            alloc_c(work_len, "FFT work A").map_err(device)?,
            alloc_c(work_len, "FFT work B").map_err(device)?,
        ];
        Ok(DeviceFft3d {
            dev: dev.clone(),
            rank,
            input: input.clone(),
            output,
            single,
            route: if direct {
                Taken::Direct
            } else if nccl.is_some() {
                Taken::Nccl
            } else {
                Taken::Staged
            },
            steps,
            work,
            dsend: dev
                .alloc_zeros(send_len.max(1), "FFT send buffer")
                .map_err(device)?,
            drecv: dev
                .alloc_zeros(recv_len.max(1), "FFT receive buffer")
                .map_err(device)?,
            hsend: vec![0.0; send_len],
            hrecv: vec![0.0; recv_len],
            pack,
            unpack,
        })
    }

    /// The layout of the real input.
    pub fn input_layout(&self) -> &Layout {
        &self.input
    }

    /// The layout of the spectrum (global shape `n0 x n1 x (n2 / 2 + 1)`).
    pub fn output_layout(&self) -> &Layout {
        &self.output
    }

    /// Real values of this rank's input.
    pub fn input_len(&self) -> usize {
        self.input.local_len(self.rank)
    }

    /// Complex values of this rank's spectrum.
    pub fn output_len(&self) -> usize {
        self.output.local_len(self.rank)
    }

    /// Reshapes of one forward transform.
    pub fn reshapes(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, DeviceStep::Reshape { .. }))
            .count()
    }

    fn check(&self, real: usize, spec: usize) -> Result<(), FftError> {
        if real != self.input_len() {
            return Err(FftError::LengthMismatch {
                what: "device FFT real",
                expected: self.input_len(),
                got: real,
            });
        }
        if spec != self.output_len() {
            return Err(FftError::LengthMismatch {
                what: "device FFT spectrum",
                expected: self.output_len(),
                got: spec,
            });
        }
        Ok(())
    }

    /// `spec = FFT(real)`, unnormalised, queued on the device's `main`
    /// stream (the reshapes wait for the device and the other ranks).
    pub fn forward(
        &mut self,
        comm: &dyn Communicator,
        real: &CudaView<'_, f64>,
        spec: &mut CudaSlice<DeviceComplex>,
    ) -> Result<(), FftError> {
        self.check(real.len(), spec.len())?;
        if let Some(s) = &self.single {
            return s.forward(real, spec).map_err(device);
        }
        let main = self.dev.main().clone();
        let n = real.len();
        {
            // SAFETY: a complex value is two doubles (cuFFT's `double2`),
            // and the work buffer holds at least `n / 2` of them.
            let mut w = unsafe { self.work[0].transmute_mut::<f64>(n) }
                .expect("the work buffer holds the input");
            main.memcpy_dtod(real, &mut w).map_err(device)?;
        }
        let mut cur = 0;
        for k in 0..self.steps.len() {
            cur = self.run(comm, k, cur, true)?;
        }
        let out = self.output_len();
        main.memcpy_dtod(&self.work[cur].slice(..out), spec)
            .map_err(device)
    }

    /// `real = IFFT(spec)`, unnormalised (`spec` is left unchanged),
    /// queued on the device's `main` stream.
    pub fn backward(
        &mut self,
        comm: &dyn Communicator,
        spec: &mut CudaSlice<DeviceComplex>,
        real: &mut CudaViewMut<'_, f64>,
    ) -> Result<(), FftError> {
        self.check(real.len(), spec.len())?;
        if let Some(s) = &self.single {
            return s.backward(spec, real).map_err(device);
        }
        let main = self.dev.main().clone();
        let out = self.output_len();
        main.memcpy_dtod(spec, &mut self.work[0].slice_mut(..out))
            .map_err(device)?;
        let mut cur = 0;
        for k in (0..self.steps.len()).rev() {
            cur = self.run(comm, k, cur, false)?;
        }
        let n = real.len();
        // SAFETY: as in `forward`.
        let w = unsafe { self.work[cur].transmute::<f64>(n) }
            .expect("the work buffer holds the output");
        main.memcpy_dtod(&w, real).map_err(device)
    }

    /// Runs step `k` on the data in work buffer `cur`; returns the buffer
    /// that holds the result.
    fn run(
        &mut self,
        comm: &dyn Communicator,
        k: usize,
        cur: usize,
        forward: bool,
    ) -> Result<usize, FftError> {
        let main = self.dev.main().clone();
        let DeviceFft3d {
            dev,
            steps,
            work,
            dsend,
            drecv,
            hsend,
            hrecv,
            pack,
            unpack,
            rank,
            ..
        } = self;
        let [w0, w1] = work;
        let (src, dst) = if cur == 0 { (w0, w1) } else { (w1, w0) };
        let count = |b: &Block| b.n.iter().product::<i64>() as usize;
        match &mut steps[k] {
            DeviceStep::Reshape { fwd, bwd, esize } => {
                let mv = if forward { fwd } else { bwd };
                let esize: i32 = *esize;
                let es = esize as usize;
                // SAFETY (every launch below): the kernels' arguments match;
                // a block lies inside its rank's array of the source or
                // destination layout (an intersection with its box), and
                // `at + count` inside the message buffer it is packed into
                // or unpacked from (the host-staged buffers are sized for
                // the largest move, a link's buffer for its block).
                let pack_into = |src: &CudaSlice<DeviceComplex>,
                                 msg: &mut CudaViewMut<'_, f64>,
                                 b: &Block|
                 -> Result<(), FftError> {
                    let mut l = main.launch_builder(pack);
                    l.arg(src).arg(msg).arg(b).arg(&esize);
                    unsafe { l.launch(launch_1d((count(b) * es).min(1 << 20), 256)) }
                        .map_err(device)?;
                    Ok(())
                };
                let unpack_from = |msg: &CudaView<'_, f64>,
                                   dst: &mut CudaSlice<DeviceComplex>,
                                   b: &Block|
                 -> Result<(), FftError> {
                    let mut l = main.launch_builder(unpack);
                    l.arg(msg).arg(dst).arg(b).arg(&esize);
                    unsafe { l.launch(launch_1d((count(b) * es).min(1 << 20), 256)) }
                        .map_err(device)?;
                    Ok(())
                };
                // This rank's own block, packed into `dsend` and unpacked
                // from it.
                let copy_own = |src: &CudaSlice<DeviceComplex>,
                                dst: &mut CudaSlice<DeviceComplex>,
                                (send, recv): (&Block, &Block),
                                dsend: &mut CudaSlice<f64>|
                 -> Result<(), FftError> {
                    if count(send) == 0 {
                        return Ok(());
                    }
                    pack_into(src, &mut dsend.slice_mut(..), &Block { at: 0, ..*send })?;
                    unpack_from(&dsend.slice(..), dst, &Block { at: 0, ..*recv })
                };
                if let Some(links) = &mut mv.nccl {
                    // NCCL: each peer's block into its link's buffer, the
                    // group on the links' stream, this rank's own block
                    // through `dsend` meanwhile (or through NCCL too).
                    for (j, &q) in mv.link_out.iter().enumerate() {
                        let b = Block {
                            at: 0,
                            ..mv.send[q]
                        };
                        pack_into(src, &mut links.outgoing(j), &b)?;
                    }
                    let round = links.post(comm).map_err(link_err)?;
                    let me = *rank;
                    if !mv.link_out.contains(&me) {
                        copy_own(src, dst, (&mv.send[me], &mv.recv[me]), dsend)?;
                    }
                    let unpacked = (|| {
                        while let Some(j) = links.arrival(comm, round).map_err(link_err)? {
                            let b = Block {
                                at: 0,
                                ..mv.recv[mv.link_in[j]]
                            };
                            unpack_from(&links.incoming(j), dst, &b)?;
                        }
                        Ok::<_, FftError>(())
                    })();
                    // What an error left in flight is received.
                    let drained = links.drain(comm).map_err(link_err);
                    unpacked?;
                    drained?;
                    return Ok(1 - cur);
                }
                if let Some(links) = &mut mv.links {
                    // Device to device: each peer's block into its link's
                    // buffer, this rank's own through `dsend`.
                    links.begin(comm).map_err(link_err)?;
                    for (j, &q) in mv.link_out.iter().enumerate() {
                        let b = Block {
                            at: 0,
                            ..mv.send[q]
                        };
                        let mut buf = links.outgoing(j);
                        pack_into(src, &mut buf.slice_mut(..), &b)?;
                    }
                    let round = links.post(comm).map_err(link_err)?;
                    let me = *rank;
                    copy_own(src, dst, (&mv.send[me], &mv.recv[me]), dsend)?;
                    while let Some(j) = links.arrival(comm, round).map_err(link_err)? {
                        let b = Block {
                            at: 0,
                            ..mv.recv[mv.link_in[j]]
                        };
                        let read = {
                            let inc = links.incoming(j);
                            unpack_from(&inc.view(), dst, &b)
                        };
                        let acked = links.consumed(comm, j, round).map_err(link_err);
                        read?;
                        acked?;
                    }
                    return Ok(1 - cur);
                }
                for b in mv.send.iter().filter(|b| count(b) > 0) {
                    pack_into(src, &mut dsend.slice_mut(..), b)?;
                }
                let (ns, nr) = (mv.send_len(), mv.recv_len());
                dev.copy_to_host(&dsend.slice(..ns), &mut hsend[..ns])
                    .map_err(device)?;
                comm.alltoallv(
                    &hsend[..ns],
                    &mv.send_counts,
                    &mv.send_displs,
                    &mut hrecv[..nr],
                    &mv.recv_counts,
                    &mv.recv_displs,
                )?;
                dev.copy_to_device(&hrecv[..nr], drecv).map_err(device)?;
                for b in mv.recv.iter().filter(|b| count(b) > 0) {
                    unpack_from(&drecv.slice(..), dst, b)?;
                }
                Ok(1 - cur)
            }
            DeviceStep::Lines(Lines {
                fwd,
                bwd: Some(bwd),
                calls,
            }) => {
                let (rlen, clen) = (2 * src.len(), dst.len());
                for &(a, b) in calls.iter() {
                    if forward {
                        // SAFETY: as in `forward`: complex values are pairs of
                        // doubles.
                        let r = unsafe { src.transmute::<f64>(rlen) }.expect("fits");
                        let mut o = dst.slice_mut(b..clen);
                        fwd.exec_d2z(&r.slice(a..), &mut o)
                            .map_err(cufft_err("cufftExecD2Z"))?;
                    } else {
                        // Backward: complex in `src` (at `b`), real out (at `a`).
                        let mut i = src.slice_mut(b..);
                        // SAFETY: as above.
                        let mut r = unsafe { dst.transmute_mut::<f64>(2 * clen) }.expect("fits");
                        let mut o = r.slice_mut(a..);
                        bwd.exec_z2d(&mut i, &mut o)
                            .map_err(cufft_err("cufftExecZ2D"))?;
                    }
                }
                Ok(1 - cur)
            }
            DeviceStep::Lines(Lines { fwd, calls, .. }) => {
                let dir = if forward {
                    FftDirection::Forward
                } else {
                    FftDirection::Inverse
                };
                for &(a, _) in calls.iter() {
                    let (mut i, mut o) = (src.slice_mut(a..), dst.slice_mut(a..));
                    fwd.exec_z2z(&mut i, &mut o, dir)
                        .map_err(cufft_err("cufftExecZ2Z"))?;
                }
                Ok(1 - cur)
            }
        }
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

    /// The distributed device transform against the host's `Fft3d` (the
    /// same plan, so the same output layout) on 1 to 4 in-process ranks
    /// sharing device 0: bricks, pencils and slabs split along each axis,
    /// both output layouts and both selections, odd and even extents. The
    /// spectra agree to 1e-12 of their largest magnitude (cuFFT and the
    /// host's transforms round differently, a few eps per value), and
    /// backward(forward(x)) = N x to 1e-12.
    #[test]
    fn distributed_transform_matches_the_host() {
        let Ok(d) = Device::open(0) else {
            eprintln!("skipped: no CUDA device");
            return;
        };
        let d = Arc::new(d);
        use crate::{Output, Selection};
        let global = [10, 12, 14];
        let mut cases: Vec<(usize, Layout)> = vec![(1, Layout::bricks(global, 1).unwrap())];
        for p in [2, 3, 4] {
            cases.push((p, Layout::bricks(global, p).unwrap()));
            for a in 0..3 {
                cases.push((p, Layout::slabs(global, p, a).unwrap()));
                cases.push((p, Layout::pencils(global, p, a).unwrap()));
            }
        }
        cases.push((2, Layout::slabs([9, 7, 11], 2, 0).unwrap()));
        cases.push((3, Layout::bricks([9, 7, 11], 3).unwrap()));
        for (p, input) in cases {
            for output in [Output::Input, Output::Transposed] {
                for selection in [Selection::MinReshape, Selection::Pencils] {
                    let (d, input) = (d.clone(), input.clone());
                    comm::local::run(p, move |comm| {
                        for staged in [false, true] {
                            let what = format!("staged {staged}");
                            let plan = |comm: &dyn Communicator, opts| {
                                if staged {
                                    DeviceFft3d::host_staged(comm, &d, &input, opts)
                                } else {
                                    DeviceFft3d::new(comm, &d, &input, opts)
                                }
                            };
                            let plan =
                                agrees_with_host(comm, &d, &input, output, selection, plan, &what)?;
                            assert_eq!(plan.is_direct(), !staged && p > 1);
                            assert_eq!(
                                plan.route_name(),
                                if !staged && p > 1 { "direct" } else { "staged" }
                            );
                            let name = if !staged && p > 1 {
                                "DeviceDirect"
                            } else {
                                "DeviceStaged"
                            };
                            assert_eq!(plan.protocols(), vec![name.to_string(); plan.reshapes()]);
                        }
                        Ok::<_, FftError>(())
                    })
                    .unwrap();
                }
            }
        }
    }

    /// The NCCL reshape path (blocks packed into the links' buffers, one
    /// NCCL group, unpacked from the receive buffers) moves every element
    /// to its place: one rank, its own block sent to itself through NCCL
    /// (a plan on one rank never reshapes, so the step is put in by hand),
    /// from memory order [0, 1, 2] to each other order and back, complex
    /// and real elements, three rounds each way on the same links. The
    /// places are checked against the layouts' own index maps.
    #[test]
    fn nccl_reshapes_put_every_element_in_place() {
        let Ok(d) = Device::open(0) else {
            eprintln!("skipped: no CUDA device");
            return;
        };
        let d = Arc::new(d);
        comm::local::run(1, move |comm| {
            let from = Layout::bricks([10, 12, 14], 1)?;
            let n = from.local_len(0);
            let nccl = NcclComm::new(comm, &d).map_err(link_err)?;
            let mut plan =
                DeviceFft3d::build(comm, &d, &from, Options::default(), Route::Nccl, true)?;
            assert_eq!(plan.route_name(), "nccl");
            let alloc_c = |what| d.alloc_zeros::<DeviceComplex>(n, what).map_err(device);
            plan.work = [alloc_c("work A")?, alloc_c("work B")?];
            plan.dsend = d.alloc_zeros(2 * n, "send").map_err(device)?;
            // The value of global cell g, element part c.
            let value = |g: [usize; 3], c: usize| {
                (g[0] * 10_000 + g[1] * 100 + g[2]) as f64 + 0.5 * c as f64
            };
            for order in [[0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] {
                let to = from.with_order(order)?;
                for esize in [1usize, 2] {
                    let mut fwd = Move::new(&from, &to, 0, 1, esize);
                    let mut bwd = Move::new(&to, &from, 0, 1, esize);
                    fwd.link_nccl(comm, &nccl, TAG_BASE, true)?;
                    bwd.link_nccl(comm, &nccl, TAG_BASE + 2, true)?;
                    assert_eq!((fwd.link_out.len(), fwd.link_in.len()), (1, 1));
                    plan.steps = vec![DeviceStep::Reshape {
                        fwd: Box::new(fwd),
                        bwd: Box::new(bwd),
                        esize: esize as i32,
                    }];
                    // The array in `layout`'s memory order, `esize` doubles
                    // an element, as the work buffers hold it.
                    let array = |layout: &Layout| {
                        let mut a = vec![0.0; n * esize];
                        layout.for_each_local(0, |g, o| {
                            for c in 0..esize {
                                a[o * esize + c] = value(g, c);
                            }
                        });
                        a
                    };
                    let (want_to, want_from) = (array(&to), array(&from));
                    let put = |plan: &mut DeviceFft3d, i: usize, host: &[f64]| {
                        // SAFETY: a complex value is two doubles.
                        let mut v =
                            unsafe { plan.work[i].transmute_mut::<f64>(2 * n) }.expect("fits");
                        d.main()
                            .memcpy_htod(host, &mut v.slice_mut(..host.len()))
                            .map_err(device)
                    };
                    let get = |plan: &DeviceFft3d, i: usize, len: usize| {
                        // SAFETY: as above.
                        let v = unsafe { plan.work[i].transmute::<f64>(2 * n) }.expect("fits");
                        let mut h = vec![0.0; len];
                        d.copy_to_host(&v.slice(..len), &mut h)
                            .map(|_| h)
                            .map_err(device)
                    };
                    for round in 0..3 {
                        put(&mut plan, 0, &want_from)?;
                        assert_eq!(plan.run(comm, 0, 0, true)?, 1);
                        let got = get(&plan, 1, n * esize)?;
                        assert!(
                            got == want_to,
                            "{order:?} esize {esize} round {round}: forward"
                        );
                        put(&mut plan, 0, &vec![f64::NAN; n * esize])?;
                        assert_eq!(plan.run(comm, 0, 1, false)?, 0);
                        let back = get(&plan, 0, n * esize)?;
                        assert!(
                            back == want_from,
                            "{order:?} esize {esize} round {round}: backward"
                        );
                    }
                }
            }
            Ok::<_, FftError>(())
        })
        .unwrap();
    }

    /// NCCL refuses two ranks on one GPU: every rank gets the reason.
    #[test]
    fn nccl_reshapes_need_a_gpu_per_rank() {
        let Ok(d) = Device::open(0) else {
            eprintln!("skipped: no CUDA device");
            return;
        };
        let d = Arc::new(d);
        let errs = comm::local::run(2, move |comm| {
            let input = Layout::slabs([8, 8, 8], 2, 0)?;
            let e = DeviceFft3d::with_route(comm, &d, &input, Options::default(), Route::Nccl)
                .unwrap_err();
            Ok::<_, FftError>(e.to_string())
        })
        .unwrap();
        for e in errs {
            assert!(
                e.contains("one GPU per rank") && e.contains("ranks 0 and 1"),
                "{e}"
            );
        }
    }

    /// This rank's values of a test input in `input`'s memory order.
    fn sample(input: &Layout, rank: usize) -> Vec<f64> {
        let b = input.box_of(rank);
        let mut x = Vec::with_capacity(b.len());
        let order = input.order();
        let sh = b.shape();
        let m = order.map(|a| sh[a]);
        for i0 in 0..m[0] {
            for i1 in 0..m[1] {
                for i2 in 0..m[2] {
                    let mut q = [0; 3];
                    q[order[0]] = b.lo[order[0]] + i0;
                    q[order[1]] = b.lo[order[1]] + i1;
                    q[order[2]] = b.lo[order[2]] + i2;
                    let v = (q[0] * 131 + q[1] * 17 + q[2] * 7 % 23) as f64;
                    x.push((0.37 * v).sin() + 0.1 * q[2] as f64);
                }
            }
        }
        x
    }

    /// Plans with `plan` and checks that the forward transform agrees
    /// with the host's to 1e-12 of the largest magnitude (cuFFT and the
    /// host's transforms round differently, a few eps per value), and
    /// backward(forward(x)) = N x to 1e-12. Returns the plan.
    fn agrees_with_host(
        comm: &dyn Communicator,
        d: &Arc<Device>,
        input: &Layout,
        output: crate::Output,
        selection: crate::Selection,
        plan: impl Fn(&dyn Communicator, Options) -> Result<DeviceFft3d, FftError>,
        what: &str,
    ) -> Result<DeviceFft3d, FftError> {
        use crate::{Fft3d, Normalization};
        let p = comm.size();
        let opts = Options {
            output,
            selection,
            normalization: Normalization::None,
            ..Options::default()
        };
        let n: usize = input.global().iter().product();
        let x = sample(input, comm.rank());
        let mut host = Fft3d::r2c(comm, input, 2, opts)?;
        let mut want = vec![num_complex::Complex64::default(); host.output_len()];
        let mut scratch = vec![num_complex::Complex64::default(); host.scratch_len()];
        host.forward(comm, &x, &mut want, &mut scratch)?;
        let mut plan = plan(comm, opts)?;
        assert_eq!(plan.output_layout(), host.output_layout());
        assert_eq!(plan.reshapes(), host.reshapes());
        let xd = d.upload(&x, "x").unwrap();
        let mut spec = d
            .alloc_zeros::<DeviceComplex>(plan.output_len(), "spec")
            .unwrap();
        plan.forward(comm, &xd.slice(..), &mut spec)?;
        let got = d.download(&spec).unwrap();
        let big = want.iter().map(|z| z.norm()).fold(0.0, f64::max);
        let big = comm.allreduce_scalar(big, comm::ReduceOp::Max)?;
        for (q, (a, w)) in got.iter().zip(&want).enumerate() {
            let e = (a.x - w.re).abs().max((a.y - w.im).abs());
            assert!(
                e <= 1e-12 * big,
                "{p} ranks {:?} {output:?} {selection:?} {what}: value {q}: {a:?} vs {w}",
                input.dims()
            );
        }
        let mut back = d.alloc_zeros::<f64>(x.len(), "back").unwrap();
        plan.backward(comm, &mut spec, &mut back.slice_mut(..))?;
        let back = d.download(&back).unwrap();
        let top = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for (q, (a, w)) in back.iter().zip(&x).enumerate() {
            assert!(
                (a / n as f64 - w).abs() <= 1e-12 * top.max(1.0),
                "{what}: round trip at {q}: {} vs {w}",
                a / n as f64
            );
        }
        Ok(plan)
    }

    /// Wrong buffers and batches are refused with the lengths involved.
    #[test]
    fn device_transform_refuses_bad_input() {
        let Ok(d) = Device::open(0) else {
            eprintln!("skipped: no CUDA device");
            return;
        };
        let d = Arc::new(d);
        comm::local::run(2, move |comm| {
            let input = Layout::slabs([8, 8, 8], 2, 0).unwrap();
            let e = DeviceFft3d::new(
                comm,
                &d,
                &input,
                Options {
                    batch: 2,
                    ..Options::default()
                },
            )
            .unwrap_err();
            assert!(e.to_string().contains("batch 2"), "{e}");
            let mut plan = DeviceFft3d::new(comm, &d, &input, Options::default()).unwrap();
            let x = d.alloc_zeros::<f64>(7, "x").unwrap();
            let mut spec = d
                .alloc_zeros::<DeviceComplex>(plan.output_len(), "spec")
                .unwrap();
            let e = plan.forward(comm, &x.slice(..), &mut spec).unwrap_err();
            assert!(e.to_string().contains("holds 7"), "{e}");
            Ok::<_, FftError>(())
        })
        .unwrap();
    }
}
