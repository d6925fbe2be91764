//! The exchange of device-resident fields (feature `cuda`):
//! [`DeviceExchanger`], direct on the device between the ranks of one
//! machine, or host-staged.
//!
//! **Direct.** Every remote neighbour is a pair of [`gpu::links`] links
//! (one each way, keyed by the direction from the sender): `post` waits for
//! the previous exchange's acknowledgements (`Links::begin`), packs each
//! outgoing face into its link's buffer with kernels on `main`, and sends
//! the notices (`Links::post`); `finish` unpacks each incoming face
//! straight from the buffer its neighbour packed as its notice arrives,
//! then acknowledges it. The host never waits for the device; the
//! communicator carries 8-byte notices, so a failed peer surfaces as the
//! communicator's error, as with host fields.
//!
//! The ranks may be threads of one process or processes of one machine
//! (MPI ranks on a node: the buffers are shared through CUDA IPC); see
//! [`gpu::links`].
//!
//! **Host-staged.** Across machines, or where the driver refuses IPC, the
//! exchange goes through [`Exchanger`]: packed on the device, copied to
//! host buffers, sent by the communicator.
//!
//! **NCCL**, when asked for: every face bound for another rank is sent by
//! NCCL from a buffer on the sender's GPU into one on the receiver's, on a
//! stream of its own (see the `nccl` module and [`gpu::nccl`]); the ranks
//! need a GPU each and may be on any number of machines.
//!
//! All give the same bits: a ghost cell receives a copy of its owner's
//! value either way.

use crate::device::{DeviceElem, DeviceField};
use crate::exchange::{
    check_fields, check_same_fields, ExchangeStats, Exchanger, Pending, MAX_CHANNEL,
};
use crate::field::{FieldLayout, Region};
use crate::nccl::NcclEx;
use crate::topology::{dir_index, Topology};
use crate::HaloError;
use comm::Communicator;
use gpu::cuda::cudarc::driver::{CudaView, CudaViewMut};
use gpu::cuda::Device;
use gpu::links::{LinkError, LinkSpec, Links};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn link_err(e: LinkError) -> HaloError {
    match e {
        LinkError::Comm(c) => HaloError::Comm(c),
        LinkError::Device(d) => HaloError::Device(d.to_string()),
        other => HaloError::Invalid(format!("direct exchange: {other}")),
    }
}

/// How a [`DeviceExchanger`] moves the halo between ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Packed on the device, copied through host buffers and sent by the
    /// communicator: any communicator, any number of processes.
    HostStaged,
    /// Ranks of one machine (threads of one process, or processes sharing
    /// buffers through CUDA IPC): each unpacks from the buffer its
    /// neighbour packed, on the device; the communicator carries 8-byte
    /// notices.
    Direct,
    /// NCCL sends and receives between device buffers: one GPU per rank,
    /// any number of machines (NVLink, PCIe, InfiniBand, sockets; whatever
    /// NCCL finds). Taken only when asked for.
    Nccl,
}

impl Transport {
    /// The name used in reports and on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Transport::HostStaged => "staged",
            Transport::Direct => "direct",
            Transport::Nccl => "nccl",
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Acknowledgement tags: above every notice tag (`channel * 27 + direction`
/// with `channel <= MAX_CHANNEL`); the direct path runs only on in-process
/// communicators, whose tags reach 2^24.
fn ack_tag(channel: u16, dir: usize) -> u32 {
    (u32::from(MAX_CHANNEL) + 1 + u32::from(channel)) * 27 + dir as u32
}

struct Direct<T: DeviceElem> {
    device: Arc<Device>,
    topo: Topology,
    components: usize,
    links: Links<T>,
    /// The neighbour index of link `k`, outgoing and incoming alike (one
    /// pair per remote neighbour).
    remote: Vec<usize>,
    layouts: Vec<FieldLayout>,
    self_copies: Vec<(Region, Region)>,
    stats: ExchangeStats,
}

enum Inner<T: DeviceElem> {
    Staged(Box<Exchanger<T>>),
    Direct(Box<Direct<T>>),
    Nccl(Box<NcclEx<T>>),
}

/// The halo exchange of [`DeviceField`]s: direct on the device between the
/// ranks of one machine, host-staged otherwise (see [`Transport`]). Like [`Exchanger`], it is built
/// for a fixed total number of components, has one exchange in flight at
/// most ([`post`](Self::post) borrows it until the [`DevicePending`] is
/// finished or dropped), and fills periodic self-neighbours by copies on
/// the device.
pub struct DeviceExchanger<T: DeviceElem = f64> {
    inner: Inner<T>,
}

impl<T: DeviceElem> std::fmt::Debug for DeviceExchanger<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceExchanger")
            .field("transport", &self.transport())
            .finish()
    }
}

