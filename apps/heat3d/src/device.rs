//! The CUDA backend (feature `cuda`, `--backend cuda`).
//!
//! The field and its scratch copies live on the device as
//! [`halo::DeviceField`]s; the halo goes through the same
//! [`halo::Exchanger`] as on the host, packed and unpacked by kernels
//! (host-staged between ranks, device-to-device for periodic
//! self-neighbours), so any number of ranks may share a GPU. The stencil is
//! one fused kernel per order (`kernels/heat3d.cu`, compiled by NVRTC for
//! the radius in use) that performs the host sweep's operations in the same
//! order without contraction, so the device gives the host's bits.
//!
//! **Overlap.** After `post` (pack, send, and the periodic self-copies
//! queued on the `main` stream) the interior sweep runs on the device's
//! `side` stream while the messages travel and `main` unpacks and sweeps
//! the shell; `main` then waits for `side`. The interior reads no ghost
//! cell that a message fills (only owned cells and self-copied ghosts,
//! which `side` waits for), and the unpack writes only such ghosts, so the
//! two never touch the same memory, and blocking and overlapped steps give
//! the same bits.
//!
//! **Step times** are measured with device events on `main` around each
//! step (the host's phase timers would only time kernel launches), so the
//! report's `step` is device time; `post` and `wait` stay host times of the
//! exchange.

use crate::config::{Config, GpuExchange, GpuPeriodic, GpuStencil, Integrator, Mode};
use crate::StepTimes;
use anyhow::{anyhow, Result};
use comm::Communicator;
use dfft::cuda::{DeviceComplex, DeviceFft3d, Route};
use gpu::cuda::cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use gpu::cuda::{launch_1d, Device, StepTimer};
use halo::{
    DeviceExchanger, DeviceField, DeviceRegion, Field, FieldLayout, Region, Topology, Transport,
};
use std::sync::Arc;
use std::time::Instant;
use stencil::Sweep;

/// The geometry of a step: layout, owned region, interior, shell.
pub(crate) type Geometry<'a> = (&'a FieldLayout, &'a Region, &'a Region, &'a [Region]);

/// Which stencil kernel `Kernels::fd` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// `fd_sweep`: one cell a thread along the last axis.
    Sweep,
    /// `fd_tiled`: 32 x 8 blocks with a shared-memory tile.
    Tiled,
    /// `fd_pairs`: two cells a thread along the last axis, 16-byte loads.
    Pairs,
    /// `fd_shuffle`: warps across the last axis, its neighbours shuffled.
    Shuffle,
}

/// Owned cells from which `pairs` at order 2 launches 32 x 8 blocks of 8
/// cells a thread: 2^26, between the sizes where each shape was measured
/// faster (256^3 = 2^24 for 128 x 2 with 4 cells, 512^3 = 2^27 for 32 x 8).
const TALL_BLOCKS: usize = 1 << 26;

/// The orders at which `auto` takes `pairs` and `shuffle`; `cached` at the
/// others (10 and 16).
const AUTO_PAIRS: [usize; 6] = [2, 4, 6, 8, 12, 18];
const AUTO_SHUFFLE: [usize; 2] = [14, 20];

/// The stencil kernel and launch shape for `cfg` on `layout`. `auto` takes
/// the fastest of `cached`, `pairs` and `shuffle` measured per order on an
/// H200 at 256^3 and 512^3 (heat3d, one rank, blocking Euler; README):
/// `pairs` at orders 2, 4, 6, 8, 12 and 18, `shuffle` at 14 and 20 (their
/// many fast-axis loads a cell are where the shuffles pay), `cached` at 10
/// and 16. `pairs` runs in 32 x 8 blocks of 8 cells a thread along axis
/// 0, which read the field about 1.7 times through L2 where 128 x 2
/// blocks read it 2.5 times (`tune/NOTES.md`); only at order 2 below
/// [`TALL_BLOCKS`] owned cells do 128 x 2 blocks of 4 cells win. `pairs`
/// needs padded rows and planes of even length (16-byte aligned pairs)
/// and falls back to `cached` otherwise; `cached` and `shuffle` run 32
/// cells a thread in 32 x 8 blocks (8 cells in 128 x 2 at order 2).
/// Returns (kernel, cells along axis 0, block width).
fn stencil_choice(cfg: &Config, layout: &FieldLayout) -> (Kernel, usize, u32) {
    let s = layout.strides();
    let even = s[0].is_multiple_of(2) && s[1].is_multiple_of(2);
    let kernel = match cfg.gpu_stencil {
        GpuStencil::Shared => Kernel::Tiled,
        GpuStencil::Shuffle => Kernel::Shuffle,
        GpuStencil::Pairs if even => Kernel::Pairs,
        GpuStencil::Auto if even && AUTO_PAIRS.contains(&cfg.order) => Kernel::Pairs,
        GpuStencil::Auto if AUTO_SHUFFLE.contains(&cfg.order) => Kernel::Shuffle,
        _ => Kernel::Sweep,
    };
    let cells: usize = layout.owned.iter().product();
    let (chunk, block) = match kernel {
        Kernel::Pairs if cfg.order == 2 && cells < TALL_BLOCKS => (4, 128),
        Kernel::Pairs => (8, 32),
        Kernel::Sweep if cfg.order == 2 => (8, 128),
        Kernel::Sweep | Kernel::Tiled | Kernel::Shuffle => (32, 32),
    };
    let chunk = if cfg.gpu_chunk > 0 {
        cfg.gpu_chunk
    } else {
        chunk
    };
    let block = if cfg.gpu_block > 0 {
        cfg.gpu_block as u32
    } else {
        block
    };
    (kernel, chunk, block)
}

