//! The sweeps on an NVIDIA GPU (feature `cuda`): [`DeviceStencil`] runs
//! `dst = sweep(src)` on [`halo::DeviceField`]s with the host's bits.
//!
//! The kernels (`kernels/star.cu`, [`crate::kernels`]) are compiled by
//! NVRTC for the radius in use, with `--fmad=false`: each performs the host
//! sweep's operations in the same order without contraction. Four kernels
//! read the fast-axis neighbours in different ways ([`GpuKernel`]), each
//! with three entries: one region, several regions in one launch (an
//! overlapped step's shell), and the owned box of a self-periodic rank
//! reading across its faces at the periodic images ([`PeriodicReads`]).
//! `fd_two` (radius 1) advances two Euler steps in one pass with the
//! intermediate values on the chip.
//!
//! **Overlap.** [`DeviceStencil::sweep_overlapped`] starts the interior on
//! the device's `side` stream while the caller finishes the halo exchange on
//! `main`, then sweeps the shell on `main` and joins `side` into `main` on
//! every path out, so the fields it used outlive the work queued on them.
//! The interior reads no ghost that a message fills and the unpack writes
//! only such ghosts, so blocking and overlapped steps give the same bits.
//!
//! **Non-finite values.** Every sweep takes a one-value flag on the device
//! and leaves in it the smallest step number at which it wrote a
//! non-finite value (the caller initialises it to `i32::MAX`).
//!
//! The policy (which kernel, which launch shape, when to read across the
//! faces, when to pass two steps) is data with its measurements in the
//! functions below and in `tune/NOTES.md`.

use crate::kernels;
use crate::options::{GpuKernel, PeriodicReads, StencilOptions};
use crate::Sweep;
use gpu::cuda::cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use gpu::cuda::Device;
use gpu::GpuError;
use halo::{DeviceField, DeviceRegion, FieldLayout, Region};
use std::sync::Arc;

/// Which kernel `fd` is.
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

impl Kernel {
    fn entry(self) -> &'static str {
        match self {
            Kernel::Sweep => "fd_sweep",
            Kernel::Tiled => "fd_tiled",
            Kernel::Pairs => "fd_pairs",
            Kernel::Shuffle => "fd_shuffle",
        }
    }
}

/// Owned cells from which `pairs` at order 2 launches 32 x 8 blocks of 8
/// cells a thread: 2^26, between the sizes where each shape was measured
/// faster (256^3 = 2^24 for 128 x 2 with 4 cells, 512^3 = 2^27 for 32 x 8).
const TALL_BLOCKS: usize = 1 << 26;

/// The orders at which `auto` takes `pairs` and `shuffle`; `cached` at the
/// others (10 and 16).
const AUTO_PAIRS: [usize; 6] = [2, 4, 6, 8, 12, 18];
const AUTO_SHUFFLE: [usize; 2] = [14, 20];

/// The kernel and launch shape for `opts` at `order` on `layout`. `auto`
/// takes the fastest of `cached`, `pairs` and `shuffle` measured per order
/// on an H200 at 256^3 and 512^3 (heat3d, one rank, blocking Euler):
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
fn choice(opts: &StencilOptions, order: usize, layout: &FieldLayout) -> (Kernel, usize, u32) {
    let s = layout.strides();
    let even = s[0].is_multiple_of(2) && s[1].is_multiple_of(2);
    let kernel = match opts.gpu {
        GpuKernel::Shared => Kernel::Tiled,
        GpuKernel::Shuffle => Kernel::Shuffle,
        GpuKernel::Pairs if even => Kernel::Pairs,
        GpuKernel::Auto if even && AUTO_PAIRS.contains(&order) => Kernel::Pairs,
        GpuKernel::Auto if AUTO_SHUFFLE.contains(&order) => Kernel::Shuffle,
        _ => Kernel::Sweep,
    };
    let cells: usize = layout.owned.iter().product();
    let (chunk, block) = match kernel {
        Kernel::Pairs if order == 2 && cells < TALL_BLOCKS => (4, 128),
        Kernel::Pairs => (8, 32),
        Kernel::Sweep if order == 2 => (8, 128),
        Kernel::Sweep | Kernel::Tiled | Kernel::Shuffle => (32, 32),
    };
    let chunk = if opts.gpu_chunk > 0 {
        opts.gpu_chunk
    } else {
        chunk
    };
    let block = if opts.gpu_block > 0 {
        opts.gpu_block as u32
    } else {
        block
    };
    (kernel, chunk, block)
}