impl<T: DeviceElem> DeviceExchanger<T> {
    /// An exchanger for device fields on `device` with `components`
    /// components in total, on message channel `channel` (distinct from
    /// any other exchanger in flight on `comm`).
    ///
    /// `want`: `None` takes [`Transport::Direct`] when every rank of `comm`
    /// is on this machine (and, for processes, the driver allows IPC
    /// between them) and [`Transport::HostStaged`] otherwise;
    /// `Some(Transport::Direct)` is an error where the direct exchange
    /// cannot be built; `Some(Transport::Nccl)` is an error where NCCL
    /// cannot be loaded on some rank or two ranks share a GPU.
    ///
    /// Collective over `comm`: every rank calls it with the same `want`,
    /// `components` and `channel`.
    pub fn new(
        comm: &dyn Communicator,
        topo: &Topology,
        device: &Arc<Device>,
        components: usize,
        channel: u16,
        want: Option<Transport>,
    ) -> Result<Self, HaloError> {
        if channel > MAX_CHANNEL {
            return Err(HaloError::Invalid(format!(
                "channel {channel} is out of range (valid: 0..={MAX_CHANNEL})"
            )));
        }
        check_rank(comm, topo)?;
        if want == Some(Transport::Nccl) {
            let ex = NcclEx::new(comm, topo, device, components, channel, false)?;
            return Ok(DeviceExchanger {
                inner: Inner::Nccl(Box::new(ex)),
            });
        }
        // The links find out whether every rank is on this machine (and
        // build nothing otherwise).
        let direct = match want {
            Some(Transport::HostStaged) => None,
            _ => Direct::new(comm, topo, device, components, channel)?,
        };
        let inner = match (direct, want) {
            (Some(d), _) => Inner::Direct(Box::new(d)),
            (None, Some(Transport::Direct)) => {
                return Err(HaloError::Invalid(format!(
                    "the direct device exchange needs every rank on one machine, as threads of \
                     one process or as processes between which the driver allows CUDA IPC; the \
                     {} ranks of this {} communicator are not (valid: the host-staged exchange)",
                    comm.size(),
                    comm.backend(),
                )))
            }
            (None, _) => Inner::Staged(Box::new(Exchanger::new(topo, components, channel)?)),
        };
        Ok(DeviceExchanger { inner })
    }

    /// An NCCL exchanger that also sends the rank's periodic faces to
    /// itself through NCCL (a test of the remote path on one GPU).
    #[cfg(test)]
    fn nccl_loopback(
        comm: &dyn Communicator,
        topo: &Topology,
        device: &Arc<Device>,
        components: usize,
    ) -> Result<Self, HaloError> {
        let ex = NcclEx::new(comm, topo, device, components, 0, true)?;
        Ok(DeviceExchanger {
            inner: Inner::Nccl(Box::new(ex)),
        })
    }

    /// The transport in use.
    pub fn transport(&self) -> Transport {
        match self.inner {
            Inner::Staged(_) => Transport::HostStaged,
            Inner::Direct(_) => Transport::Direct,
            Inner::Nccl(_) => Transport::Nccl,
        }
    }

    /// The topology.
    pub fn topology(&self) -> &Topology {
        match &self.inner {
            Inner::Staged(e) => e.topology(),
            Inner::Direct(d) => &d.topo,
            Inner::Nccl(d) => &d.topo,
        }
    }

