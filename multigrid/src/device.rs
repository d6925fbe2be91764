//! The device path (feature `cuda`): V-cycles and MG-preconditioned
//! conjugate gradients on an NVIDIA GPU, with the host's bits.
//!
//! A [`DeviceHierarchy`] takes a built [`Hierarchy`] (its decomposition,
//! coefficients and coarse levels) and keeps on the device every smoothing
//! level that lives on all the ranks of the communicator: the stencil
//! (weights and diagonal, the inverse computed where it is used, or the
//! constant stencil's wall terms),
//! the fields, and the coarser level laid out on the same ranks. Below
//! those, where a level is gathered onto fewer ranks, and at the bottom,
//! the cycle continues on the host (the restricted right-hand side goes
//! down, the correction comes back: a coarse level's worth of values).
//! Fields, coefficients and every fine-level vector stay on the device;
//! the host sees scalars and the coarse levels. Halos move through
//! [`halo::DeviceExchanger`]: on the device between the ranks of one
//! machine (several may share one GPU), staged through the host or by NCCL
//! otherwise ([`DeviceOptions::transport`]).
//!
//! Every kernel does the host's operations in the host's order, compiled
//! without fused multiply-adds, and the dot products are exact
//! ([`comm::exact::ExactSum`]'s limbs, accumulated on the device), so that
//! the iterates, the residual history and the iteration count are those of
//! [`Hierarchy::solve_pcg`] on the host, bit for bit. The kernels are
//! checked against the host code on the host (`src/emulate.rs`); the whole
//! path against the host solver by `tests/device.rs`, on a GPU (`cargo
//! xtask gpu`).

use crate::hierarchy::LevelView;
use crate::level::{BoxGeom, Stencil};
use crate::{Hierarchy, MgError, SolveReport};
use comm::exact::{allreduce_exact_sums, ExactSum};
use comm::Communicator;
use gpu::cuda::cudarc::driver::{CudaFunction, CudaSlice, LaunchArgs, LaunchConfig, PushKernelArg};
use gpu::cuda::Device;
use halo::{
    DeviceExchanger, DeviceField, DeviceRegion, Field, FieldLayout, Region, Topology, Transport,
};
use std::sync::Arc;

/// The kernels' module name and source.
const MODULE: &str = "multigrid_f64";

fn source() -> String {
    format!(
        "#define SWEEP_TK {}\n#define SWEEP_TJ {}\n{}{}",
        SWEEP_BLOCK.0,
        SWEEP_BLOCK.1,
        halo::DeviceRegion::SOURCE,
        include_str!("../kernels/mg.cu")
    )
}

/// Words of one exact sum on the device (the limbs and five counts).
const WORDS: usize = ExactSum::WORDS;

/// The most cells one exact-sum kernel adds: each limb gathers at most
/// `2^32` per value, so `2^30` values keep a limb's sum below `2^62`.
const MAX_SUM_CELLS: usize = 1 << 30;

/// How a [`DeviceHierarchy`] moves its halos, and the message channels it
/// takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceOptions {
    /// The device exchange's transport: `None` takes the direct exchange
    /// on the device where every rank is on one machine and the
    /// host-staged one otherwise (see [`DeviceExchanger::new`]).
    pub transport: Option<Transport>,
    /// The first of the [`CHANNELS_PER_LEVEL`]` * levels` message
    /// channels the hierarchy's exchangers take (one per level and per
    /// kind, so that no two of them share a channel; see
    /// [`DeviceHierarchy::channels`]); distinct from those of any other
    /// exchanger on the communicator (the host hierarchy's take 0-5).
    pub channel: u16,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions {
            transport: None,
            channel: 16,
        }
    }
}

fn dev(e: impl std::fmt::Display) -> MgError {
    MgError::Device(e.to_string())
}

fn launch(n: usize) -> LaunchConfig {
    gpu::cuda::launch_1d(n.clamp(1, 1 << 22), 256)
}

struct Kernels {
    smooth_var: CudaFunction,
    smooth_const: CudaFunction,
    restrict_var: CudaFunction,
    restrict_const: CudaFunction,
    prolong: CudaFunction,
    reflect: CudaFunction,
    copy: CudaFunction,
    axpy: CudaFunction,
    exact: CudaFunction,
    sweep_var: CudaFunction,
    sweep_const: CudaFunction,
    exact2: CudaFunction,
    residual_dot_var: CudaFunction,
    residual_dot_const: CudaFunction,
    update_dot: CudaFunction,
    /// Blocks of `mg_sweep_var` and `mg_sweep_const` a multiprocessor
    /// holds at once.
    sweep_blocks: (usize, usize),
}

impl Kernels {
    fn new(d: &Device) -> Result<Self, MgError> {
        let f = |e: &str| d.function(MODULE, source, e).map_err(MgError::from);
        let (sweep_var, sweep_const) = (f("mg_sweep_var")?, f("mg_sweep_const")?);
        let threads = SWEEP_BLOCK.0 * SWEEP_BLOCK.1;
        let per_sm = |k: &CudaFunction| {
            k.occupancy_max_active_blocks_per_multiprocessor(threads, 0, None)
                .map(|b| (b as usize).max(1))
                .map_err(|e| {
                    MgError::Device(format!(
                        "cuOccupancyMaxActiveBlocksPerMultiprocessor: {e:?}"
                    ))
                })
        };
        let sweep_blocks = (per_sm(&sweep_var)?, per_sm(&sweep_const)?);
        Ok(Kernels {
            smooth_var: f("mg_smooth_var")?,
            smooth_const: f("mg_smooth_const")?,
            restrict_var: f("mg_restrict_var")?,
            restrict_const: f("mg_restrict_const")?,
            prolong: f("mg_prolong_add")?,
            reflect: f("mg_reflect")?,
            copy: f("mg_copy")?,
            axpy: f("mg_axpy")?,
            exact: f("mg_exact_sum")?,
            sweep_var,
            sweep_const,
            exact2: f("mg_exact_sum2")?,
            residual_dot_var: f("mg_residual_dot_var")?,
            residual_dot_const: f("mg_residual_dot_const")?,
            update_dot: f("mg_update_dot")?,
            sweep_blocks,
        })
    }
}

/// A level's stencil in device memory.
enum DevStencil {
    Const {
        ih2: [f64; 3],
        wall: [CudaSlice<f64>; 3],
    },
    Var {
        w: [CudaSlice<f64>; 3],
        diag: CudaSlice<f64>,
    },
}