/// Whether a self-periodic box's stencil at `order` reads across its faces
/// at the periodic images rather than from ghosts filled by the halo's
/// self-copies. `auto` reads at orders 2 and 4, where it measured faster
/// on an H200 (heat3d, blocking Euler, ms a step, read / copy: FD-2 0.0796
/// / 0.0929 at 256^3 and 0.576 / 0.630 at 512^3, FD-4 0.104 / 0.125 and
/// 0.842 / 0.913); from order 6 the periodic variants' extra registers
/// cost more than the copies (FD-6 1.352 / 0.901 at 512^3, FD-8 1.593 /
/// 1.021).
pub fn periodic_reads(opts: &StencilOptions, order: usize) -> bool {
    match opts.gpu_periodic {
        PeriodicReads::Read => true,
        PeriodicReads::Copy => false,
        PeriodicReads::Auto => order <= 4,
    }
}

/// Whether [`DeviceStencil`] with these options reads across the faces of
/// a box of `layout` that is its own periodic neighbour on every axis
/// (`self_periodic`): [`periodic_reads`], and at least the radius of
/// owned cells along every axis. Such a sweep reads no ghost, so the
/// caller exchanges nothing before it.
pub fn reads_across_faces(
    opts: &StencilOptions,
    order: usize,
    layout: &FieldLayout,
    self_periodic: bool,
) -> bool {
    self_periodic && periodic_reads(opts, order) && layout.owned.iter().all(|&n| n >= order / 2)
}

/// The order of the one two-step kernel (`fd_two`). At order 4 the same
/// scheme measured 1.8 times slower than one step a pass: its output tile,
/// 32 - 4R cells wide, keeps 56 % of the threads' cells, and its queues and
/// shared rings double.
pub const TWO_STEP_ORDER: usize = 2;

/// The most Euler steps one device pass advances.
pub const MAX_STEPS_PER_PASS: usize = 2;

/// Owned cells from which the default passes two Euler steps at a time
/// (where possible): measured on an H200 (heat3d, blocking Euler, ms a
/// step), two steps a pass took 0.494 ms at 512^3 against 0.570 for one,
/// and 0.075 at 256^3 (with `two_chunk`'s 52 planes a block) against
/// 0.079-0.080. Smaller boxes were not measured.
pub const AUTO_TWO_STEP_CELLS: usize = 1 << 24;

/// The steps a pass the default takes on a box of `cells` owned cells
/// where two are possible.
pub fn auto_steps(cells: usize) -> usize {
    if cells >= AUTO_TWO_STEP_CELLS {
        2
    } else {
        1
    }
}

/// `fd_two`'s block: rows of cells a thread and rows of threads (the
/// kernels' `TWO_RJ` and `TWO_BY`); the block is 32 x `TWO_STEP.1`.
const TWO_STEP: (usize, u32) = (4, 8);

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
pub fn ghost(radius: usize) -> [usize; 3] {
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

/// The most regions [`DeviceStencil::sweep_many`] takes in one launch.
pub const MAX_REGIONS: usize = 6;

/// Makes `main` wait for the work queued on `side` so far when dropped,
/// so that every path out of an overlapped sweep (an error included)
/// orders that work before the frees on `main` of the buffers it touched.
struct JoinSide<'a>(&'a Device);

impl JoinSide<'_> {
    fn join(self) -> Result<(), GpuError> {
        let r = self.0.join_side();
        std::mem::forget(self);
        r
    }
}

impl Drop for JoinSide<'_> {
    fn drop(&mut self) {
        // On an error path: the sweep's own error is the one reported.
        let _ = self.0.join_side();
    }
}

/// The device sweeps of one stencil order on fields of one layout; see
/// the module documentation.
pub struct DeviceStencil {
    dev: Arc<Device>,
    layout: FieldLayout,
    radius: usize,
    /// The kernel for any region.
    fd: CudaFunction,
    /// The same reading across the faces at the periodic images.
    fd_wrap: CudaFunction,
    /// The same over several regions in one launch.
    many: CudaFunction,
    /// Two Euler steps a pass, when asked for.
    two: Option<CudaFunction>,
    kernel: Kernel,
    /// Cells each thread marches along axis 0.
    chunk: i32,
    /// Threads of a block along the last axis (of 256).
    block: u32,
    /// Reads across the faces of the owned box ([`reads_across_faces`]).
    wrap: bool,
    /// Output planes a block of `fd_two` marches along axis 0.
    two_chunk: usize,
}