    /// Counters since creation (or the last
    /// [`reset_stats`](Self::reset_stats)); the direct transport counts its
    /// notices as messages and the packed values as values sent.
    pub fn stats(&self) -> ExchangeStats {
        match &self.inner {
            Inner::Staged(e) => e.stats(),
            Inner::Direct(d) => d.stats,
            Inner::Nccl(d) => d.stats,
        }
    }

    /// Zeroes the counters.
    pub fn reset_stats(&mut self) {
        match &mut self.inner {
            Inner::Staged(e) => e.reset_stats(),
            Inner::Direct(d) => d.stats = ExchangeStats::default(),
            Inner::Nccl(d) => d.stats = ExchangeStats::default(),
        }
    }

    /// Packs the owned boundary cells of `fields`, starts moving them and
    /// queues the periodic self-copies; the ghost cells filled from other
    /// ranks are written by [`DevicePending::finish`], given the same
    /// fields. The values sent are those of the owned cells once the work
    /// queued on the device's `main` stream before `post` is done; work
    /// queued after `post` on `main` (or on `side` after
    /// `Device::side_after_main`) sees the self-copied ghosts.
    ///
    /// # Errors
    /// As [`Exchanger::post`]; a device error as [`HaloError::Device`].
    pub fn post<'a>(
        &'a mut self,
        comm: &'a dyn Communicator,
        fields: &mut [&mut DeviceField<T>],
    ) -> Result<DevicePending<'a, T>, HaloError> {
        Ok(DevicePending {
            inner: Some(match &mut self.inner {
                Inner::Staged(e) => PendingInner::Staged(e.post(comm, fields)?),
                Inner::Direct(d) => {
                    let number = d.post(comm, fields)?;
                    PendingInner::Direct {
                        comm,
                        ex: d,
                        number,
                    }
                }
                Inner::Nccl(d) => {
                    let number = d.post(comm, fields)?;
                    PendingInner::Nccl {
                        comm,
                        ex: d,
                        number,
                    }
                }
            }),
        })
    }

    /// A blocking exchange: [`post`](Self::post) then
    /// [`finish`](DevicePending::finish).
    pub fn exchange(
        &mut self,
        comm: &dyn Communicator,
        fields: &mut [&mut DeviceField<T>],
    ) -> Result<(), HaloError> {
        let pending = self.post(comm, fields)?;
        pending.finish(fields)
    }
}

enum PendingInner<'a, T: DeviceElem> {
    Staged(Pending<'a, T>),
    Direct {
        comm: &'a dyn Communicator,
        ex: &'a mut Direct<T>,
        number: u64,
    },
    Nccl {
        comm: &'a dyn Communicator,
        ex: &'a mut NcclEx<T>,
        number: u64,
    },
}

/// An exchange in flight, returned by [`DeviceExchanger::post`]. Dropping
/// it without [`finish`](Self::finish) waits for the incoming messages and
/// leaves the ghost cells they would have filled unchanged.
#[must_use = "an exchange in flight must be finished to fill the ghost cells"]
pub struct DevicePending<'a, T: DeviceElem = f64> {
    /// `None` once `finish` has taken it.
    inner: Option<PendingInner<'a, T>>,
}

impl<T: DeviceElem> std::fmt::Debug for DevicePending<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (transport, n) = match &self.inner {
            Some(PendingInner::Staged(_)) => (Some(Transport::HostStaged), None),
            Some(PendingInner::Direct { number, .. }) => (Some(Transport::Direct), Some(*number)),
            Some(PendingInner::Nccl { number, .. }) => (Some(Transport::Nccl), Some(*number)),
            None => (None, None),
        };
        f.debug_struct("DevicePending")
            .field("transport", &transport)
            .field("exchange", &n)
            .finish()
    }
}

impl<T: DeviceElem> Drop for DevicePending<'_, T> {
    fn drop(&mut self) {
        // Errors of an exchange nobody finishes do not matter.
        match &mut self.inner {
            Some(PendingInner::Direct { comm, ex, .. }) => {
                let _ = ex.drain(*comm);
            }
            Some(PendingInner::Nccl { comm, ex, .. }) => {
                let _ = ex.drain(*comm);
            }
            _ => {}
        }
    }
}