impl DevStencil {
    /// Pushes the stencil's kernel arguments (`VAR_ARGS` or `CONST_ARGS`
    /// of `kernels/mg.cu`).
    fn push_args<'a>(&'a self, a: &mut LaunchArgs<'a>) {
        match self {
            DevStencil::Var { w, diag } => {
                a.arg(&w[0]).arg(&w[1]).arg(&w[2]).arg(diag);
            }
            DevStencil::Const { ih2, wall } => {
                a.arg(&ih2[0]).arg(&ih2[1]).arg(&ih2[2]);
                a.arg(&wall[0]).arg(&wall[1]).arg(&wall[2]);
            }
        }
    }

    fn new(d: &Device, st: &Stencil) -> Result<Self, MgError> {
        Ok(match st {
            Stencil::Const { ih2, wall } => DevStencil::Const {
                ih2: *ih2,
                wall: [
                    d.upload(&wall[0], "multigrid wall terms")?,
                    d.upload(&wall[1], "multigrid wall terms")?,
                    d.upload(&wall[2], "multigrid wall terms")?,
                ],
            },
            // The kernels compute the inverse diagonal (`inv_of`).
            Stencil::Var { w, diag, .. } => DevStencil::Var {
                w: [
                    d.upload(&w[0], "multigrid face weights")?,
                    d.upload(&w[1], "multigrid face weights")?,
                    d.upload(&w[2], "multigrid face weights")?,
                ],
                diag: d.upload(diag, "multigrid diagonal")?,
            },
        })
    }
}

/// The coarser level of a device level, on the same ranks (ghost width 1).
struct DevChild {
    geom: BoxGeom,
    layout: FieldLayout,
    ex_full: DeviceExchanger<f64>,
    f: DeviceField,
    u: DeviceField,
}

/// The one-pass sweep of a communication-avoiding level (ghost width 2).
struct DevCa {
    /// The full neighbourhood, 2 deep (`u` before each sweep, `f` once a
    /// visit).
    ex: DeviceExchanger<f64>,
    /// The field each sweep writes; swapped with the level's `u` after it.
    u2: DeviceField,
    /// The owned cells and the ring the first colour covers.
    grown: Region,
}

/// One smoothing level on the device.
struct DevLevel {
    geom: BoxGeom,
    layout: FieldLayout,
    stencil: DevStencil,
    /// Faces, width 1.
    ex: DeviceExchanger<f64>,
    u: DeviceField,
    f: DeviceField,
    child: Option<DevChild>,
    ca: Option<DevCa>,
}

/// The thread block of `mg_sweep_*` (`SWEEP_TK` x `SWEEP_TJ` of
/// `kernels/mg.cu`): a tile of 30 x 6 columns with a 1-cell ring; the
/// kernel source is given these values (`source`).
const SWEEP_BLOCK: (u32, u32) = (32, 8);

/// The one-pass sweep's grid: about this many times as many blocks as
/// the multiprocessors hold at once.
const SWEEP_WAVES: usize = 3;

/// Message channels a device level takes (faces, the child's full halo,
/// the 2-deep halo of the one-pass sweep).
pub const CHANNELS_PER_LEVEL: u16 = 3;

/// Strides of a layout as the kernels take them.
fn strides(l: &FieldLayout) -> (i64, i64) {
    let s = l.strides();
    (s[0] as i64, s[1] as i64)
}

/// A multigrid hierarchy whose fine levels run on a GPU; see the module
/// documentation.
pub struct DeviceHierarchy {
    host: Hierarchy,
    device: Arc<Device>,
    k: Kernels,
    levels: Vec<DevLevel>,
    /// Exact-sum words, two sums' worth.
    sums: CudaSlice<u64>,
    /// Fine-level work fields of the solver, kept between solves.
    spare: Vec<DeviceField>,
    /// Halo exchanges the device path made (all levels), and those inside
    /// the sweeps.
    events: (u64, u64),
}

impl std::fmt::Debug for DeviceHierarchy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceHierarchy")
            .field("device", &self.device.info().name)
            .field("device_levels", &self.levels.len())
            .field("host", &self.host)
            .finish()
    }
}

impl DeviceHierarchy {
    /// Moves the levels of `host` that live on every rank of `comm` onto
    /// `device` (collective on `comm`, the communicator `host` was built
    /// on). Every rank first checks that its device has the memory its
    /// levels need (fields, stencil, coarse fields), before any allocates;
    /// where one is short, every rank returns the error of the lowest such
    /// rank.
    ///
    /// # Errors
    /// [`MgError::Device`]: a device too small (the bytes needed and
    /// free), a kernel that does not compile, a driver failure;
    /// [`MgError::Invalid`] on the other ranks when one fails.
    pub fn new(
        comm: &dyn Communicator,
        host: Hierarchy,
        device: Arc<Device>,
    ) -> Result<Self, MgError> {
        Self::with_options(comm, host, device, DeviceOptions::default())
    }

    /// The device bytes that [`new`](Self::new) allocates for `host` on
    /// this rank (fields, stencils and coarse fields of its device levels,
    /// without the solver's work fields, five fine fields that
    /// [`solve_pcg`](Self::solve_pcg) allocates on first use: see
    /// [`pcg_bytes`](Self::pcg_bytes)).
    pub fn bytes(host: &Hierarchy) -> usize {
        host.shared_levels().iter().map(bytes_of).sum::<usize>() + 2 * WORDS * 8
    }

    /// The device bytes of MG-PCG's work fields (five fine fields, six for
    /// a singular problem).
    pub fn pcg_bytes(host: &Hierarchy) -> usize {
        let fields = if host.problem().is_singular() { 6 } else { 5 };
        fields * 8 * host.layout().padded_len()
    }