impl std::fmt::Debug for DeviceStencil {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceStencil")
            .field("radius", &self.radius)
            .field("kernel", &self.kernel)
            .field("chunk", &self.chunk)
            .field("block", &self.block)
            .field("wrap", &self.wrap)
            .field("two_steps", &self.two.is_some())
            .finish()
    }
}

impl DeviceStencil {
    /// Compiles (once per device and radius) and picks the kernels of the
    /// stencil of `order` for one-component fields of `layout` on `dev`.
    /// `self_periodic` says that the owned box is its own periodic
    /// neighbour on every axis (one rank), which lets the sweep of the whole
    /// box read across its faces ([`reads_across_faces`]); `two_steps`
    /// loads `fd_two` (that and order 2 required).
    ///
    /// Errors: an order outside [`crate::ORDERS`], a layout with other than
    /// one component or ghosts narrower than the radius, invalid options,
    /// two steps where they cannot run, and the device's own.
    pub fn new(
        dev: &Arc<Device>,
        layout: FieldLayout,
        order: usize,
        opts: &StencilOptions,
        self_periodic: bool,
        two_steps: bool,
    ) -> Result<Self, GpuError> {
        if !crate::ORDERS.contains(&order) {
            return Err(GpuError::Invalid(format!(
                "stencil order {order} (valid: 2, 4, ..., 20)"
            )));
        }
        opts.validate().map_err(GpuError::Invalid)?;
        let radius = order / 2;
        if layout.components != 1 {
            return Err(GpuError::Invalid(format!(
                "the device stencil sweeps one-component fields (this layout has {})",
                layout.components
            )));
        }
        if layout.ghost.iter().any(|&g| g < radius) {
            return Err(GpuError::Invalid(format!(
                "ghost layers {:?} are narrower than the stencil radius {radius}",
                layout.ghost
            )));
        }
        if layout.padded().iter().any(|&x| x > i32::MAX as usize) {
            return Err(GpuError::Invalid(format!(
                "padded extent {:?} exceeds the kernels' 32-bit extents",
                layout.padded()
            )));
        }
        let wrap = reads_across_faces(opts, order, &layout, self_periodic);
        if two_steps && !(wrap && order == TWO_STEP_ORDER) {
            return Err(GpuError::Invalid(format!(
                "two steps a pass need order {TWO_STEP_ORDER} and a self-periodic box read across \
                 its faces (this stencil: order {order}, reads across its faces: {wrap})"
            )));
        }
        let (kernel, chunk, block) = choice(opts, order, &layout);
        // `pairs` with `wrap` needs no pair to straddle a face: even strides
        // (its precondition) and the ghost width along the last axis (a
        // multiple of 4 with [`ghost`]) make the first owned column and
        // the row length even.
        let kernel = if wrap
            && kernel == Kernel::Pairs
            && !(layout.ghost[2].is_multiple_of(2) && layout.owned[2].is_multiple_of(2))
        {
            Kernel::Sweep
        } else {
            kernel
        };
        let module = kernels::module_name(radius);
        let src = || kernels::source(radius);
        let f = |name: &str| dev.function(&module, src, name);
        let name = kernel.entry();
        let two = if two_steps {
            Some(f(kernels::TWO_STEP_ENTRY)?)
        } else {
            None
        };
        // Blocks of `fd_two` the device holds at once.
        let two_slots = match &two {
            Some(two) => {
                let per_sm = two
                    .occupancy_max_active_blocks_per_multiprocessor(32 * TWO_STEP.1, 0, None)
                    .map_err(|e| GpuError::Driver {
                        call: "cuOccupancyMaxActiveBlocksPerMultiprocessor(fd_two)".into(),
                        detail: format!("{e:?}"),
                    })?;
                dev.info().multiprocessors * per_sm as usize
            }
            None => 1,
        };
        Ok(DeviceStencil {
            dev: dev.clone(),
            layout,
            radius,
            fd: f(name)?,
            fd_wrap: f(&format!("{name}_wrap"))?,
            many: f(&format!("{name}_many"))?,
            two,
            kernel,
            chunk: chunk.clamp(1, i32::MAX as usize) as i32,
            block,
            wrap,
            two_chunk: if opts.gpu_chunk > 0 {
                opts.gpu_chunk
            } else {
                two_chunk(layout.owned, two_slots)
            },
        })
    }