impl<T: DeviceElem> DevicePending<'_, T> {
    /// Fills the ghost cells that come from other ranks, queued on the
    /// device's `main` stream; `fields` must be the fields given to `post`.
    pub fn finish(mut self, fields: &mut [&mut DeviceField<T>]) -> Result<(), HaloError> {
        match self.inner.take() {
            Some(PendingInner::Staged(p)) => p.finish(fields),
            Some(PendingInner::Direct { comm, ex, number }) => {
                let r = ex.finish(comm, fields, number);
                // What an error left in flight is received and acknowledged.
                let drained = ex.drain(comm);
                r.and(drained.map(|_| ()))
            }
            Some(PendingInner::Nccl { comm, ex, number }) => {
                let r = ex.finish(comm, fields, number);
                // What an error left in flight is received.
                let drained = ex.drain(comm);
                r.and(drained.map(|_| ()))
            }
            None => Ok(()),
        }
    }
}

impl<T: DeviceElem> Direct<T> {
    fn new(
        comm: &dyn Communicator,
        topo: &Topology,
        device: &Arc<Device>,
        components: usize,
        channel: u16,
    ) -> Result<Option<Self>, HaloError> {
        let me = topo.rank();
        let nbs = topo.neighbors();
        let spec = |peer: usize, dir: usize, len: usize| LinkSpec {
            peer,
            key: dir as u32,
            len,
            notice_tag: u32::from(channel) * 27 + dir as u32,
            ack_tag: ack_tag(channel, dir),
        };
        let (mut outs, mut ins, mut remote) = (vec![], vec![], vec![]);
        for (i, nb) in nbs.iter().enumerate().filter(|(_, nb)| nb.rank != me) {
            outs.push(spec(
                nb.rank,
                dir_index(nb.offset),
                nb.send.len() * components,
            ));
            remote.push(i);
            // The link from this neighbour runs in direction -offset.
            let back = dir_index(nb.offset.map(|x| -x));
            ins.push(spec(nb.rank, back, nb.recv.len() * components));
        }
        let Some(links) = Links::new(comm, device, &outs, &ins).map_err(link_err)? else {
            return Ok(None);
        };
        let self_copies = topo.self_copies();
        Ok(Some(Direct {
            device: device.clone(),
            topo: topo.clone(),
            components,
            links,
            remote,
            layouts: Vec::new(),
            self_copies,
            stats: ExchangeStats::default(),
        }))
    }

    fn drain(&mut self, comm: &dyn Communicator) -> Result<bool, HaloError> {
        self.links.drain(comm).map_err(link_err)
    }

    fn post(
        &mut self,
        comm: &dyn Communicator,
        fields: &mut [&mut DeviceField<T>],
    ) -> Result<u64, HaloError> {
        let t0 = Instant::now();
        check_rank(comm, &self.topo)?;
        if self.links.begin(comm).map_err(link_err)? {
            return Err(leaked());
        }
        check_device_fields(&self.topo, self.components, &self.device, fields)?;
        self.layouts.clear();
        self.layouts.extend(fields.iter().map(|f| f.layout()));
        // Pack every outgoing buffer before anything is sent.
        let nbs = self.topo.neighbors();
        for (k, &i) in self.remote.iter().enumerate() {
            let p = pack_face(
                fields,
                &nbs[i].send,
                &mut self.links.outgoing(k).slice_mut(..),
            )?;
            self.stats.messages += 1;
            self.stats.values_sent += p as u64;
        }
        let round = self.links.post(comm).map_err(link_err)?;
        self.stats.values_copied += copy_self(fields, &self.self_copies)?;
        self.stats.exchanges += 1;
        self.stats.post_time += t0.elapsed();
        Ok(round)
    }

    fn finish(
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
            let region = &nbs[self.remote[k]].recv;
            let read = unpack_face(fields, region, &self.links.incoming(k).view());
            // Acknowledged even after an error, so the sender does not wait
            // for ever (the fields are invalid then anyway).
            let acked = self.links.consumed(comm, k, round).map_err(link_err);
            read?;
            acked?;
            unpack_time += t.elapsed();
        }
        self.stats.wait_time += wait_time;
        self.stats.unpack_time += unpack_time;
        Ok(())
    }
}