/// Whether one self-periodic rank's stencil reads across its faces at
/// the periodic images (`gpu_periodic`) rather than from ghosts filled by
/// the halo's self-copies. `auto` reads at orders 2 and 4, where it
/// measured faster on an H200 (heat3d, blocking Euler, ms a step, read /
/// copy: FD-2 0.0796 / 0.0929 at 256^3 and 0.576 / 0.630 at 512^3, FD-4
/// 0.104 / 0.125 and 0.842 / 0.913); from order 6 the periodic variants'
/// extra registers cost more than the copies (FD-6 1.352 / 0.901 at
/// 512^3, FD-8 1.593 / 1.021).
fn periodic_reads(cfg: &Config) -> bool {
    match cfg.gpu_periodic {
        GpuPeriodic::Read => true,
        GpuPeriodic::Copy => false,
        GpuPeriodic::Auto => cfg.order <= 4,
    }
}

/// Owned cells from which the default passes two Euler steps at a time
/// (where possible): measured on an H200 (heat3d, blocking Euler, ms a
/// step), two steps a pass took 0.494 ms at 512^3 against 0.570 for one,
/// and 0.075 at 256^3 (with [`two_chunk`]'s 52 planes a block) against
/// 0.079-0.080. Smaller boxes were not measured.
const AUTO_TWO_CELLS: usize = 1 << 24;

/// The Euler steps one pass of the stencil advances (`steps_per_pass`)
/// for a run of `ranks` ranks in which one rank that is its own periodic
/// neighbour reads across its faces (`wrap`, see [`periodic_reads`]). Two
/// (`fd_two`) need `wrap` and order 2 besides [`crate::multi_step_unmet`]'s
/// conditions (at order 4 the same scheme measured 1.8 times slower than
/// one step a pass: its output tile, 32 - 4R cells wide, keeps 56 % of
/// the threads' cells, and its queues and shared rings double); the
/// default takes two where possible from [`AUTO_TWO_CELLS`] owned cells.
fn steps_per_pass(cfg: &Config, ranks: usize, wrap: bool) -> Result<usize> {
    let mut unmet = crate::multi_step_unmet(cfg);
    if !wrap {
        unmet.insert(
            0,
            format!(
                "one rank that is its own periodic neighbour and reads across its faces (this run: {ranks} rank(s), gpu_periodic {:?}, owned cells at least the radius along every axis)",
                cfg.gpu_periodic
            ),
        );
    }
    if cfg.order != 2 {
        unmet.push(format!("order 2 (this run: {})", cfg.order));
    }
    let cells: usize = cfg.shape().iter().product();
    let auto = if cells >= AUTO_TWO_CELLS { 2 } else { 1 };
    crate::resolve_steps_per_pass(cfg.steps_per_pass, &unmet, auto, 2, "a GPU")
}

/// `fd_two`'s output planes a block marches along axis 0, for a device
/// that runs `slots` of its blocks at once (SMs times resident blocks an
/// SM): the chunk in 16..=64 that minimises the launch's waves of blocks
/// times the planes a block passes over (its chunk and 8 more, the fill of
/// its queues), the larger on a tie. A last wave that holds a few blocks
/// costs as much as a full one: on an H200 (132 SMs, 2 blocks each) at
/// 256^3, where 100 tiles make a block a plane, chunks 52 / 26 / 20 (1.9,
/// 3.8 and 4.9 waves) took 0.075 / 0.078 / 0.078 ms a step, but 32 / 43 /
/// 64 (3.03, 2.27 and 1.52 waves) 0.080 / 0.089 / 0.088; at 512^3 64 (10.9
/// waves) took 0.495, 58 / 52 / 40 0.500 / 0.504 / 0.506.
fn two_chunk(owned: [usize; 3], slots: usize) -> usize {
    let slots = slots.max(1);
    (16..=64)
        .rev()
        .min_by_key(|&c| {
            let (gx, gy, gz) = two_grid(owned, 1, c);
            let blocks = gx as usize * gy as usize * gz as usize;
            blocks.div_ceil(slots) * (c + 8)
        })
        .expect("a non-empty range")
}

/// `fd_two`'s grid on `owned` cells at radius `r` with `chunk` output
/// planes a block: output tiles of (32 - 4r) x (rows - 4r) cells.
fn two_grid(owned: [usize; 3], r: usize, chunk: usize) -> (u32, u32, u32) {
    let rows = TWO_STEP.0 * TWO_STEP.1 as usize;
    (
        owned[2].div_ceil(32 - 4 * r) as u32,
        owned[1].div_ceil(rows - 4 * r) as u32,
        owned[0].div_ceil(chunk) as u32,
    )
}

/// The ghost layers a device field allocates for a stencil of `radius`:
/// `radius` on the two slow axes and, on the last, `radius` rounded up to
/// 4 cells (32 bytes), so that with a row length divisible by 4 every
/// row's owned cells start on a 32-byte sector and no store of a sweep
/// shares a sector with a ghost cell.
pub(crate) fn ghost(radius: usize) -> [usize; 3] {
    [radius, radius, radius.next_multiple_of(4)]
}

/// The kernels' `struct Regions`: up to six regions of one stencil
/// launch, with each one's chunk, block grid (x, y) and first block.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Regions {
    b: [DeviceRegion; 6],
    chunk: [i32; 6],
    gx: [i32; 6],
    gy: [i32; 6],
    first: [i32; 7],
    count: i32,
}

// SAFETY: plain `repr(C)` integers and `DeviceRegion`s, laid out as the
// kernels' `struct Regions` (which asserts the same size).
unsafe impl DeviceRepr for Regions {}
const _: () = assert!(std::mem::size_of::<Regions>() == 248);

struct Kernels {
    /// The stencil (`gpu_stencil`).
    fd: CudaFunction,
    /// The same stencil reading across the faces at the periodic images
    /// (one self-periodic rank's owned box, [`DeviceSolver::wrap`]).
    fd_wrap: CudaFunction,
    /// The same stencil over several regions in one launch.
    many: CudaFunction,
    /// Which kernel `fd` is.
    kernel: Kernel,
    rk: CudaFunction,
    scale: CudaFunction,
    /// Two Euler steps a pass (`fd_two`), where [`DeviceSolver::fuse`].
    two: Option<CudaFunction>,
}

/// `fd_two`'s block: rows of cells a thread and rows of threads (the
/// kernels' `TWO_RJ` and `TWO_BY`); the block is 32 x `TWO_STEP.1`.
const TWO_STEP: (usize, u32) = (4, 8);