    /// Whether the sweep of the whole owned box reads across its faces
    /// ([`reads_across_faces`]): then [`DeviceStencil::sweep_owned`] needs
    /// no exchange before it.
    pub fn wraps(&self) -> bool {
        self.wrap
    }

    /// The most Euler steps [`DeviceStencil::two_steps`] or a sweep
    /// advances in one pass: 2 where `fd_two` was loaded, else 1.
    pub fn steps_per_pass(&self) -> usize {
        if self.two.is_some() {
            2
        } else {
            1
        }
    }

    /// The kernel in use (`cached`, `pairs`, `shuffle` or `shared`).
    pub fn kernel_name(&self) -> &'static str {
        match self.kernel {
            Kernel::Sweep => "cached",
            Kernel::Tiled => "shared",
            Kernel::Pairs => "pairs",
            Kernel::Shuffle => "shuffle",
        }
    }

    /// Checks the operands of a launch: fields of this layout on this
    /// device, a sweep of this radius, a flag of one value on this device,
    /// regions inside the owned cells (without allocating: it runs every
    /// step).
    fn check<'r>(
        &self,
        sweep: &Sweep,
        src: &DeviceField,
        dst: &DeviceField,
        bad: &CudaSlice<i32>,
        regions: impl IntoIterator<Item = &'r Region>,
    ) -> Result<(), GpuError> {
        if sweep.radius() != self.radius {
            return Err(GpuError::Invalid(format!(
                "a sweep of radius {} on the device stencil of radius {}",
                sweep.radius(),
                self.radius
            )));
        }
        for (what, f) in [("source", src), ("destination", dst)] {
            if f.layout() != self.layout {
                return Err(GpuError::Invalid(format!(
                    "the {what} field's layout {:?} is not the stencil's {:?}",
                    f.layout(),
                    self.layout
                )));
            }
            if !Arc::ptr_eq(f.device(), &self.dev) {
                return Err(GpuError::Invalid(format!(
                    "the {what} field lives on another device handle than the stencil's"
                )));
            }
        }
        if bad.is_empty() || !Arc::ptr_eq(bad.stream(), self.dev.main()) {
            return Err(GpuError::Invalid(
                "the non-finite flag must be one value allocated on the stencil's device".into(),
            ));
        }
        let owned = self.layout.owned_region();
        for r in regions {
            let inside =
                (0..3).all(|d| r.is_empty() || (owned.lo[d] <= r.lo[d] && r.hi[d] <= owned.hi[d]));
            if !inside {
                return Err(GpuError::Invalid(format!(
                    "stencil region {r:?} is not inside the owned cells {owned:?}"
                )));
            }
        }
        Ok(())
    }

    /// The launch shape on a non-empty `region`: the grid, the block and
    /// the chunk along axis 0.
    fn shape(&self, region: &Region) -> ((u32, u32, u32), (u32, u32, u32), i32) {
        let sh = region.shape();
        let chunk = self.chunk.min(sh[0] as i32).max(1);
        // The tiled kernel's block is fixed by its shared-memory tile, the
        // shuffling one's width by the warp.
        let block = match self.kernel {
            Kernel::Tiled | Kernel::Shuffle => 32,
            _ => self.block,
        };
        // Threads along the last axis: one a cell, or one a pair of cells
        // starting at an even padded index.
        let across = match self.kernel {
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

    /// Queues `dst = sweep(src)` on `region` (inside the owned cells) on
    /// `main`; `step` is the step number the flag `bad` records for a
    /// non-finite value. `src`'s ghosts within the radius of `region` must
    /// hold their values (the caller's exchange).
    pub fn sweep(
        &self,
        sweep: &Sweep,
        src: &DeviceField,
        dst: &mut DeviceField,
        region: &Region,
        step: i32,
        bad: &mut CudaSlice<i32>,
    ) -> Result<(), GpuError> {
        self.check(sweep, src, dst, bad, [region])?;
        self.launch(false, false, sweep, src, dst, region, step, bad)
    }

    /// Queues `dst = sweep(src)` on the whole owned box on `main`; where
    /// [`DeviceStencil::wraps`], reading across the faces at the periodic
    /// images (no ghost is read), else from the ghosts.
    pub fn sweep_owned(
        &self,
        sweep: &Sweep,
        src: &DeviceField,
        dst: &mut DeviceField,
        step: i32,
        bad: &mut CudaSlice<i32>,
    ) -> Result<(), GpuError> {
        let owned = self.layout.owned_region();
        self.check(sweep, src, dst, bad, [&owned])?;
        self.launch(false, self.wrap, sweep, src, dst, &owned, step, bad)
    }

    /// `dst = sweep(src)` on the owned cells around a halo exchange: the
    /// interior (cells whose stencils read no ghost that `finish` fills)
    /// on `side`, started after the work queued on `main` so far, while
    /// `finish(src)` completes the exchange on `main`; then the shell (at
    /// most [`MAX_REGIONS`] regions, which with `interior` cover the owned
    /// cells) on `main`, and `side` joined into `main` on every path out.
    #[allow(clippy::too_many_arguments)]
    pub fn sweep_overlapped<E: From<GpuError>>(
        &self,
        sweep: &Sweep,
        src: &mut DeviceField,
        dst: &mut DeviceField,
        (interior, shell): (&Region, &[Region]),
        step: i32,
        bad: &mut CudaSlice<i32>,
        finish: impl FnOnce(&mut DeviceField) -> Result<(), E>,
    ) -> Result<(), E> {
        self.check(sweep, src, dst, bad, shell.iter().chain([interior]))?;
        self.check_many(shell)?;
        self.dev.side_after_main()?;
        let joined = JoinSide(&self.dev);
        self.launch(true, false, sweep, src, dst, interior, step, bad)?;
        finish(src)?;
        self.launch_many(sweep, src, dst, shell, step, bad)?;
        joined.join()?;
        Ok(())
    }

    /// Queues `dst = sweep(src)` on every region of `regions` (at most
    /// [`MAX_REGIONS`] non-empty ones, inside the owned cells) in one launch
    /// on `main`.
    pub fn sweep_many(
        &self,
        sweep: &Sweep,
        src: &DeviceField,
        dst: &mut DeviceField,
        regions: &[Region],
        step: i32,
        bad: &mut CudaSlice<i32>,
    ) -> Result<(), GpuError> {
        self.check(sweep, src, dst, bad, regions)?;
        self.check_many(regions)?;
        self.launch_many(sweep, src, dst, regions, step, bad)
    }

    fn check_many(&self, regions: &[Region]) -> Result<(), GpuError> {
        let live = regions.iter().filter(|r| !r.is_empty()).count();
        if live > MAX_REGIONS {
            return Err(GpuError::Invalid(format!(
                "{live} stencil regions in one launch (at most {MAX_REGIONS})"
            )));
        }
        Ok(())
    }

    /// Queues two Euler steps, `dst = sweep(sweep(src))` on the owned box
    /// (`fd_two`), on `main`; `bad` records `step` for a non-finite
    /// intermediate value and `step + 1` for a non-finite result. Only
    /// where the stencil was built with `two_steps`.
    pub fn two_steps(
        &self,
        sweep: &Sweep,
        src: &DeviceField,
        dst: &mut DeviceField,
        step: i32,
        bad: &mut CudaSlice<i32>,
    ) -> Result<(), GpuError> {
        let Some(f) = self.two.as_ref() else {
            return Err(GpuError::Invalid(
                "two steps a pass on a device stencil built for one".into(),
            ));
        };
        let owned = self.layout.owned_region();
        self.check(sweep, src, dst, bad, [&owned])?;
        let sh = owned.shape();
        let chunk = self.two_chunk.min(sh[0]).max(1);
        let cfg = LaunchConfig {
            grid_dim: two_grid(sh, self.radius, chunk),
            block_dim: (32, TWO_STEP.1, 1),
            shared_mem_bytes: 0,
        };
        let s = self.layout.strides();
        let (s0, s1) = (s[0] as i64, s[1] as i64);
        let b = DeviceRegion::from(&owned);
        let chunk = chunk as i32;
        let coef = sweep.packed();
        let mut l = self.dev.main().launch_builder(f);
        l.arg(src.data())
            .arg(dst.data_mut())
            .arg(&coef)
            .arg(&b)
            .arg(&s0)
            .arg(&s1)
            .arg(&chunk)
            .arg(&step)
            .arg(bad);
        // SAFETY: the arguments match `fd_two`; `fd_two` was loaded only
        // for a self-periodic box read across its faces (`new`), the
        // region is the owned box and the kernel reads only cells of that
        // box (indices modulo its extent) and writes only its cells; `src`
        // and `dst` are distinct allocations of this layout on this device
        // (`check`) and `bad` holds a value; the block is 32 x TWO_STEP.1
        // threads, the kernel's bounds.
        unsafe { l.launch(cfg) }.map_err(|e| GpuError::Driver {
            call: "launching fd_two".into(),
            detail: format!("{e:?}"),
        })?;
        Ok(())
    }

    /// Launches the stencil on `region` (checked), on `side` or `main`,
    /// with the `_wrap` entry where `wrap` (`region` is then the owned
    /// box and [`DeviceStencil::wraps`]).
    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        side: bool,
        wrap: bool,
        sweep: &Sweep,
        src: &DeviceField,
        dst: &mut DeviceField,
        region: &Region,
        step: i32,
        bad: &mut CudaSlice<i32>,
    ) -> Result<(), GpuError> {
        if region.is_empty() {
            return Ok(());
        }
        let (grid, block, chunk) = self.shape(region);
        let cfg = LaunchConfig {
            grid_dim: grid,
            block_dim: block,
            shared_mem_bytes: 0,
        };
        let s = self.layout.strides();
        let (s0, s1) = (s[0] as i64, s[1] as i64);
        let b = DeviceRegion::from(region);
        let coef = sweep.packed();
        let stream = if side {
            // SAFETY: `sweep_overlapped`, the only caller with `side`,
            // joins `side` into `main` on every path out of it (`JoinSide`)
            // before any of the buffers used here (the fields and `bad`,
            // freed on `main`) can be dropped: they are borrowed for the
            // whole call.
            unsafe { self.dev.side() }
        } else {
            self.dev.main()
        };
        let mut l = stream.launch_builder(if wrap { &self.fd_wrap } else { &self.fd });
        l.arg(src.data())
            .arg(dst.data_mut())
            .arg(&coef)
            .arg(&b)
            .arg(&s0)
            .arg(&s1)
            .arg(&chunk)
            .arg(&step)
            .arg(bad);
        // SAFETY: the arguments match `fd_sweep`, `fd_tiled`, `fd_pairs`
        // and `fd_shuffle` and their `_wrap` entries (same signature); with
        // `wrap` every periodic image read lies in the owned box (radius <=
        // n along every axis, `reads_across_faces`; the region is the owned
        // box); `fd_pairs` is chosen only when rows and planes have even
        // length, so its 16-byte accesses are aligned (the allocation is);
        // `region` lies in the owned cells (`check`), whose stencils read
        // at most `radius` cells past them, inside the allocated ghosts (at
        // least the radius on every axis, `new`); `src` and `dst` are
        // distinct allocations of this layout on this device and `bad`
        // holds a value (`check`).
        unsafe { l.launch(cfg) }.map_err(|e| GpuError::Driver {
            call: format!("launching {}", self.kernel.entry()),
            detail: format!("{e:?}"),
        })?;
        Ok(())
    }

    /// Launches the stencil on every region of `regions` (checked: at most
    /// six non-empty, inside the owned cells) in one launch on `main`: the
    /// blocks of one launch per region, numbered one after the other (the
    /// kernels' `Regions`).
    fn launch_many(
        &self,
        sweep: &Sweep,
        src: &DeviceField,
        dst: &mut DeviceField,
        regions: &[Region],
        step: i32,
        bad: &mut CudaSlice<i32>,
    ) -> Result<(), GpuError> {
        let live = || regions.iter().filter(|r| !r.is_empty());
        let Some(first) = live().next() else {
            return Ok(());
        };
        let count = live().count();
        let mut rs = Regions {
            b: [DeviceRegion::from(first); 6],
            chunk: [1; 6],
            gx: [1; 6],
            gy: [1; 6],
            first: [0; 7],
            count: count as i32,
        };
        let mut dims = (1, 1, 1);
        for (i, r) in live().enumerate() {
            let (g, b, c) = self.shape(r);
            let blocks = u64::from(g.0) * u64::from(g.1) * u64::from(g.2);
            let next = i64::from(rs.first[i]) + blocks as i64;
            if next > i64::from(i32::MAX) {
                return Err(GpuError::Invalid(format!(
                    "{next} blocks in one stencil launch (at most {})",
                    i32::MAX
                )));
            }
            rs.b[i] = DeviceRegion::from(r);
            rs.chunk[i] = c;
            rs.gx[i] = g.0 as i32;
            rs.gy[i] = g.1 as i32;
            rs.first[i + 1] = next as i32;
            dims = b;
        }
        let cfg = LaunchConfig {
            grid_dim: (rs.first[count] as u32, 1, 1),
            block_dim: dims,
            shared_mem_bytes: 0,
        };
        let s = self.layout.strides();
        let (s0, s1) = (s[0] as i64, s[1] as i64);
        let coef = sweep.packed();
        let mut l = self.dev.main().launch_builder(&self.many);
        l.arg(src.data())
            .arg(dst.data_mut())
            .arg(&coef)
            .arg(&rs)
            .arg(&s0)
            .arg(&s1)
            .arg(&step)
            .arg(bad);
        // SAFETY: the arguments match the `_many` entries (`Regions` is
        // their struct); every region lies in the owned cells, as for
        // `launch`, and has its own launch shape, so each block runs what
        // it would in a launch of its region; `src` and `dst` are distinct
        // allocations of this layout on this device and `bad` holds a
        // value (`check`).
        unsafe { l.launch(cfg) }.map_err(|e| GpuError::Driver {
            call: format!("launching {}_many", self.kernel.entry()),
            detail: format!("{e:?}"),
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let opts = |gpu_periodic| StencilOptions {
            gpu_periodic,
            ..StencilOptions::default()
        };
        for order in (2..=20).step_by(2) {
            assert_eq!(
                periodic_reads(&opts(PeriodicReads::Auto), order),
                order <= 4
            );
            assert!(periodic_reads(&opts(PeriodicReads::Read), order));
            assert!(!periodic_reads(&opts(PeriodicReads::Copy), order));
        }
        // Reading across the faces also needs a self-periodic box of at
        // least the radius along every axis.
        let read = opts(PeriodicReads::Read);
        assert!(reads_across_faces(&read, 8, &layout([4, 5, 6], 4), true));
        assert!(!reads_across_faces(&read, 8, &layout([4, 3, 6], 4), true));
        assert!(!reads_across_faces(&read, 8, &layout([8; 3], 4), false));
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
        let opts = |gpu| StencilOptions {
            gpu,
            ..StencilOptions::default()
        };
        let auto = opts(GpuKernel::Auto);
        let even = layout([64, 64, 64], 1);
        let odd = layout([64, 64, 63], 1);
        assert_eq!(choice(&auto, 2, &even), (Kernel::Pairs, 4, 128));
        assert_eq!(
            choice(&auto, 2, &layout([512, 512, 256], 1)),
            (Kernel::Pairs, 8, 32)
        );
        assert_eq!(
            choice(&auto, 2, &layout([512, 256, 256], 1)),
            (Kernel::Pairs, 4, 128)
        );
        assert_eq!(choice(&auto, 2, &odd), (Kernel::Sweep, 8, 128));
        assert_eq!(
            choice(&auto, 8, &layout([64; 3], 4)),
            (Kernel::Pairs, 8, 32)
        );
        assert_eq!(
            choice(&auto, 10, &layout([64; 3], 5)),
            (Kernel::Sweep, 32, 32)
        );
        assert_eq!(
            choice(&auto, 14, &layout([64; 3], 7)),
            (Kernel::Shuffle, 32, 32)
        );
        assert_eq!(
            choice(&auto, 8, &layout([64, 64, 63], 4)),
            (Kernel::Sweep, 32, 32)
        );
        assert_eq!(
            choice(&auto, 20, &layout([64; 3], 10)),
            (Kernel::Shuffle, 32, 32)
        );
        assert_eq!(choice(&opts(GpuKernel::Pairs), 2, &odd).0, Kernel::Sweep);
        assert_eq!(choice(&opts(GpuKernel::Shared), 2, &even).0, Kernel::Tiled);
        assert_eq!(choice(&opts(GpuKernel::Cached), 2, &even).0, Kernel::Sweep);
        let tuned = StencilOptions {
            gpu_chunk: 3,
            gpu_block: 64,
            ..auto
        };
        assert_eq!(choice(&tuned, 2, &even), (Kernel::Pairs, 3, 64));
    }

    #[test]
    fn two_steps_by_default_from_the_measured_size() {
        assert_eq!(auto_steps(255 * 256 * 256), 1);
        assert_eq!(auto_steps(256 * 256 * 256), 2);
    }
}