/// The rank of `comm` must be the topology's.
pub(crate) fn check_rank(comm: &dyn Communicator, topo: &Topology) -> Result<(), HaloError> {
    if comm.rank() != topo.rank() {
        return Err(HaloError::Invalid(format!(
            "the topology belongs to rank {}, the communicator says rank {}",
            topo.rank(),
            comm.rank()
        )));
    }
    Ok(())
}

/// What `post` says when the previous exchange was leaked.
pub(crate) fn leaked() -> HaloError {
    HaloError::Invalid(
        "the previous exchange was neither finished nor dropped (its DevicePending was leaked); \
         its messages have been received and discarded"
            .into(),
    )
}

/// Checks `fields` against the exchanger's topology and components, and
/// that each lives on `device`.
pub(crate) fn check_device_fields<T: DeviceElem>(
    topo: &Topology,
    components: usize,
    device: &Device,
    fields: &[&mut DeviceField<T>],
) -> Result<(), HaloError> {
    let layouts: Vec<FieldLayout> = fields.iter().map(|f| f.layout()).collect();
    check_fields(topo, components, &layouts)?;
    for (i, f) in fields.iter().enumerate() {
        if f.device().info().ordinal != device.info().ordinal {
            return Err(HaloError::Invalid(format!(
                "field {i} lives on device {}, the exchanger on device {}",
                f.device().info().ordinal,
                device.info().ordinal
            )));
        }
    }
    Ok(())
}

/// Packs `region` of every component of `fields`, one after the other,
/// into `buf` (kernels on `main`); returns the values packed.
pub(crate) fn pack_face<T: DeviceElem>(
    fields: &[&mut DeviceField<T>],
    region: &Region,
    buf: &mut CudaViewMut<'_, T>,
) -> Result<usize, HaloError> {
    let n = region.len();
    let mut p = 0;
    for f in fields.iter() {
        for c in 0..f.layout().components {
            f.pack_to(c, region, &mut buf.slice_mut(p..p + n))?;
            p += n;
        }
    }
    Ok(p)
}

/// Unpacks `v`, packed by [`pack_face`] on the sending side, into `region`
/// of every component of `fields` (kernels on `main`).
pub(crate) fn unpack_face<T: DeviceElem>(
    fields: &mut [&mut DeviceField<T>],
    region: &Region,
    v: &CudaView<'_, T>,
) -> Result<(), HaloError> {
    let n = region.len();
    let mut p = 0;
    for f in fields.iter_mut() {
        for c in 0..f.layout().components {
            f.unpack_from(c, region, &v.slice(p..p + n))?;
            p += n;
        }
    }
    Ok(())
}