/// The spectral operator on the device.
struct Spectral {
    plan: DeviceFft3d,
    spec: CudaSlice<DeviceComplex>,
    factor: CudaSlice<f64>,
}

/// The device state of one rank.
pub(crate) struct DeviceSolver {
    dev: Arc<Device>,
    u: DeviceField,
    a: Option<DeviceField>,
    b: Option<DeviceField>,
    c: Option<DeviceField>,
    k: Kernels,
    /// The smallest step that wrote a non-finite value (`i32::MAX`: none).
    bad: CudaSlice<i32>,
    euler: [f64; 31],
    lap: [f64; 31],
    spectral: Option<Spectral>,
    /// The halo exchange (finite differences).
    ex: Option<DeviceExchanger<f64>>,
    /// Cells each thread of the stencil marches along axis 0.
    chunk: i32,
    /// Threads of a stencil block along the last axis (of 256).
    block: u32,
    step: i32,
    /// One rank that is its own periodic face neighbour on every axis, at
    /// least `radius` cells along each, reading across its faces at the
    /// periodic images (`gpu_periodic`, see [`periodic_reads`]): in
    /// blocking mode the stencil reads no ghost (the kernels' `_wrap` entries) and
    /// no exchange runs.
    wrap: bool,
    /// Two Euler steps a pass (`steps_per_pass`): one self-periodic
    /// rank (`wrap`) in blocking mode, Euler, order 2.
    fuse: bool,
    /// The stencil radius.
    radius: usize,
    /// Output planes a block of `fd_two` marches along axis 0.
    two_chunk: usize,
    /// Device time of each pass.
    timer: StepTimer,
    /// The steps each timed pass advanced (1 or 2).
    per_pass: Vec<usize>,
}

/// Makes `main` wait for the work queued on `side` so far when dropped,
/// so that every path out of a step that used `side` (an error included)
/// orders that work before the frees on `main` of the buffers it touched.
struct JoinSide<'a>(&'a Device);

impl JoinSide<'_> {
    /// The join, with its error.
    fn join(self) -> Result<()> {
        let r = self.0.join_side().map_err(gpu_err);
        std::mem::forget(self);
        r
    }
}

impl Drop for JoinSide<'_> {
    fn drop(&mut self) {
        // On an error path: the step's own error is the one reported.
        let _ = self.0.join_side();
    }
}

fn gpu_err(e: gpu::GpuError) -> anyhow::Error {
    anyhow!(e)
}

/// This rank's device and how many ranks of its machine use it
/// (collective): `--device` for every rank, or by default the rank's index
/// among the ranks of its machine modulo the device count.
fn ordinal(comm: &dyn Communicator, cfg: &Config) -> Result<(usize, usize)> {
    let count = gpu::cuda::device_count().map_err(gpu_err)?;
    let (local, on_node) = gpu::links::node_ranks(comm).map_err(|e| anyhow!("{e}"))?;
    Ok(match cfg.device {
        Some(d) => (d, on_node),
        None => {
            let ord = local % count.max(1);
            (
                ord,
                (0..on_node).filter(|r| r % count.max(1) == ord).count(),
            )
        }
    })
}

/// Opens this rank's device and checks, before anything is allocated, that
/// the memory this rank and the other ranks on its GPU need is free.
pub(crate) fn preflight(
    comm: &dyn Communicator,
    cfg: &Config,
    layout: &FieldLayout,
    rk: bool,
    spectral: bool,
) -> Result<Arc<Device>> {
    let (ord, sharing) = ordinal(comm, cfg)?;
    let dev = Device::open(ord).map_err(gpu_err)?;
    let fields = if spectral {
        1
    } else if rk {
        4
    } else {
        2
    };
    let mut bytes = fields * layout.padded_len() * 8;
    if spectral {
        // This rank's share of the half spectrum: the spectrum and its
        // factors, and on several ranks the transform's two work buffers
        // and its message buffers (about two spectra each).
        let s = cfg.shape();
        let share = (s[0] * s[1] * (s[2] / 2 + 1)).div_ceil(comm.size());
        bytes += share * (16 + 8);
        if comm.size() > 1 {
            bytes += share * 4 * 16;
        }
    }
    let need = bytes * sharing;
    let (free, total) = dev.memory().map_err(gpu_err)?;
    // Every rank measures before any allocates (the reduction is the
    // barrier; otherwise a rank measuring late would see another's fields
    // already taken and refuse by the timing), and all refuse together.
    let mut refused = [i64::from(need > free)];
    comm.allreduce_i64(&mut refused, comm::ReduceOp::Max)?;
    if refused[0] != 0 && need <= free {
        return Err(anyhow!(
            "another rank found too little free memory on its device (see its error)"
        ));
    }
    if need > free {
        return Err(anyhow!(gpu::GpuError::OutOfMemory {
            what: format!(
                "the {:?} grid ({} field(s){} on each of {sharing} rank(s) sharing the device)",
                cfg.shape(),
                fields,
                if spectral { " and the spectrum" } else { "" }
            ),
            device: ord,
            bytes: need,
            free,
            total,
        })
        .context("use fewer cells, more GPUs, or the cpu backend"));
    }
    Ok(Arc::new(dev))
}

