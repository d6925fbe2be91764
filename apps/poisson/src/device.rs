//! `backend = "cuda"`: the solve with the fine levels on a GPU
//! ([`multigrid::device::DeviceHierarchy`]).

use crate::config::Config;
use anyhow::Result;
use comm::Communicator;
use gpu::cuda::Device;
use halo::{DeviceField, Field};
use multigrid::device::DeviceHierarchy;
use multigrid::{Hierarchy, SolveReport};
use std::sync::Arc;

/// The device hierarchy with the right-hand side and the solution on the
/// device.
pub(crate) struct Run {
    dh: DeviceHierarchy,
    f: DeviceField,
    u: DeviceField,
}

impl Run {
    /// Opens this rank's GPU (`device`, or the rank's index on its machine
    /// modulo the device count) and moves `mg`'s fine levels and `f` onto
    /// it (collective).
    pub(crate) fn new(
        comm: &dyn Communicator,
        cfg: &Config,
        mg: Hierarchy,
        f: &Field,
    ) -> Result<Self> {
        let placement = gpu::place::place(comm, cfg.device)?;
        let dev = Arc::new(Device::open(placement.ordinal)?);
        let dh = DeviceHierarchy::new(comm, mg, dev.clone())?;
        let f = DeviceField::from_host(&dev, f, "right-hand side")?;
        let u = dh.new_field()?;
        Ok(Run { dh, f, u })
    }

    pub(crate) fn hierarchy(&self) -> &Hierarchy {
        self.dh.host()
    }

    pub(crate) fn hierarchy_mut(&mut self) -> &mut Hierarchy {
        self.dh.host_mut()
    }

    /// One MG-PCG solve from zero, complete on return.
    pub(crate) fn solve(&mut self, comm: &dyn Communicator) -> Result<SolveReport> {
        let dev = self.dh.device().clone();
        dev.main()
            .memset_zeros(self.u.data_mut())
            .map_err(|e| anyhow::anyhow!("zeroing the device solution: {e:?}"))?;
        let rep = self.dh.solve_pcg(comm, &mut self.u, &self.f)?;
        dev.synchronize()?;
        Ok(rep)
    }

    /// The solution into `u` and the host hierarchy back.
    pub(crate) fn finish(self, u: &mut Field) -> Result<Hierarchy> {
        self.u.download(u)?;
        Ok(self.dh.into_host())
    }

    /// The GPU's name and the levels on it.
    pub(crate) fn device(&self) -> (Option<String>, usize) {
        (
            Some(self.dh.device().info().name.clone()),
            self.dh.device_levels(),
        )
    }
}