    /// As [`new`](Self::new), with the halo transport and message channels
    /// of `opts`.
    ///
    /// # Errors
    /// As [`new`](Self::new); [`MgError::Invalid`] for a channel range
    /// beyond the exchangers' or a transport that cannot be built (see
    /// [`DeviceExchanger::new`]).
    pub fn with_options(
        comm: &dyn Communicator,
        host: Hierarchy,
        device: Arc<Device>,
        opts: DeviceOptions,
    ) -> Result<Self, MgError> {
        let views = host.shared_levels();
        let need: usize = Self::bytes(&host);
        let top = usize::from(opts.channel) + usize::from(CHANNELS_PER_LEVEL) * views.len();
        if top > usize::from(halo::MAX_CHANNEL) + 1 {
            return Err(MgError::Invalid(format!(
                "the device hierarchy's {} levels take the channels {}..{top}, beyond the exchangers' largest, {}",
                views.len(),
                opts.channel,
                halo::MAX_CHANNEL
            )));
        }
        let fits = device
            .memory()
            .map_err(MgError::from)
            .and_then(|(free, _)| {
                if need > free {
                    Err(MgError::Device(format!(
                        "the multigrid levels need {need} bytes on device {} ({}), {free} are free",
                        device.info().ordinal,
                        device.info().name
                    )))
                } else {
                    Ok(())
                }
            });
        agree(comm, fits)?;
        let k = Kernels::new(&device)?;
        let mut levels = Vec::with_capacity(views.len());
        for (l, v) in views.iter().enumerate() {
            let ch = opts.channel + CHANNELS_PER_LEVEL * l as u16;
            levels.push(DevLevel::new(comm, &device, v, ch, opts.transport)?);
        }
        drop(views);
        let sums = device.alloc_zeros(2 * WORDS, "multigrid exact sums")?;
        Ok(DeviceHierarchy {
            host,
            device,
            k,
            levels,
            sums,
            spare: Vec::new(),
            events: (0, 0),
        })
    }

    /// The solver's work fields (fine fields of the hierarchy's layout),
    /// to hand to another hierarchy of the same layout with
    /// [`give_work`](Self::give_work): hierarchies that solve one after
    /// the other (the three momentum solves and the pressure solve of a
    /// flow step) need one set between them. The next solve allocates
    /// what it lacks.
    pub fn take_work(&mut self) -> Vec<DeviceField> {
        std::mem::take(&mut self.spare)
    }

    /// Work fields for the solver (see [`take_work`](Self::take_work)).
    ///
    /// # Errors
    /// [`MgError::Invalid`] for a field of another layout or of another
    /// [`Device`] handle (the fields are dropped).
    pub fn give_work(&mut self, fields: Vec<DeviceField>) -> Result<(), MgError> {
        for f in &fields {
            self.check("a work field", f)?;
            if !Arc::ptr_eq(f.device(), &self.device) {
                return Err(MgError::Invalid(format!(
                    "a work field of another device handle (device {}), not the hierarchy's (device {}, whose stream orders its work)",
                    f.device().info().ordinal,
                    self.device.info().ordinal
                )));
            }
        }
        self.spare.extend(fields);
        Ok(())
    }

    /// The message channels the hierarchy takes from
    /// [`DeviceOptions::channel`] on
    /// ([`CHANNELS_PER_LEVEL`]` * `[`device_levels`](Self::device_levels)).
    pub fn channels(&self) -> u16 {
        CHANNELS_PER_LEVEL * self.levels.len() as u16
    }

    /// The host hierarchy (problem, options, decomposition, the levels
    /// below the device's).
    pub fn host(&self) -> &Hierarchy {
        &self.host
    }

    /// The host hierarchy back (the device memory is freed).
    pub fn into_host(self) -> Hierarchy {
        self.host
    }

    /// The host hierarchy, to change its options
    /// ([`Hierarchy::set_options`]).
    pub fn host_mut(&mut self) -> &mut Hierarchy {
        &mut self.host
    }

    /// The device.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// Smoothing levels held on the device (the finest ones).
    pub fn device_levels(&self) -> usize {
        self.levels.len()
    }

    /// The halo transport of the device levels.
    pub fn transport(&self) -> Transport {
        self.levels[0].ex.transport()
    }

    /// The layout the solution and right-hand side must have (the host
    /// hierarchy's [`layout`](Hierarchy::layout)).
    pub fn layout(&self) -> FieldLayout {
        self.host.layout()
    }

    /// A zero device field with [`layout`](Self::layout).
    pub fn new_field(&self) -> Result<DeviceField, MgError> {
        Ok(DeviceField::new(
            &self.device,
            self.layout(),
            "multigrid field",
        )?)
    }

    fn check(&self, what: &str, f: &DeviceField) -> Result<(), MgError> {
        if f.layout() != self.layout() {
            return Err(MgError::Invalid(format!(
                "{what} has layout {:?}, the hierarchy's is {:?}",
                f.layout(),
                self.layout()
            )));
        }
        Ok(())
    }

    // ---- kernels -------------------------------------------------------

    fn exchange(
        ex: &mut DeviceExchanger<f64>,
        comm: &dyn Communicator,
        u: &mut DeviceField,
    ) -> Result<(), MgError> {
        ex.exchange(comm, &mut [u])?;
        Ok(())
    }

    /// One colour of a red-black sweep over the owned cells of level `l`.
    fn smooth_colour(&mut self, l: usize, colour: usize, omega: f64) -> Result<(), MgError> {
        let lv = &mut self.levels[l];
        let own = lv.geom.owned();
        let b = DeviceRegion::from(&own);
        let (s0, s1) = strides(&lv.layout);
        let n = own.shape();
        let threads = (n[0] * n[1] * n[2].div_ceil(2)) as i64;
        let parity = (lv.geom.parity() % 2) as i32;
        let colour = colour as i32;
        let stream = self.device.main();
        let (u, f) = (&mut lv.u, &lv.f);
        let kernel = match lv.stencil {
            DevStencil::Var { .. } => &self.k.smooth_var,
            DevStencil::Const { .. } => &self.k.smooth_const,
        };
        let mut a = stream.launch_builder(kernel);
        a.arg(u.data_mut()).arg(f.data());
        lv.stencil.push_args(&mut a);
        a.arg(&b).arg(&s0).arg(&s1).arg(&parity).arg(&colour);
        a.arg(&omega).arg(&threads);
        // SAFETY: the arguments match `mg_smooth_var` or `mg_smooth_const`;
        // the region is the owned box of the level's layout, every cell's
        // neighbours lie inside the padded arrays (ghost width >= 1), and
        // the wall arrays cover the padded extents.
        unsafe { a.launch(launch(threads as usize)) }.map_err(dev)?;
        Ok(())
    }

