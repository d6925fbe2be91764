//! The NCCL transport of [`DeviceExchanger`](crate::DeviceExchanger)
//! (feature `cuda`): every remote face travels through
//! [`gpu::nccl::NcclLinks`], one link each way per remote neighbour.
//!
//! `post` packs every outgoing face into its link's buffer with kernels on
//! `main`, queues the NCCL group (sends and receives, on the links' own
//! stream after those kernels) and the periodic self-copies on `main`;
//! `finish` unpacks each incoming face from its buffer as its sender's
//! notice arrives. So, as with the other transports, work queued after
//! `post` sees the self-copied ghosts without waiting for the messages.
//!
//! The ranks need a GPU each (NCCL's rule); they may be threads of one
//! process or processes on any number of machines. The tests also route
//! a rank's periodic faces through NCCL (sends to itself, `loopback`), so
//! that one GPU runs the packing, the pairing of messages with ghost
//! regions and the unpacking of the remote path.

use crate::device::{DeviceElem, DeviceField};
use crate::direct::{check_device_fields, check_rank, copy_self, leaked, pack_face, unpack_face};
use crate::exchange::{check_same_fields, ExchangeStats};
use crate::field::{FieldLayout, Region};
use crate::topology::{dir_index, Topology};
use crate::HaloError;
use comm::Communicator;
use gpu::cuda::Device;
use gpu::links::{LinkError, LinkSpec};
use gpu::nccl::NcclLinks;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn link_err(e: LinkError) -> HaloError {
    match e {
        LinkError::Comm(c) => HaloError::Comm(c),
        LinkError::Device(d) => HaloError::Device(d.to_string()),
        other => HaloError::Invalid(format!("NCCL exchange: {other}")),
    }
}

pub(crate) struct NcclEx<T: DeviceElem> {
    device: Arc<Device>,
    pub(crate) topo: Topology,
    components: usize,
    links: NcclLinks<T>,
    /// The neighbour of link `k`, outgoing and incoming alike.
    linked: Vec<usize>,
    /// The periodic self-copies (none with `loopback`).
    self_copies: Vec<(Region, Region)>,
    layouts: Vec<FieldLayout>,
    pub(crate) stats: ExchangeStats,
}

impl<T: DeviceElem> NcclEx<T> {
    /// Collective over `comm`. `loopback`: the rank's own periodic faces
    /// go through NCCL too, instead of being copied.
    pub(crate) fn new(
        comm: &dyn Communicator,
        topo: &Topology,
        device: &Arc<Device>,
        components: usize,
        channel: u16,
        loopback: bool,
    ) -> Result<Self, HaloError> {
        let me = topo.rank();
        let spec = |peer: usize, dir: usize, len: usize| LinkSpec {
            peer,
            key: dir as u32,
            len,
            notice_tag: u32::from(channel) * 27 + dir as u32,
            // NCCL links send no acknowledgements.
            ack_tag: 0,
        };
        let (mut outs, mut ins, mut linked) = (vec![], vec![], vec![]);
        for (i, nb) in topo
            .neighbors()
            .iter()
            .enumerate()
            .filter(|(_, nb)| loopback || nb.rank != me)
        {
            linked.push(i);
            outs.push(spec(
                nb.rank,
                dir_index(nb.offset),
                nb.send.len() * components,
            ));
            // The link from this neighbour runs in direction -offset.
            let back = dir_index(nb.offset.map(|x| -x));
            ins.push(spec(nb.rank, back, nb.recv.len() * components));
        }
        let links = NcclLinks::new(comm, device, &outs, &ins).map_err(link_err)?;
        let self_copies = if loopback {
            Vec::new()
        } else {
            topo.self_copies()
        };
        Ok(NcclEx {
            device: device.clone(),
            topo: topo.clone(),
            components,
            links,
            linked,
            self_copies,
            layouts: Vec::new(),
            stats: ExchangeStats::default(),
        })
    }

    pub(crate) fn drain(&mut self, comm: &dyn Communicator) -> Result<bool, HaloError> {
        self.links.drain(comm).map_err(link_err)
    }

    pub(crate) fn post(
        &mut self,
        comm: &dyn Communicator,
        fields: &mut [&mut DeviceField<T>],
    ) -> Result<u64, HaloError> {
        let t0 = Instant::now();
        check_rank(comm, &self.topo)?;
        if self.links.drain(comm).map_err(link_err)? {
            return Err(leaked());
        }
        check_device_fields(&self.topo, self.components, &self.device, fields)?;
        self.layouts.clear();
        self.layouts.extend(fields.iter().map(|f| f.layout()));
        // Pack every outgoing buffer before the group is queued.
        let nbs = self.topo.neighbors();
        for (k, &i) in self.linked.iter().enumerate() {
            let p = pack_face(fields, &nbs[i].send, &mut self.links.outgoing(k))?;
            self.stats.messages += 1;
            self.stats.values_sent += p as u64;
        }
        let round = self.links.post(comm).map_err(link_err)?;
        self.stats.values_copied += copy_self(fields, &self.self_copies)?;
        self.stats.exchanges += 1;
        self.stats.post_time += t0.elapsed();
        Ok(round)
    }

    pub(crate) fn finish(
        &mut self,
        comm: &dyn Communicator,
        fields: &mut [&mut DeviceField<T>],
        round: u64,
    ) -> Result<(), HaloError> {
        check_same_fields(fields.iter().map(|f| f.layout()), &self.layouts)?;
        let nbs = self.topo.neighbors();
        let mut wait_time = Duration::ZERO;
        let mut unpack_time = Duration::ZERO;
        loop {
            let t = Instant::now();
            let Some(k) = self.links.arrival(comm, round).map_err(link_err)? else {
                break;
            };
            wait_time += t.elapsed();
            let t = Instant::now();
            unpack_face(fields, &nbs[self.linked[k]].recv, &self.links.incoming(k))?;
            unpack_time += t.elapsed();
        }
        self.stats.wait_time += wait_time;
        self.stats.unpack_time += unpack_time;
        Ok(())
    }
}