impl DeviceSolver {
    /// Uploads the initial field to `dev` (from [`preflight`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        dev: Arc<Device>,
        comm: &dyn Communicator,
        topo: &Topology,
        cfg: &Config,
        u0: &Field<f64>,
        (euler, lap): (&Sweep, &Sweep),
        dt: f64,
        rk: bool,
        spectral: bool,
    ) -> Result<Self> {
        let layout = u0.layout();
        let cells: usize = cfg.shape().iter().product();
        let field = |name: &str| -> Result<DeviceField> {
            DeviceField::new(&dev, layout, name).map_err(|e| {
                anyhow!(e).context(format!(
                    "allocating the {:?} grid ({cells} cells over {} rank(s)) on the device",
                    cfg.shape(),
                    comm.size()
                ))
            })
        };
        let mut u = field("field u")?;
        u.upload(u0).map_err(gpu_err)?;
        let a = if spectral {
            None
        } else {
            Some(field("scratch a")?)
        };
        let (b, c) = if rk {
            (Some(field("stage b")?), Some(field("stage c")?))
        } else {
            (None, None)
        };
        let radius = if spectral { 1 } else { cfg.order / 2 };
        let module = crate::kernels::module_name(radius);
        let src = || crate::kernels::source(radius);
        let f = |name: &str| dev.function(&module, src, name).map_err(gpu_err);
        let (kernel, chunk, block) = stencil_choice(cfg, &layout);
        let name = match kernel {
            Kernel::Sweep => "fd_sweep",
            Kernel::Tiled => "fd_tiled",
            Kernel::Pairs => "fd_pairs",
            Kernel::Shuffle => "fd_shuffle",
        };
        let bad = dev.upload(&[i32::MAX], "flag").map_err(gpu_err)?;
        let me = topo.rank();
        let nbs = topo.neighbors();
        let own_faces = (0..3).all(|d| {
            [-1, 1].iter().all(|&side| {
                let mut o = [0isize; 3];
                o[d] = side;
                nbs.iter().any(|n| n.offset == o && n.rank == me)
            })
        });
        let wrap = !spectral
            && periodic_reads(cfg)
            && nbs.iter().all(|n| n.rank == me)
            && own_faces
            && layout.owned.iter().all(|&n| n >= radius);
        // `pairs` with `wrap` needs no pair to straddle a face: even strides
        // (its precondition) and the ghost width along the last axis (a
        // multiple of 4) make the first owned column and the row length
        // even.
        debug_assert!(
            !(wrap && kernel == Kernel::Pairs)
                || (layout.ghost[2].is_multiple_of(2) && layout.owned[2].is_multiple_of(2))
        );
        let fuse = steps_per_pass(cfg, comm.size(), wrap)? == 2;
        let k = Kernels {
            fd: f(name)?,
            fd_wrap: f(&format!("{name}_wrap"))?,
            many: f(&format!("{name}_many"))?,
            kernel,
            rk: f("rk_combine")?,
            scale: f("spectral_scale")?,
            two: if fuse {
                Some(f(crate::kernels::TWO_STEP_ENTRY)?)
            } else {
                None
            },
        };
        // Blocks of `fd_two` the device holds at once.
        let two_slots = match &k.two {
            Some(two) => {
                let per_sm = two
                    .occupancy_max_active_blocks_per_multiprocessor(32 * TWO_STEP.1, 0, None)
                    .map_err(|e| anyhow!("the occupancy of the two-step stencil: {e:?}"))?;
                dev.info().multiprocessors * per_sm as usize
            }
            None => 1,
        };
        let chunk = chunk.min(i32::MAX as usize) as i32;
        let spectral = if spectral {
            Some(Self::spectral(&dev, comm, topo, cfg, dt)?)
        } else {
            None
        };
        // Collective: every rank builds the exchanger here.
        let ex = match spectral {
            Some(_) => None,
            None => {
                let want = match cfg.gpu_exchange {
                    GpuExchange::Auto => None,
                    GpuExchange::Direct => Some(Transport::Direct),
                    GpuExchange::Staged => Some(Transport::HostStaged),
                    GpuExchange::Nccl => Some(Transport::Nccl),
                };
                Some(
                    DeviceExchanger::new(comm, topo, &dev, 1, 0, want)
                        .map_err(|e| anyhow!(e).context("setting up the device halo exchange"))?,
                )
            }
        };
        Ok(DeviceSolver {
            dev,
            u,
            a,
            b,
            c,
            k,
            bad,
            euler: euler.packed(),
            lap: lap.packed(),
            spectral,
            ex,
            chunk,
            block,
            step: 0,
            wrap,
            fuse,
            radius,
            two_chunk: if cfg.gpu_chunk > 0 {
                cfg.gpu_chunk
            } else {
                two_chunk(layout.owned, two_slots)
            },
            timer: StepTimer::default(),
            per_pass: vec![],
        })
    }

    fn spectral(
        dev: &Arc<Device>,
        comm: &dyn Communicator,
        topo: &Topology,
        cfg: &Config,
        dt: f64,
    ) -> Result<Spectral> {
        let input = crate::spectral_input(comm, cfg, topo.decomposition())?;
        // The spectrum stays where the last transform leaves it (fewest
        // reshapes); the factors are laid out to match.
        let opts = dfft::Options {
            output: dfft::Output::Transposed,
            ..dfft::Options::default()
        };
        // The reshapes travel as the halo would: through host buffers or
        // NCCL when asked, device to device where they can otherwise (and
        // `direct` is an error where they cannot, as for the halo).
        let route = match cfg.gpu_exchange {
            GpuExchange::Staged => Route::Staged,
            GpuExchange::Nccl => Route::Nccl,
            GpuExchange::Auto | GpuExchange::Direct => Route::Auto,
        };
        let plan = DeviceFft3d::with_route(comm, dev, &input, opts, route)?;
        if cfg.gpu_exchange == GpuExchange::Direct && plan.reshapes() > 0 && !plan.is_direct() {
            return Err(anyhow!(
                "gpu_exchange = direct: the spectral reshapes cannot go device to device between \
                 these {} ranks ({} communicator; the ranks must be threads of one process or \
                 processes between which the driver allows CUDA IPC) (valid here: auto, staged, \
                 nccl)",
                comm.size(),
                comm.backend()
            ));
        }
        // cuFFT leaves both transforms unnormalised.
        let n: usize = cfg.shape().iter().product();
        let factor = crate::spectral_factors(comm, cfg, plan.output_layout(), dt, n as f64);
        Ok(Spectral {
            spec: dev
                .alloc_zeros(plan.output_len(), "spectrum")
                .map_err(gpu_err)?,
            factor: dev.upload(&factor, "spectral factors").map_err(gpu_err)?,
            plan,
        })
    }

    /// The device, for the report.
    pub(crate) fn device(&self) -> &Device {
        &self.dev
    }

    /// How each reshape of the spectral transform travels (`DeviceDirect`,
    /// `DeviceStaged` or `DeviceNccl`, one per reshape; empty without
    /// one).
    pub(crate) fn reshape_protocols(&self) -> Vec<String> {
        self.spectral
            .as_ref()
            .map_or(Vec::new(), |s| s.plan.protocols())
    }

    /// How the halo travels between ranks (finite differences).
    pub(crate) fn transport(&self) -> Option<Transport> {
        self.ex.as_ref().map(DeviceExchanger::transport)
    }

    /// Copies the field to the host mirror (after all queued work).
    pub(crate) fn download(&self, u: &mut Field<f64>) -> Result<()> {
        self.dev.synchronize().map_err(gpu_err)?;
        self.u.download(u).map_err(gpu_err)
    }

    /// The first step that wrote a non-finite value (the spectral step: the
    /// first that started from one), if any.
    pub(crate) fn first_bad_step(&self) -> Result<Option<usize>> {
        self.dev.synchronize().map_err(gpu_err)?;
        let b = self.dev.download(&self.bad).map_err(gpu_err)?[0];
        Ok((b != i32::MAX).then_some(b as usize))
    }

    /// Device seconds of each step so far: a pass of two steps counts
    /// half its time for each.
    pub(crate) fn step_seconds(&mut self) -> Result<Vec<f64>> {
        let per_pass = &self.per_pass;
        let secs = self.timer.seconds().map_err(gpu_err)?;
        Ok(secs
            .iter()
            .zip(per_pass)
            .flat_map(|(&t, &n)| std::iter::repeat_n(t / n as f64, n))
            .collect())
    }

    /// The most steps one call of [`DeviceSolver::step`] may advance.
    pub(crate) fn steps_per_pass(&self) -> usize {
        if self.fuse {
            2
        } else {
            1
        }
    }

    /// Two Euler steps in one pass, `a = sweep(sweep(u))` on the owned box
    /// (`fd_two`; only where [`DeviceSolver::fuse`]).
    fn two_steps(&mut self, layout: &FieldLayout, owned: &Region) -> Result<()> {
        let f = self.k.two.as_ref().expect("fuse loads fd_two");
        let sh = owned.shape();
        let chunk = self.two_chunk.min(sh[0]).max(1);
        let cfg = LaunchConfig {
            grid_dim: two_grid(sh, self.radius, chunk),
            block_dim: (32, TWO_STEP.1, 1),
            shared_mem_bytes: 0,
        };
        let s = layout.strides();
        let (s0, s1) = (s[0] as i64, s[1] as i64);
        let b = DeviceRegion::from(owned);
        let chunk = chunk as i32;
        let first = self.step + 1;
        let (src, dst) = two(&mut self.u, &mut self.a, &mut self.b, (Slot::U, Slot::A));
        let mut l = self.dev.main().launch_builder(f);
        l.arg(src.data())
            .arg(dst.data_mut())
            .arg(&self.euler)
            .arg(&b)
            .arg(&s0)
            .arg(&s1)
            .arg(&chunk)
            .arg(&first)
            .arg(&mut self.bad);
        // SAFETY: the arguments match `fd_two`; `owned` is the owned box of
        // a rank that is its own periodic neighbour on every axis, and the
        // kernel reads only cells of that box (indices modulo its extent)
        // and writes only its cells; `src` and `dst` are distinct
        // allocations of this layout; the block is 32 x TWO_STEP.1 threads,
        // the kernel's bounds.
        unsafe { l.launch(cfg) }.map_err(|e| anyhow!("launching the two-step stencil: {e:?}"))?;
        std::mem::swap(&mut self.u, self.a.as_mut().expect("euler allocates a"));
        Ok(())
    }

    /// The launch shape of the stencil on a non-empty `region`: the grid,
    /// the block and the chunk along axis 0.
    fn shape(
        k: &Kernels,
        chunk: i32,
        block: u32,
        region: &Region,
    ) -> ((u32, u32, u32), (u32, u32, u32), i32) {
        let sh = region.shape();
        let chunk = chunk.min(sh[0] as i32).max(1);
        // The tiled kernel's block is fixed by its shared-memory tile, the
        // shuffling one's width by the warp.
        let block = match k.kernel {
            Kernel::Tiled | Kernel::Shuffle => 32,
            _ => block,
        };
        // Threads along the last axis: one a cell, or one a pair of cells
        // starting at an even padded index.
        let across = match k.kernel {
            Kernel::Pairs => (region.hi[2] - 1) / 2 - region.lo[2] / 2 + 1,
            _ => sh[2],
        };
        (
            (
                across.div_ceil(block as usize) as u32,
                sh[1].div_ceil(256 / block as usize) as u32,
                sh[0].div_ceil(chunk as usize) as u32,
            ),
            (block, 256 / block, 1),
            chunk,
        )
    }

    /// Launches the stencil `dst = sweep(src)` on every region of `regions`
    /// (at most six, none empty, e.g. the overlap's shell) in one launch on
    /// `main`: the blocks of one launch per region, numbered one after the
    /// other (the kernels' `Regions`).
    #[allow(clippy::too_many_arguments)]
    fn sweep_many(
        dev: &Device,
        k: &Kernels,
        (chunk, block, step): (i32, u32, i32),
        bad: &mut CudaSlice<i32>,
        coef: &[f64; 31],
        layout: &FieldLayout,
        src: &DeviceField,
        dst: &mut DeviceField,
        regions: &[Region],
    ) -> Result<()> {
        let live: Vec<&Region> = regions.iter().filter(|r| !r.is_empty()).collect();
        let Some(first) = live.first() else {
            return Ok(());
        };
        if live.len() > 6 {
            return Err(anyhow!(
                "{} stencil regions in one launch (at most 6)",
                live.len()
            ));
        }
        let mut rs = Regions {
            b: [DeviceRegion::from(*first); 6],
            chunk: [1; 6],
            gx: [1; 6],
            gy: [1; 6],
            first: [0; 7],
            count: live.len() as i32,
        };
        let mut dims = (1, 1, 1);
        for (i, r) in live.iter().enumerate() {
            let (g, b, c) = Self::shape(k, chunk, block, r);
            let blocks = u64::from(g.0) * u64::from(g.1) * u64::from(g.2);
            let next = i64::from(rs.first[i]) + blocks as i64;
            if next > i64::from(i32::MAX) {
                return Err(anyhow!("{next} blocks in one stencil launch"));
            }
            rs.b[i] = DeviceRegion::from(*r);
            rs.chunk[i] = c;
            rs.gx[i] = g.0 as i32;
            rs.gy[i] = g.1 as i32;
            rs.first[i + 1] = next as i32;
            dims = b;
        }
        let cfg = LaunchConfig {
            grid_dim: (rs.first[live.len()] as u32, 1, 1),
            block_dim: dims,
            shared_mem_bytes: 0,
        };
        let s = layout.strides();
        let (s0, s1) = (s[0] as i64, s[1] as i64);
        let mut l = dev.main().launch_builder(&k.many);
        l.arg(src.data())
            .arg(dst.data_mut())
            .arg(coef)
            .arg(&rs)
            .arg(&s0)
            .arg(&s1)
            .arg(&step)
            .arg(bad);
        // SAFETY: the arguments match the `_many` entries (`Regions` is
        // their struct); every region lies in the owned cells, as for
        // `sweep`, and has its own launch shape, so each block runs what it
        // would in a launch of its region; `src` and `dst` are distinct
        // allocations of this layout.
        unsafe { l.launch(cfg) }.map_err(|e| anyhow!("launching the stencil: {e:?}"))?;
        Ok(())
    }

    /// Launches the fused stencil `dst = sweep(src)` on `region`, on
    /// `side` or `main`; with `wrap` (`region` the owned box of a rank that
    /// is its own periodic neighbour, see [`DeviceSolver::wrap`]) it reads
    /// across the faces at the periodic images instead of the ghosts.
    #[allow(clippy::too_many_arguments)]
    fn sweep(
        dev: &Device,
        k: &Kernels,
        (chunk, block, step): (i32, u32, i32),
        bad: &mut CudaSlice<i32>,
        (side, wrap): (bool, bool),
        coef: &[f64; 31],
        layout: &FieldLayout,
        src: &DeviceField,
        dst: &mut DeviceField,
        region: &Region,
    ) -> Result<()> {
        if region.is_empty() {
            return Ok(());
        }
        let (grid, block, chunk) = Self::shape(k, chunk, block, region);
        let cfg = LaunchConfig {
            grid_dim: grid,
            block_dim: block,
            shared_mem_bytes: 0,
        };
        let s = layout.strides();
        let (s0, s1) = (s[0] as i64, s[1] as i64);
        let b = DeviceRegion::from(region);
        let stream = if side {
            // SAFETY: `apply`, the only caller with `side`, joins `side`
            // into `main` on every path out of it (`JoinSide`) before any of
            // the buffers used here (the fields and `bad`, freed on `main`)
            // can be dropped.
            unsafe { dev.side() }
        } else {
            dev.main()
        };
        let mut l = stream.launch_builder(if wrap { &k.fd_wrap } else { &k.fd });
        l.arg(src.data())
            .arg(dst.data_mut())
            .arg(coef)
            .arg(&b)
            .arg(&s0)
            .arg(&s1)
            .arg(&chunk)
            .arg(&step)
            .arg(bad);
        // SAFETY: the arguments match `fd_sweep`, `fd_tiled`, `fd_pairs`
        // and `fd_shuffle` and their `_wrap` entries (same signature); with
        // `wrap` every periodic
        // image read lies in the owned box (radius <= n along every axis,
        // the region is the owned box); `fd_pairs` is chosen only when rows
        // and planes have even length, so its 16-byte accesses are aligned
        // (the allocation is); `region` lies in the owned cells, whose
        // stencils read at most `radius` cells past them, inside the
        // allocated ghosts (at least the radius on every axis); `src` and
        // `dst` are distinct allocations of this layout.
        unsafe { l.launch(cfg) }.map_err(|e| anyhow!("launching the stencil: {e:?}"))?;
        Ok(())
    }

    /// `dst = sweep(src)` on the owned cells with the halo of `src`
    /// exchanged first (blocking) or around the interior (overlap).
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        (comm, mode): (&dyn Communicator, Mode),
        geo: Geometry<'_>,
        coef: &[f64; 31],
        which: (Slot, Slot),
        t: &mut StepTimes,
    ) -> Result<()> {
        let (layout, owned, interior, shell) = geo;
        let ctx = (self.chunk, self.block, self.step);
        let wrap = self.wrap && mode == Mode::Blocking;
        let (dev, k) = (self.dev.clone(), &self.k);
        let bad = &mut self.bad;
        let ex = self
            .ex
            .as_mut()
            .expect("finite differences build an exchanger");
        let (src, dst) = two(&mut self.u, &mut self.a, &mut self.b, which);
        let t0 = Instant::now();
        match mode {
            Mode::Blocking => {
                // One self-periodic rank's stencil reads across its faces
                // at the periodic images: no ghost is read.
                if !wrap {
                    ex.exchange(comm, &mut [&mut *src])?;
                }
                t[2] += t0.elapsed().as_secs_f64();
                let w = (false, wrap);
                Self::sweep(&dev, k, ctx, bad, w, coef, layout, src, dst, owned)?;
            }
            Mode::Overlap => {
                // `post` packs (device to host), sends, and queues the
                // periodic self-copies on `main`; the interior, which may
                // read those ghosts (`Topology::interior`), starts on `side`
                // after them and runs while the messages travel and `main`
                // unpacks.
                let pending = ex.post(comm, &mut [&mut *src])?;
                let t1 = Instant::now();
                t[0] += (t1 - t0).as_secs_f64();
                dev.side_after_main().map_err(gpu_err)?;
                let joined = JoinSide(&dev);
                let w = (true, false);
                Self::sweep(&dev, k, ctx, bad, w, coef, layout, src, dst, interior)?;
                pending.finish(&mut [&mut *src])?;
                t[2] += t1.elapsed().as_secs_f64();
                Self::sweep_many(&dev, k, ctx, bad, coef, layout, src, dst, shell)?;
                joined.join()?;
            }
        }
        Ok(())
    }

    /// One Runge-Kutta combination on the owned cells (see `rk_combine`).
    fn combine(
        &mut self,
        mode: i32,
        h: f64,
        g: f64,
        owned: &Region,
        layout: &FieldLayout,
    ) -> Result<()> {
        let (u, a, b, c) = (
            &mut self.u,
            self.a.as_mut().expect("rk4 allocates a"),
            self.b.as_ref().expect("rk4 allocates b"),
            self.c.as_mut().expect("rk4 allocates c"),
        );
        let s = layout.strides();
        let (s0, s1) = (s[0] as i64, s[1] as i64);
        let bx = DeviceRegion::from(owned);
        let main = self.dev.main();
        let mut l = main.launch_builder(&self.k.rk);
        l.arg(&mode)
            .arg(u.data_mut())
            .arg(a.data_mut())
            .arg(b.data())
            .arg(c.data_mut())
            .arg(&h)
            .arg(&g)
            .arg(&bx)
            .arg(&s0)
            .arg(&s1)
            .arg(&self.step)
            .arg(&mut self.bad);
        // SAFETY: the arguments match `rk_combine`; every field has this
        // layout and the region is its owned cells.
        unsafe { l.launch(launch_1d(owned.len().min(1 << 22), 256)) }
            .map_err(|e| anyhow!("launching rk_combine: {e:?}"))?;
        Ok(())
    }

    fn spectral_step(&mut self, comm: &dyn Communicator) -> Result<()> {
        let sp = self.spectral.as_mut().expect("spectral operator");
        sp.plan
            .forward(comm, &self.u.data().slice(..), &mut sp.spec)?;
        let n = sp.plan.output_len() as i64;
        let main = self.dev.main();
        let mut l = main.launch_builder(&self.k.scale);
        l.arg(&mut sp.spec)
            .arg(&sp.factor)
            .arg(&n)
            .arg(&self.step)
            .arg(&mut self.bad);
        // SAFETY: both buffers hold `n` values.
        unsafe { l.launch(launch_1d(n as usize, 256)) }
            .map_err(|e| anyhow!("launching spectral_scale: {e:?}"))?;
        sp.plan
            .backward(comm, &mut sp.spec, &mut self.u.data_mut().slice_mut(..))?;
        Ok(())
    }

    /// `steps` steps (Euler, RK4 or spectral; 2 only up to
    /// [`DeviceSolver::steps_per_pass`], in one pass), timed with device
    /// events.
    pub(crate) fn step(
        &mut self,
        steps: usize,
        x: (&dyn Communicator, Mode),
        geo: Geometry<'_>,
        integrator: Integrator,
        dt: f64,
        t: &mut StepTimes,
    ) -> Result<()> {
        if steps == 0 || steps > self.steps_per_pass() {
            return Err(anyhow!(
                "{steps} steps in one device pass (this run advances 1 to {})",
                self.steps_per_pass()
            ));
        }
        self.timer.begin(&self.dev).map_err(gpu_err)?;
        self.per_pass.push(steps);
        if steps == 2 {
            self.two_steps(geo.0, geo.1)?;
            self.step += 2;
            self.timer.end(&self.dev).map_err(gpu_err)?;
            return Ok(());
        }
        self.step += 1;
        if self.spectral.is_some() {
            self.spectral_step(x.0)?;
        } else {
            let (comm, mode) = x;
            let (layout, owned) = (geo.0, geo.1);
            match integrator {
                Integrator::Euler => {
                    let euler = self.euler;
                    self.apply((comm, mode), geo, &euler, (Slot::U, Slot::A), t)?;
                    std::mem::swap(&mut self.u, self.a.as_mut().expect("euler allocates a"));
                }
                Integrator::Rk4 => {
                    let lap = self.lap;
                    self.apply((comm, mode), geo, &lap, (Slot::U, Slot::B), t)?;
                    self.combine(0, 0.5 * dt, 0.0, owned, layout)?;
                    for (weight, next) in [(2.0, 0.5 * dt), (2.0, dt)] {
                        self.apply((comm, mode), geo, &lap, (Slot::A, Slot::B), t)?;
                        self.combine(1, next, weight, owned, layout)?;
                    }
                    self.apply((comm, mode), geo, &lap, (Slot::A, Slot::B), t)?;
                    self.combine(2, dt / 6.0, 0.0, owned, layout)?;
                }
            }
        }
        self.timer.end(&self.dev).map_err(gpu_err)?;
        Ok(())
    }
}