    /// One communication-avoiding sweep of level `l` in one pass over
    /// memory: a 2-deep exchange of `u`, then `mg_sweep_*` from `u` into
    /// the level's second field, which becomes its `u` (`f`'s ghost ring
    /// current).
    fn sweep(
        &mut self,
        comm: &dyn Communicator,
        l: usize,
        first: usize,
        omega: f64,
    ) -> Result<(), MgError> {
        let sms = self.device.info().multiprocessors.max(1);
        let lv = &mut self.levels[l];
        let (kernel, per_sm) = match lv.stencil {
            DevStencil::Var { .. } => (&self.k.sweep_var, self.k.sweep_blocks.0),
            DevStencil::Const { .. } => (&self.k.sweep_const, self.k.sweep_blocks.1),
        };
        let ca = lv.ca.as_mut().expect("a communication-avoiding level");
        ca.ex.exchange(comm, &mut [&mut lv.u])?;
        self.events.0 += 1;
        self.events.1 += 1;
        let own = lv.geom.owned();
        let n = own.shape().map(|x| x + 2);
        let (tk, tj) = (SWEEP_BLOCK.0 as usize - 2, SWEEP_BLOCK.1 as usize - 2);
        let (gx, gy) = (n[2].div_ceil(tk), n[1].div_ceil(tj));
        // Chunks of planes: SWEEP_WAVES times as many blocks as the
        // multiprocessors hold at once, each chunk at least 2 planes
        // (every chunk recomputes the first colour of its two
        // neighbouring planes). A block marches through its planes one
        // after the other, so on a small level short chunks keep the
        // sweep from waiting out a memory latency per plane of the level.
        let chunks = (SWEEP_WAVES * per_sm * sms)
            .div_ceil(gx * gy)
            .clamp(1, (n[0] / 2).max(1));
        let chunk = n[0].div_ceil(chunks);
        let gz = n[0].div_ceil(chunk);
        let cfg = LaunchConfig {
            grid_dim: (gx as u32, gy as u32, gz as u32),
            block_dim: (SWEEP_BLOCK.0, SWEEP_BLOCK.1, 1),
            shared_mem_bytes: 0,
        };
        let p = lv.layout.padded().map(|x| x as i32);
        let (s0, s1) = strides(&lv.layout);
        let parity = (lv.geom.parity() % 2) as i32;
        let (first, chunk) = (first as i32, chunk as i32);
        let (ob, gb) = (DeviceRegion::from(&own), DeviceRegion::from(&ca.grown));
        let stream = self.device.main();
        let mut a = stream.launch_builder(kernel);
        a.arg(ca.u2.data_mut()).arg(lv.u.data()).arg(lv.f.data());
        lv.stencil.push_args(&mut a);
        a.arg(&ob)
            .arg(&gb)
            .arg(&p[0])
            .arg(&p[1])
            .arg(&p[2])
            .arg(&s0)
            .arg(&s1);
        a.arg(&parity).arg(&first).arg(&omega).arg(&chunk);
        // SAFETY: the arguments match `mg_sweep_var` or `mg_sweep_const`;
        // the layout's ghost width is 2 (a communication-avoiding level),
        // so the owned box grown by 2 lies in the padded arrays: the kernel
        // reads `u` there (the cells of `grown`, within 1 of the owned box,
        // and their neighbours) and writes `u2` only in the owned box grown
        // by 1 (its loads ahead stay within the padded extents p0, p1,
        // p2); both fields and the stencil have the level's layout; the
        // block is the kernel's SWEEP_TK x SWEEP_TJ (defined from
        // SWEEP_BLOCK in `source`).
        unsafe { a.launch(cfg) }.map_err(dev)?;
        std::mem::swap(&mut lv.u, &mut ca.u2);
        Ok(())
    }

    /// `sweeps` sweeps of level `l`, each colour `order[0]` then
    /// `order[1]`: on a communication-avoiding level one pass each
    /// ([`sweep`](Self::sweep)), otherwise an exchange before each colour
    /// (the host's plain order; all of the host's orders give the same
    /// bits).
    fn smooth(
        &mut self,
        comm: &dyn Communicator,
        l: usize,
        sweeps: usize,
        order: [usize; 2],
    ) -> Result<(), MgError> {
        let omega = self.host.options().omega;
        if self.levels[l].ca.is_some() {
            for _ in 0..sweeps {
                self.sweep(comm, l, order[0], omega)?;
            }
            return Ok(());
        }
        for _ in 0..sweeps {
            for c in order {
                let lv = &mut self.levels[l];
                Self::exchange(&mut lv.ex, comm, &mut lv.u)?;
                self.events.0 += 1;
                self.events.1 += 1;
                self.smooth_colour(l, c, omega)?;
            }
        }
        Ok(())
    }

    /// The 8-cell average of level `l`'s residual into its child's `f`
    /// (`u`'s ghosts current).
    fn restrict(&mut self, l: usize) -> Result<(), MgError> {
        let lv = &mut self.levels[l];
        let child = lv.child.as_mut().expect("a level with a child");
        let n = child.layout.owned.map(|x| x as i32);
        let (gf, gc) = (lv.layout.ghost[0] as i32, child.layout.ghost[0] as i32);
        let (sf0, sf1) = strides(&lv.layout);
        let (sc0, sc1) = strides(&child.layout);
        let cells = child.layout.owned.iter().product::<usize>();
        let stream = self.device.main();
        let kernel = match lv.stencil {
            DevStencil::Var { .. } => &self.k.restrict_var,
            DevStencil::Const { .. } => &self.k.restrict_const,
        };
        let mut a = stream.launch_builder(kernel);
        a.arg(child.f.data_mut()).arg(lv.u.data()).arg(lv.f.data());
        lv.stencil.push_args(&mut a);
        a.arg(&n[0])
            .arg(&n[1])
            .arg(&n[2])
            .arg(&gf)
            .arg(&sf0)
            .arg(&sf1);
        a.arg(&gc).arg(&sc0).arg(&sc1);
        // SAFETY: the arguments match `mg_restrict_*`; the child's owned
        // box is the level's halved (even blocks), so every fine cell read
        // is an owned cell of the level and its neighbours lie in its
        // padded arrays.
        unsafe { a.launch(launch(cells)) }.map_err(dev)?;
        Ok(())
    }