/// Queues the periodic self-copies of every component of `fields`;
/// returns the values copied.
pub(crate) fn copy_self<T: DeviceElem>(
    fields: &mut [&mut DeviceField<T>],
    self_copies: &[(Region, Region)],
) -> Result<u64, HaloError> {
    if self_copies.is_empty() {
        return Ok(0);
    }
    let mut values = 0;
    for f in fields.iter_mut() {
        for c in 0..f.layout().components {
            crate::HaloData::copy_regions(&mut **f, c, self_copies)?;
        }
        values += f.layout().components;
    }
    let per: usize = self_copies.iter().map(|(s, _)| s.len()).sum();
    Ok((per * values) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::dev;
    use crate::{Exchanger, Field, HaloSpec, Neighborhood, Topology};
    use comm::{local, BlockDecomposition, ProcessGrid};

    fn device() -> Option<Arc<Device>> {
        match Device::open(0) {
            Ok(d) => Some(Arc::new(d)),
            Err(e) => {
                eprintln!("skipped: no CUDA device ({e})");
                None
            }
        }
    }

    /// The periodic topology of a `g` grid over the ranks of `comm`.
    fn topology(
        comm: &dyn Communicator,
        g: [usize; 3],
        width: usize,
        nbh: Neighborhood,
    ) -> Result<Topology, HaloError> {
        let grid = ProcessGrid::for_shape(g, comm.size(), [true; 3])?;
        let dec = BlockDecomposition::new(g, grid)?;
        Topology::new(comm, &dec, HaloSpec::uniform(width, nbh))
    }

    /// A host field whose owned cells depend on the round, so a stale ghost
    /// shows.
    fn filled(topo: &Topology, layout: FieldLayout, round: usize) -> Field<f64> {
        let mut host = Field::<f64>::new(layout);
        for c in 0..layout.components {
            host.fill_owned(c, &topo.owned(), |[i, j, k]| {
                (round * 100_000 + c * 1000 + i * 100 + j * 10 + k) as f64 + 0.25
            });
        }
        host
    }

    /// Four rounds (blocking and post/finish in turn) of `dx` on two
    /// fields of 2 and 1 components, each against the host exchange's
    /// ghosts bit for bit.
    fn matches_the_host(
        comm: &dyn Communicator,
        topo: &Topology,
        device: &Arc<Device>,
        dx: &mut DeviceExchanger<f64>,
        what: &str,
    ) -> Result<(), HaloError> {
        let mut l2 = topo.layout(2);
        l2.components = 2;
        let l1 = topo.layout(1);
        let mut hx = Exchanger::new(topo, 3, 0)?;
        let mut a = DeviceField::new(device, l2, "a").map_err(dev)?;
        let mut b = DeviceField::new(device, l1, "b").map_err(dev)?;
        for round in 0..4 {
            let (mut ha, mut hb) = (filled(topo, l2, round), filled(topo, l1, round + 7));
            a.upload(&ha).map_err(dev)?;
            b.upload(&hb).map_err(dev)?;
            hx.exchange(
                comm,
                &mut [&mut ha as &mut dyn crate::HaloData<f64>, &mut hb],
            )?;
            if round % 2 == 0 {
                dx.exchange(comm, &mut [&mut a, &mut b])?;
            } else {
                let p = dx.post(comm, &mut [&mut a, &mut b])?;
                p.finish(&mut [&mut a, &mut b])?;
            }
            let (mut ba, mut bb) = (Field::new(l2), Field::new(l1));
            a.download(&mut ba).map_err(dev)?;
            b.download(&mut bb).map_err(dev)?;
            assert_eq!(ba.as_slice(), ha.as_slice(), "{what} round {round}");
            assert_eq!(bb.as_slice(), hb.as_slice(), "{what} round {round}");
        }
        Ok(())
    }

    /// Every transport gives exactly the host exchange's ghosts, for 1, 2,
    /// 4 and 8 in-process ranks sharing device 0 (NCCL: one rank, whose
    /// periodic faces are copied; the next test sends them through NCCL),
    /// faces and the full
    /// neighbourhood, two fields of two and one components, over several
    /// rounds of blocking and overlapped (post, finish) exchanges.
    #[test]
    fn device_exchanges_match_the_host_exchange() {
        let Some(device) = device() else { return };
        for ranks in [1, 2, 4, 8] {
            for nbh in [Neighborhood::Faces, Neighborhood::Full] {
                for want in [Transport::Direct, Transport::HostStaged, Transport::Nccl] {
                    // NCCL takes one GPU per rank.
                    if want == Transport::Nccl && ranks > 1 {
                        continue;
                    }
                    let device = device.clone();
                    local::run(ranks, move |comm| {
                        let topo = topology(comm, [12, 10, 9], 2, nbh)?;
                        let mut dx = DeviceExchanger::new(comm, &topo, &device, 3, 1, Some(want))?;
                        assert_eq!(dx.transport(), want);
                        matches_the_host(comm, &topo, &device, &mut dx, &want.to_string())?;
                        assert_eq!(dx.stats().exchanges, 4);
                        Ok::<_, HaloError>(())
                    })
                    .unwrap();
                }
            }
        }
    }

    /// In one process `None` picks the direct transport; a dropped pending
    /// exchange leaves the next one correct, a leaked one is reported by
    /// the next `post`, which then works.
    #[test]
    fn dropped_and_leaked_exchanges_recover() {
        let Some(device) = device() else { return };
        local::run(2, move |comm| {
            let topo = topology(comm, [8, 8, 8], 1, Neighborhood::Faces)?;
            let l = topo.layout(1);
            let mut dx = DeviceExchanger::new(comm, &topo, &device, 1, 0, None)?;
            assert_eq!(dx.transport(), Transport::Direct);
            let mut u = DeviceField::new(&device, l, "u").map_err(dev)?;
            u.upload(&filled(&topo, l, 1)).map_err(dev)?;
            drop(dx.post(comm, &mut [&mut u])?);
            std::mem::forget(dx.post(comm, &mut [&mut u])?);
            let e = dx.post(comm, &mut [&mut u]).unwrap_err();
            assert!(e.to_string().contains("leaked"), "{e}");
            let mut h = filled(&topo, l, 2);
            u.upload(&h).map_err(dev)?;
            dx.exchange(comm, &mut [&mut u])?;
            Exchanger::new(&topo, 1, 5)?.exchange(comm, &mut [&mut h])?;
            let mut back = Field::new(l);
            u.download(&mut back).map_err(dev)?;
            assert_eq!(back.as_slice(), h.as_slice());
            Ok::<_, HaloError>(())
        })
        .unwrap();
    }

    /// The NCCL path with every face a message (a rank's periodic faces
    /// sent to itself) gives the host exchange's ghosts: the packing, the
    /// pairing of NCCL's messages with the ghost regions (several per pair
    /// of ranks, told apart by direction) and the unpacking, on one GPU,
    /// faces and the full neighbourhood, several rounds, blocking and
    /// overlapped.
    #[test]
    fn nccl_messages_fill_the_ghosts_of_the_host_exchange() {
        let Some(device) = device() else { return };
        for nbh in [Neighborhood::Faces, Neighborhood::Full] {
            let device = device.clone();
            local::run(1, move |comm| {
                let topo = topology(comm, [12, 10, 9], 2, nbh)?;
                let mut dx = DeviceExchanger::nccl_loopback(comm, &topo, &device, 3)?;
                assert_eq!(dx.transport(), Transport::Nccl);
                matches_the_host(comm, &topo, &device, &mut dx, &format!("{nbh:?}"))?;
                let s = dx.stats();
                assert_eq!(s.exchanges, 4);
                assert_eq!(s.values_copied, 0, "every face travelled through NCCL");
                assert_eq!(s.messages, 4 * topo.neighbors().len() as u64);
                Ok::<_, HaloError>(())
            })
            .unwrap();
        }
    }

    /// NCCL refuses two ranks on one GPU: every rank gets an error that
    /// names the ranks and the other transports, and nobody hangs.
    #[test]
    fn nccl_needs_a_gpu_per_rank() {
        let Some(device) = device() else { return };
        let errs = local::run(2, move |comm| {
            let topo = topology(comm, [8, 8, 8], 1, Neighborhood::Faces)?;
            let e = DeviceExchanger::<f64>::new(comm, &topo, &device, 1, 0, Some(Transport::Nccl))
                .unwrap_err();
            Ok::<_, HaloError>(e.to_string())
        })
        .unwrap();
        for e in errs {
            assert!(
                e.contains("one GPU per rank") && e.contains("ranks 0 and 1"),
                "{e}"
            );
        }
    }

    /// Fields that do not match the exchanger are refused before anything
    /// is sent.
    #[test]
    fn mismatched_fields_are_refused() {
        let Some(device) = device() else { return };
        local::run(2, move |comm| {
            let topo = topology(comm, [8, 8, 8], 1, Neighborhood::Faces)?;
            let mut dx = DeviceExchanger::<f64>::new(comm, &topo, &device, 2, 0, None)?;
            let mut u = DeviceField::new(&device, topo.layout(1), "u").map_err(dev)?;
            let e = dx.exchange(comm, &mut [&mut u]).unwrap_err();
            assert!(e.to_string().contains("2 components"), "{e}");
            let e = DeviceExchanger::<f64>::new(comm, &topo, &device, 1, MAX_CHANNEL + 1, None)
                .unwrap_err();
            assert!(e.to_string().contains("out of range"), "{e}");
            Ok::<_, HaloError>(())
        })
        .unwrap();
    }
}