/// Which device field an operand is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    U,
    A,
    B,
}

/// Two distinct fields, the first read and exchanged, the second written.
fn two<'a>(
    u: &'a mut DeviceField,
    a: &'a mut Option<DeviceField>,
    b: &'a mut Option<DeviceField>,
    (src, dst): (Slot, Slot),
) -> (&'a mut DeviceField, &'a mut DeviceField) {
    let a = a.as_mut().expect("scratch a");
    match (src, dst) {
        (Slot::U, Slot::A) => (u, a),
        (Slot::U, Slot::B) => (u, b.as_mut().expect("stage b")),
        (Slot::A, Slot::B) => (a, b.as_mut().expect("stage b")),
        other => unreachable!("no step uses {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PerAxis;

    fn layout(owned: [usize; 3], radius: usize) -> FieldLayout {
        FieldLayout {
            owned,
            ghost: ghost(radius),
            components: 1,
        }
    }

    #[test]
    fn ghosts_align_rows_to_sectors() {
        for r in 0..=10 {
            let g = ghost(r);
            assert_eq!(&g[..2], &[r, r]);
            assert!(
                g[2] >= r && g[2].is_multiple_of(4) && g[2] < r + 4,
                "radius {r}: {g:?}"
            );
        }
    }

    #[test]
    fn periodic_reads_follow_the_option() {
        let cfg = |order: usize, gpu_periodic: GpuPeriodic| Config {
            order,
            gpu_periodic,
            ..Config::default()
        };
        for order in (2..=20).step_by(2) {
            assert_eq!(periodic_reads(&cfg(order, GpuPeriodic::Auto)), order <= 4);
            assert!(periodic_reads(&cfg(order, GpuPeriodic::Read)));
            assert!(!periodic_reads(&cfg(order, GpuPeriodic::Copy)));
        }
    }

    #[test]
    fn two_steps_a_pass_only_where_possible() {
        let cfg = |order: usize, n: usize, mode: Mode, k: usize| Config {
            order,
            n: PerAxis::All(n),
            mode,
            steps_per_pass: k,
            ..Config::default()
        };
        let b = Mode::Blocking;
        // The default: two at order 2 from 2^24 cells, one elsewhere.
        for order in (2..=20).step_by(2) {
            for n in [128, 256, 512] {
                let want = if order == 2 && n >= 256 { 2 } else { 1 };
                let got = steps_per_pass(&cfg(order, n, b, 0), 1, true).unwrap();
                assert_eq!(got, want, "order {order}, {n}^3");
            }
        }
        let big = |mode, k| cfg(2, 512, mode, k);
        assert_eq!(steps_per_pass(&big(Mode::Overlap, 0), 1, true).unwrap(), 1);
        assert_eq!(steps_per_pass(&big(b, 0), 2, false).unwrap(), 1);
        let rk = |order, mode, k| Config {
            integrator: Integrator::Rk4,
            ..cfg(order, 512, mode, k)
        };
        assert_eq!(steps_per_pass(&rk(2, b, 0), 1, true).unwrap(), 1);
        assert_eq!(steps_per_pass(&big(b, 1), 1, true).unwrap(), 1);
        assert_eq!(steps_per_pass(&cfg(2, 8, b, 2), 1, true).unwrap(), 2);
        // Asking for two where they are not possible names every reason.
        let e = steps_per_pass(&rk(4, Mode::Overlap, 2), 2, false)
            .unwrap_err()
            .to_string();
        for want in [
            "steps_per_pass = 2 needs",
            "this run: 2 rank(s)",
            "blocking mode (this run: Overlap)",
            "the Euler finite-difference step",
            "order 2 (this run: 4)",
        ] {
            assert!(e.contains(want), "{want:?} not in {e:?}");
        }
        let e = steps_per_pass(&big(b, 3), 1, true).unwrap_err().to_string();
        assert!(
            e.contains("= 3") && e.contains("on a GPU (valid: 1 to 2"),
            "{e}"
        );
    }

    #[test]
    fn two_step_chunks_follow_the_waves() {
        // An H200: 132 SMs, 2 blocks of fd_two each.
        let h200 = 264;
        assert_eq!(two_chunk([512, 512, 512], h200), 64);
        assert_eq!(two_chunk([256, 256, 256], h200), 52);
        // The model against a count by hand at 256^3: 100 tiles a plane
        // of blocks, so 52 makes 500 blocks (2 waves, 2 x 60) and 64 400
        // (2 waves, 2 x 72), 26 1000 (4 x 34).
        let cost = |c: usize| {
            let (gx, gy, gz) = two_grid([256; 3], 1, c);
            (gx * gy * gz) as usize
        };
        assert_eq!((cost(52), cost(64), cost(26)), (500, 400, 1000));
        // A box smaller than a chunk: one wave whatever the chunk, so the
        // fewest planes a block (16).
        assert_eq!(two_chunk([12, 16, 10], h200), 16);
        // One slot: waves are blocks, so the chunk that covers the box in
        // the fewest planes of work.
        assert_eq!(two_chunk([64, 28, 32], 1), 64);
    }

    #[test]
    fn auto_picks_per_order_and_falls_back_on_odd_rows() {
        let cfg = |order: usize, stencil: GpuStencil| Config {
            order,
            gpu_stencil: stencil,
            ..Config::default()
        };
        let even = layout([64, 64, 64], 1);
        let odd = layout([64, 64, 63], 1);
        assert_eq!(
            stencil_choice(&cfg(2, GpuStencil::Auto), &even),
            (Kernel::Pairs, 4, 128)
        );
        assert_eq!(
            stencil_choice(&cfg(2, GpuStencil::Auto), &layout([512, 512, 256], 1)),
            (Kernel::Pairs, 8, 32)
        );
        assert_eq!(
            stencil_choice(&cfg(2, GpuStencil::Auto), &layout([512, 256, 256], 1)),
            (Kernel::Pairs, 4, 128)
        );
        assert_eq!(
            stencil_choice(&cfg(2, GpuStencil::Auto), &odd),
            (Kernel::Sweep, 8, 128)
        );
        assert_eq!(
            stencil_choice(&cfg(8, GpuStencil::Auto), &layout([64; 3], 4)),
            (Kernel::Pairs, 8, 32)
        );
        assert_eq!(
            stencil_choice(&cfg(10, GpuStencil::Auto), &layout([64; 3], 5)),
            (Kernel::Sweep, 32, 32)
        );
        assert_eq!(
            stencil_choice(&cfg(14, GpuStencil::Auto), &layout([64; 3], 7)),
            (Kernel::Shuffle, 32, 32)
        );
        assert_eq!(
            stencil_choice(&cfg(8, GpuStencil::Auto), &layout([64, 64, 63], 4)),
            (Kernel::Sweep, 32, 32)
        );
        assert_eq!(
            stencil_choice(&cfg(20, GpuStencil::Auto), &layout([64; 3], 10)),
            (Kernel::Shuffle, 32, 32)
        );
        assert_eq!(
            stencil_choice(&cfg(2, GpuStencil::Pairs), &odd).0,
            Kernel::Sweep
        );
        assert_eq!(
            stencil_choice(&cfg(2, GpuStencil::Shared), &even).0,
            Kernel::Tiled
        );
        assert_eq!(
            stencil_choice(&cfg(2, GpuStencil::Cached), &even).0,
            Kernel::Sweep
        );
        let tuned = Config {
            gpu_chunk: 3,
            gpu_block: 64,
            ..cfg(2, GpuStencil::Auto)
        };
        assert_eq!(stencil_choice(&tuned, &even), (Kernel::Pairs, 3, 64));
    }
}