    /// Level `l`'s child's `u`: ghosts beyond walls reflected (odd for
    /// Dirichlet, even for Neumann), axes in order; then `u += P u_c`.
    fn prolong(&mut self, l: usize) -> Result<(), MgError> {
        let faces = self.host.problem().faces();
        let lv = &mut self.levels[l];
        let child = lv.child.as_mut().expect("a level with a child");
        let stream = self.device.main();
        let cg = child.geom;
        let p = child.layout.padded().map(|x| x as i32);
        let (sc0, sc1) = strides(&child.layout);
        let g = cg.g;
        for d in 0..3 {
            if faces[d][0] == crate::Boundary::Periodic {
                continue;
            }
            let low = (cg.lo[d] == 0).then_some((g - 1, g, faces[d][0]));
            let high = (cg.lo[d] + cg.n[d] == cg.global[d]).then_some((
                g + cg.n[d],
                g + cg.n[d] - 1,
                faces[d][1],
            ));
            for (ghost, inner, bc) in low.into_iter().chain(high) {
                let sign: f64 = if bc == crate::Boundary::Dirichlet {
                    -1.0
                } else {
                    1.0
                };
                let (dd, gh, inn) = (d as i32, ghost as i32, inner as i32);
                let cells = (p[(d + 1) % 3] as usize) * (p[(d + 2) % 3] as usize);
                let mut a = stream.launch_builder(&self.k.reflect);
                a.arg(child.u.data_mut())
                    .arg(&dd)
                    .arg(&gh)
                    .arg(&inn)
                    .arg(&sign);
                a.arg(&p[0]).arg(&p[1]).arg(&p[2]).arg(&sc0).arg(&sc1);
                // SAFETY: the arguments match `mg_reflect`; both planes lie
                // inside the child's padded box.
                unsafe { a.launch(launch(cells)) }.map_err(dev)?;
            }
        }
        let n = lv.layout.owned.map(|x| x as i32);
        let (gf, gc) = (lv.layout.ghost[0] as i32, child.layout.ghost[0] as i32);
        let (sf0, sf1) = strides(&lv.layout);
        let cells = lv.layout.owned.iter().product::<usize>();
        let mut a = stream.launch_builder(&self.k.prolong);
        a.arg(lv.u.data_mut()).arg(child.u.data());
        a.arg(&n[0])
            .arg(&n[1])
            .arg(&n[2])
            .arg(&gf)
            .arg(&sf0)
            .arg(&sf1);
        a.arg(&gc).arg(&sc0).arg(&sc1);
        // SAFETY: the arguments match `mg_prolong_add`; every coarse value
        // read is an owned or a first-layer ghost cell of the child.
        unsafe { a.launch(launch(cells)) }.map_err(dev)?;
        Ok(())
    }

    /// Copies the owned cells of `src` into those of `dst` (same owned
    /// shape, any ghost widths).
    fn copy_owned(
        k: &Kernels,
        device: &Device,
        src: &DeviceField,
        dst: &mut DeviceField,
    ) -> Result<(), MgError> {
        let (ls, ld) = (src.layout(), dst.layout());
        if ls.owned != ld.owned {
            return Err(MgError::Invalid(format!(
                "copy between owned boxes {:?} and {:?}",
                ls.owned, ld.owned
            )));
        }
        let (sb, db) = (
            DeviceRegion::from(&ls.owned_region()),
            DeviceRegion::from(&ld.owned_region()),
        );
        let (ss0, ss1) = strides(&ls);
        let (ds0, ds1) = strides(&ld);
        let n = ls.owned.iter().product::<usize>();
        let mut a = device.main().launch_builder(&k.copy);
        a.arg(dst.data_mut()).arg(src.data());
        a.arg(&db).arg(&ds0).arg(&ds1).arg(&sb).arg(&ss0).arg(&ss1);
        // SAFETY: the arguments match `mg_copy`; both regions are the
        // owned boxes of their fields' layouts, of the same shape.
        unsafe { a.launch(launch(n)) }.map_err(dev)?;
        Ok(())
    }

    /// The fine-level vector operations over the owned cells (see
    /// `mg_axpy`): 0 `x += a p`, 1 `p = z + b p`, 2 both, 3 `x -= a`.
    fn axpy(
        &self,
        mode: i32,
        x: Option<&mut DeviceField>,
        p: Option<&mut DeviceField>,
        z: Option<&DeviceField>,
        alpha: f64,
        beta: f64,
    ) -> Result<(), MgError> {
        let lay = self.layout();
        let own = lay.owned_region();
        let b = DeviceRegion::from(&own);
        let (s0, s1) = strides(&lay);
        let n = lay.owned.iter().product::<usize>();
        let null = 0u64;
        let mut a = self.device.main().launch_builder(&self.k.axpy);
        a.arg(&mode);
        match x {
            Some(x) => a.arg(x.data_mut()),
            None => a.arg(&null),
        };
        match p {
            Some(p) => a.arg(p.data_mut()),
            None => a.arg(&null),
        };
        match z {
            Some(z) => a.arg(z.data()),
            None => a.arg(&null),
        };
        a.arg(&alpha).arg(&beta).arg(&b).arg(&s0).arg(&s1);
        // SAFETY: the arguments match `mg_axpy`, and each mode reads and
        // writes only the fields it is given (the callers pass the ones
        // their mode names); the region is the owned box of the layout
        // every fine field has (checked at the public entry points).
        unsafe { a.launch(launch(n)) }.map_err(dev)?;
        Ok(())
    }

    /// The fine level's owned box, its strides, and the launch of a pass
    /// with exact sums over it (`blocks_per_sm` blocks of 256 a multiprocessor,
    /// grid-stride), with the sums' words zeroed; an error past
    /// `MAX_SUM_CELLS` owned cells.
    fn sum_pass(
        &mut self,
        blocks_per_sm: usize,
    ) -> Result<(DeviceRegion, (i64, i64), LaunchConfig), MgError> {
        let lay = self.layout();
        let n = lay.owned.iter().product::<usize>();
        if n > MAX_SUM_CELLS {
            return Err(MgError::Invalid(format!(
                "{n} cells on this rank: the device's exact sums take at most {MAX_SUM_CELLS}"
            )));
        }
        self.device
            .main()
            .memset_zeros(&mut self.sums)
            .map_err(dev)?;
        let blocks = n
            .div_ceil(256)
            .clamp(1, blocks_per_sm * self.device.info().multiprocessors.max(1));
        let cfg = LaunchConfig {
            grid_dim: (blocks as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        Ok((DeviceRegion::from(&lay.owned_region()), strides(&lay), cfg))
    }

    /// The first `count` exact sums of the words, reduced over `comm`.
    fn reduce_sums(&self, comm: &dyn Communicator, count: usize) -> Result<Vec<f64>, MgError> {
        let words = self.device.download(&self.sums)?;
        let accs: Vec<ExactSum> = (0..count)
            .map(|t| {
                let w: Vec<i64> = words[t * WORDS..(t + 1) * WORDS]
                    .iter()
                    .map(|&x| x as i64)
                    .collect();
                ExactSum::decode(&w)
            })
            .collect();
        Ok(allreduce_exact_sums(comm, &accs)?)
    }

    /// This rank's exact sums over the owned fine cells, reduced over
    /// `comm`: per item, mode 0 `sum a b` (rounded products), 1 `sum a`,
    /// 2 `sum |a|`. At most two items.
    fn sums(
        &mut self,
        comm: &dyn Communicator,
        items: &[(i32, &DeviceField, Option<&DeviceField>)],
    ) -> Result<Vec<f64>, MgError> {
        debug_assert!(items.len() <= 2);
        let (b, (s0, s1), cfg) = self.sum_pass(4)?;
        let stream = self.device.main();
        for (t, (mode, a, bf)) in items.iter().enumerate() {
            let mut out = self.sums.slice_mut(t * WORDS..(t + 1) * WORDS);
            let null = 0u64;
            let mut l = stream.launch_builder(&self.k.exact);
            l.arg(&mut out).arg(a.data());
            match bf {
                Some(bf) => l.arg(bf.data()),
                None => l.arg(&null),
            };
            l.arg(mode).arg(&b).arg(&s0).arg(&s1);
            // SAFETY: the arguments match `mg_exact_sum` (`b` read only in
            // mode 0, where it is given); `out` holds `WORDS` words; the
            // region is the owned box of the fields' layout.
            unsafe { l.launch(cfg) }.map_err(dev)?;
        }
        self.reduce_sums(comm, items.len())
    }

    /// `(sum a b, sum a c)` over the owned fine cells in one pass, exact,
    /// reduced over `comm`.
    fn sums2(
        &mut self,
        comm: &dyn Communicator,
        a: &DeviceField,
        b: &DeviceField,
        c: &DeviceField,
    ) -> Result<[f64; 2], MgError> {
        // Two sums a thread hold more registers: twice the blocks (measured
        // on an H100 at 256^3: 0.34 ms against 0.41 ms with four a
        // multiprocessor).
        let (bx, (s0, s1), cfg) = self.sum_pass(8)?;
        let mut l = self.device.main().launch_builder(&self.k.exact2);
        l.arg(&mut self.sums)
            .arg(a.data())
            .arg(b.data())
            .arg(c.data());
        l.arg(&bx).arg(&s0).arg(&s1);
        // SAFETY: the arguments match `mg_exact_sum2`; `sums` holds two
        // sums' words; the region is the owned box of the fields' layout.
        unsafe { l.launch(cfg) }.map_err(dev)?;
        let d = self.reduce_sums(comm, 2)?;
        Ok([d[0], d[1]])
    }

    /// In one pass over the owned fine cells (`u`'s ghosts current): with
    /// `f`, `out = f - A u` and the exact global `(out, out)`; without,
    /// `out = A u` and `(u, out)`.
    fn residual_dot(
        &mut self,
        comm: &dyn Communicator,
        out: &mut DeviceField,
        u: &DeviceField,
        f: Option<&DeviceField>,
    ) -> Result<f64, MgError> {
        let (b, (s0, s1), cfg) = self.sum_pass(4)?;
        let lv = &self.levels[0];
        let kernel = match lv.stencil {
            DevStencil::Var { .. } => &self.k.residual_dot_var,
            DevStencil::Const { .. } => &self.k.residual_dot_const,
        };
        let null = 0u64;
        let mut a = self.device.main().launch_builder(kernel);
        a.arg(out.data_mut()).arg(u.data());
        match f {
            Some(f) => a.arg(f.data()),
            None => a.arg(&null),
        };
        lv.stencil.push_args(&mut a);
        a.arg(&b).arg(&s0).arg(&s1).arg(&mut self.sums);
        // SAFETY: the arguments match `mg_residual_dot_*` (`f` a device
        // pointer or null, which the kernel tests); the region is the
        // owned box of the fields' layout (checked by the callers), whose
        // cells' neighbours lie in the padded arrays; `sums` holds a sum's
        // words.
        unsafe { a.launch(cfg) }.map_err(dev)?;
        Ok(self.reduce_sums(comm, 1)?[0])
    }

    /// `r = o - alpha p` over the owned fine cells and the exact global
    /// `(r, r)`, in one pass.
    fn update_dot(
        &mut self,
        comm: &dyn Communicator,
        r: &mut DeviceField,
        o: &DeviceField,
        p: &DeviceField,
        alpha: f64,
    ) -> Result<f64, MgError> {
        let (b, (s0, s1), cfg) = self.sum_pass(4)?;
        let mut a = self.device.main().launch_builder(&self.k.update_dot);
        a.arg(r.data_mut()).arg(o.data()).arg(p.data()).arg(&alpha);
        a.arg(&b).arg(&s0).arg(&s1).arg(&mut self.sums);
        // SAFETY: the arguments match `mg_update_dot`; the region is the
        // owned box of the fields' layout; `sums` holds a sum's words.
        unsafe { a.launch(cfg) }.map_err(dev)?;
        Ok(self.reduce_sums(comm, 1)?[0])
    }

    /// As the host's `check_finite`: where `value` (a norm or dot product
    /// of `x`) is not finite, `x` comes to the host and every rank returns
    /// the error naming its first non-finite cell (collective).
    fn check_finite(
        &self,
        comm: &dyn Communicator,
        value: f64,
        what: &'static str,
        iteration: usize,
        x: &DeviceField,
    ) -> Result<(), MgError> {
        if value.is_finite() {
            return Ok(());
        }
        let mut h = Field::new(x.layout());
        x.download(&mut h)?;
        crate::hierarchy::check_finite(comm, &self.host, value, what, iteration, &h)
    }

    // ---- the cycle -----------------------------------------------------

    /// The V-cycle of device level `l` (its `u` the initial guess, `f` the
    /// right-hand side); `symmetric`: black-red post-smoothing.
    fn cycle(&mut self, comm: &dyn Communicator, l: usize, symmetric: bool) -> Result<(), MgError> {
        let opts = *self.host.options();
        if self.levels[l].child.is_none() {
            // One level: the dense solve of the fine grid, on the host.
            let lay = self.levels[l].layout;
            let (mut f, mut u) = (Field::new(lay), Field::new(lay));
            self.levels[l].f.download(&mut f)?;
            self.levels[l].u.download(&mut u)?;
            self.host.bottom_solve_fine(comm, &f, &mut u)?;
            self.levels[l].u.upload(&u)?;
            return Ok(());
        }
        if opts.pre_sweeps + opts.post_sweeps > 0 {
            // The one-pass sweep reads f's ghost ring.
            let lv = &mut self.levels[l];
            if let Some(ca) = lv.ca.as_mut() {
                ca.ex.exchange(comm, &mut [&mut lv.f])?;
                self.events.0 += 1;
            }
        }
        self.smooth(comm, l, opts.pre_sweeps, [0, 1])?;
        {
            let lv = &mut self.levels[l];
            Self::exchange(&mut lv.ex, comm, &mut lv.u)?;
            self.events.0 += 1;
        }
        self.restrict(l)?;
        if l + 1 < self.levels.len() {
            let (cur, rest) = self.levels.split_at_mut(l + 1);
            let child = cur[l].child.as_mut().expect("checked above");
            let next = &mut rest[0];
            Self::copy_owned(&self.k, &self.device, &child.f, &mut next.f)?;
            self.device
                .main()
                .memset_zeros(next.u.data_mut())
                .map_err(dev)?;
            self.cycle(comm, l + 1, symmetric)?;
            let (cur, rest) = self.levels.split_at_mut(l + 1);
            let child = cur[l].child.as_mut().expect("checked above");
            Self::copy_owned(&self.k, &self.device, &rest[0].u, &mut child.u)?;
        } else {
            // The levels below live on the host: the coarse right-hand
            // side goes down, the correction comes back.
            let child = self.levels[l].child.as_mut().expect("checked above");
            child.f.download(self.host.child_fields(l).0)?;
            self.host.coarse_of(comm, l, symmetric)?;
            child.u.upload(self.host.child_fields(l).1)?;
        }
        {
            let child = self.levels[l].child.as_mut().expect("checked above");
            Self::exchange(&mut child.ex_full, comm, &mut child.u)?;
            self.events.0 += 1;
        }
        self.prolong(l)?;
        let post = if symmetric { [1, 0] } else { [0, 1] };
        self.smooth(comm, l, opts.post_sweeps, post)
    }

    /// One V-cycle for `A u = f`, improving `u` in place (collective), as
    /// [`Hierarchy::vcycle`].
    ///
    /// # Errors
    /// [`MgError::Invalid`] for fields of another layout or a device
    /// failure; communication errors.
    pub fn vcycle(
        &mut self,
        comm: &dyn Communicator,
        u: &mut DeviceField,
        f: &DeviceField,
    ) -> Result<(), MgError> {
        self.check("u", u)?;
        self.check("f", f)?;
        let stream = self.device.main().clone();
        stream
            .memcpy_dtod(f.data(), self.levels[0].f.data_mut())
            .map_err(dev)?;
        stream
            .memcpy_dtod(u.data(), self.levels[0].u.data_mut())
            .map_err(dev)?;
        self.cycle(comm, 0, false)?;
        stream
            .memcpy_dtod(self.levels[0].u.data(), u.data_mut())
            .map_err(dev)?;
        Ok(())
    }

    fn take_field(&mut self) -> Result<DeviceField, MgError> {
        match self.spare.pop() {
            Some(f) => Ok(f),
            None => self.new_field(),
        }
    }

    /// `x -= mean(x)` over the owned cells (exact global sum).
    fn remove_mean(&mut self, comm: &dyn Communicator, x: &mut DeviceField) -> Result<(), MgError> {
        let s = self.sums(comm, &[(1, x, None)])?[0];
        let n: usize = self.host.problem().shape.iter().product();
        let mean = s / n as f64;
        self.axpy(3, Some(x), None, None, mean, 0.0)
    }

    /// `z = M r`: one symmetric V-cycle from zero. `r` and `z` take the
    /// places of the fine level's `f` and `u` for the cycle (no copies;
    /// the cycle may leave `r`'s ghosts changed).
    fn precondition(
        &mut self,
        comm: &dyn Communicator,
        r: &mut DeviceField,
        z: &mut DeviceField,
    ) -> Result<(), MgError> {
        let fine = &mut self.levels[0];
        std::mem::swap(&mut fine.f, r);
        std::mem::swap(&mut fine.u, z);
        let cycled = self
            .device
            .main()
            .memset_zeros(fine.u.data_mut())
            .map_err(dev)
            .and_then(|()| self.cycle(comm, 0, true));
        let fine = &mut self.levels[0];
        std::mem::swap(&mut fine.f, r);
        std::mem::swap(&mut fine.u, z);
        cycled?;
        if self.host.problem().is_singular() {
            self.remove_mean(comm, z)?;
        }
        Ok(())
    }

    /// `out = f - A u` on the fine level (an exchange of `u` first) and
    /// the exact global `||out||²`.
    fn fine_residual(
        &mut self,
        comm: &dyn Communicator,
        u: &mut DeviceField,
        f: &DeviceField,
        out: &mut DeviceField,
    ) -> Result<f64, MgError> {
        Self::exchange(&mut self.levels[0].ex, comm, u)?;
        self.events.0 += 1;
        self.residual_dot(comm, out, u, Some(f))
    }

    /// `q = A p` (an exchange of `p` first) and the exact global `(p, q)`.
    fn apply_dot(
        &mut self,
        comm: &dyn Communicator,
        p: &mut DeviceField,
        q: &mut DeviceField,
    ) -> Result<f64, MgError> {
        Self::exchange(&mut self.levels[0].ex, comm, p)?;
        self.events.0 += 1;
        self.residual_dot(comm, q, p, None)
    }

    /// MG-preconditioned conjugate gradients, as [`Hierarchy::solve_pcg`]
    /// (the same operations in the same order, so the same iterates,
    /// residuals and iteration count; see the module documentation for
    /// what checks it), with every fine-level vector on the device
    /// (collective).
    ///
    /// # Errors
    /// As [`Hierarchy::solve_pcg`], and device failures.
    pub fn solve_pcg(
        &mut self,
        comm: &dyn Communicator,
        u: &mut DeviceField,
        f: &DeviceField,
    ) -> Result<SolveReport, MgError> {
        self.check("u", u)?;
        self.check("f", f)?;
        let events0 = self.events;
        let opts = *self.host.options();
        let singular = self.host.problem().is_singular();
        let stream = self.device.main().clone();
        // The right-hand side solved: for a singular problem f less its
        // round-off mean (a larger mean is an error).
        let mut b_own = None;
        if singular {
            let t = self.sums(comm, &[(1, f, None), (2, f, None)])?;
            if t[1] > 0.0 && t[0].abs() > 1e-10 * t[1] {
                let n: usize = self.host.problem().shape.iter().product();
                return Err(MgError::Incompatible {
                    mean: t[0] / n as f64,
                    relative: t[0].abs() / t[1],
                });
            }
            let mut b = self.take_field()?;
            stream.memcpy_dtod(f.data(), b.data_mut()).map_err(dev)?;
            self.remove_mean(comm, &mut b)?;
            b_own = Some(b);
        }
        let b = b_own.as_ref().unwrap_or(f);
        let bn = self.sums(comm, &[(0, b, Some(b))])?[0].sqrt();
        self.check_finite(comm, bn, "the right-hand side", 0, b)?;
        let scale = if bn > 0.0 { bn } else { 1.0 };
        let mut r = self.take_field()?;
        let mut res = vec![self.fine_residual(comm, u, b, &mut r)?.sqrt() / scale];
        self.check_finite(comm, res[0], "the residual", 0, &r)?;
        let mut z = self.take_field()?;
        let mut p = self.take_field()?;
        let mut q = self.take_field()?;
        let mut r_old = self.take_field()?;
        let mut it = 0;
        let mut cycles = 0;
        if res[0] > opts.tol {
            self.precondition(comm, &mut r, &mut z)?;
            cycles += 1;
            stream.memcpy_dtod(z.data(), p.data_mut()).map_err(dev)?;
            let mut rz = self.sums(comm, &[(0, &r, Some(&z))])?[0];
            let mut pending: Option<f64> = None;
            let mut beta: Option<f64> = None;
            while it < opts.max_iter {
                if let Some(bt) = beta {
                    match pending.take() {
                        Some(a) => self.axpy(2, Some(&mut *u), Some(&mut p), Some(&z), a, bt)?,
                        None => self.axpy(1, None, Some(&mut p), Some(&z), 0.0, bt)?,
                    }
                }
                let pq = self.apply_dot(comm, &mut p, &mut q)?;
                self.check_finite(comm, pq, "A p", it + 1, &q)?;
                if pq <= 0.0 {
                    break;
                }
                let alpha = rz / pq;
                pending = Some(alpha);
                std::mem::swap(&mut r, &mut r_old);
                // r = r_old - alpha q, and (r, r).
                let rr = self.update_dot(comm, &mut r, &r_old, &q, alpha)?;
                it += 1;
                res.push(rr.sqrt() / scale);
                self.check_finite(comm, res[it], "the residual", it, &r)?;
                if res[it] <= opts.tol {
                    break;
                }
                self.precondition(comm, &mut r, &mut z)?;
                cycles += 1;
                let d = self.sums2(comm, &z, &r, &r_old)?;
                beta = Some((d[0] - d[1]) / rz);
                rz = d[0];
            }
            if let Some(alpha) = pending {
                self.axpy(0, Some(&mut *u), Some(&mut p), None, alpha, 0.0)?;
            }
        }
        if singular {
            self.remove_mean(comm, u)?;
        }
        self.spare
            .extend([r, z, p, q, r_old].into_iter().chain(b_own));
        Ok(SolveReport {
            iterations: it,
            converged: res[it] <= opts.tol,
            residuals: res,
            halo_events: self.events.0 - events0.0,
            smooth_events: self.events.1 - events0.1,
            vcycles: cycles,
        })
    }
}

/// Device bytes of one level (fields, stencil, child fields).
fn bytes_of(v: &LevelView<'_>) -> usize {
    let len = v.layout.padded_len();
    let stencil = match v.stencil {
        Stencil::Var { .. } => 4 * len,
        Stencil::Const { wall, .. } => wall.iter().map(Vec::len).sum(),
    };
    let child = v.child.map_or(0, |(_, l, _)| 2 * l.padded_len());
    let fields = if v.ca.is_some() { 3 } else { 2 };
    8 * (fields * len + stencil + child)
}

impl DevLevel {
    /// Level `v` on the device, its exchangers on channels `ch` (faces),
    /// `ch + 1` (the child's full halo) and `ch + 2` (the 2-deep halo of
    /// a communication-avoiding level) (collective).
    fn new(
        comm: &dyn Communicator,
        d: &Arc<Device>,
        v: &LevelView<'_>,
        ch: u16,
        want: Option<Transport>,
    ) -> Result<Self, MgError> {
        let ex = |topo: &Topology, ch: u16| DeviceExchanger::new(comm, topo, d, 1, ch, want);
        let child = match v.child {
            None => None,
            Some((geom, layout, topo)) => Some(DevChild {
                geom,
                layout,
                ex_full: ex(topo, ch + 1)?,
                f: DeviceField::new(d, layout, "multigrid coarse right-hand side")?,
                u: DeviceField::new(d, layout, "multigrid coarse correction")?,
            }),
        };
        Ok(DevLevel {
            geom: v.geom,
            layout: v.layout,
            stencil: DevStencil::new(d, v.stencil)?,
            ex: ex(v.faces, ch)?,
            u: DeviceField::new(d, v.layout, "multigrid level field")?,
            f: DeviceField::new(d, v.layout, "multigrid level right-hand side")?,
            child,
            ca: match v.ca {
                None => None,
                Some((topo, grown)) => Some(DevCa {
                    ex: ex(topo, ch + 2)?,
                    u2: DeviceField::new(d, v.layout, "multigrid level field (sweep)")?,
                    grown,
                }),
            },
        })
    }
}

impl From<gpu::GpuError> for MgError {
    fn from(e: gpu::GpuError) -> Self {
        MgError::Device(e.to_string())
    }
}

/// One outcome on every rank (see the hierarchy's `agree`).
fn agree(comm: &dyn Communicator, local: Result<(), MgError>) -> Result<(), MgError> {
    comm::agree(comm, local).map_err(|e| match e {
        comm::Agreed::Mine(e) => e,
        comm::Agreed::Other { message, .. } => MgError::Invalid(message),
        comm::Agreed::Comm(e) => e.into(),
    })
}
