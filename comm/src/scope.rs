//! Non-blocking transfers that cannot outlive their buffers: [`scope()`].

use crate::communicator::{as_bytes, as_bytes_mut, Communicator, Elem, Request};
use crate::error::{CommError, Result};
use std::marker::PhantomData;

/// Handle of a transfer started in a [`Scope`]: an index into that scope,
/// meaningless in another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Req {
    recv: bool,
    index: usize,
}

impl Req {
    /// True for a receive, false for a send.
    pub fn is_recv(self) -> bool {
        self.recv
    }

    /// Position among the scope's receives (or sends) in the order they were
    /// started.
    pub fn index(self) -> usize {
        self.index
    }
}

/// Where a receive lands, as plain numbers (so a [`ScopeStore`] kept in a
/// plan stays `Send` and `Sync`); the pointer is only used while the scope
/// that lent it is alive.
#[derive(Debug, Clone, Copy)]
struct Slot {
    addr: usize,
    len: usize,
    handed_back: bool,
}

/// Storage for the requests of a scope, kept between scopes so a plan that
/// exchanges repeatedly reuses it (see [`scope_in`]). Empty between scopes.
#[derive(Debug, Default)]
pub struct ScopeStore {
    recvs: Vec<Request>,
    slots: Vec<Slot>,
    sends: Vec<Request>,
}

impl ScopeStore {
    /// An empty store with room for `recvs` receives and `sends` sends.
    pub fn with_capacity(recvs: usize, sends: usize) -> Self {
        ScopeStore {
            recvs: Vec::with_capacity(recvs),
            slots: Vec::with_capacity(recvs),
            sends: Vec::with_capacity(sends),
        }
    }
}

/// Makes a type invariant in `'s`.
type Invariant<'s> = fn(&'s ()) -> &'s ();

/// Non-blocking transfers of elements of type `T` whose buffers are
/// borrowed for `'s`; see [`scope()`].
pub struct Scope<'s, T: Elem> {
    comm: &'s dyn Communicator,
    store: ScopeStore,
    /// Set once a transfer failed: which receive's bytes are valid is then
    /// unknown, so no further buffer is handed back.
    failed: bool,
    /// Invariant in `'s` (as `std::thread::Scope`): two scopes can only be
    /// exchanged when their buffers live equally long.
    _borrow: PhantomData<(&'s mut [T], Invariant<'s>)>,
}

impl<T: Elem> std::fmt::Debug for Scope<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("rank", &self.comm.rank())
            .field("receives", &self.store.recvs.len())
            .field("sends", &self.store.sends.len())
            .field("failed", &self.failed)
            .finish()
    }
}

/// Runs `f` with a [`Scope`] for non-blocking transfers of `T` on `comm`.
///
/// Every send or receive started through the scope borrows its buffer for
/// the lifetime `'s` of the whole call, and the scope itself owns the
/// requests. The closure holds only [`Req`] handles, so no request can be
/// leaked: when it returns every transfer still in flight is completed
/// before this function returns, in the manner of [`std::thread::scope`];
/// when it panics they are abandoned while unwinding, which returns only
/// once the backend no longer touches the buffers (or ends the process:
/// [`RequestImpl::abandon`](crate::RequestImpl::abandon)). A receive
/// that has completed hands its buffer back ([`Scope::wait_recv`],
/// [`Scope::wait_any_recv`]), so it can be read inside the scope without
/// `unsafe`.
///
/// A buffer created inside the closure cannot be lent to the scope, and a
/// request cannot escape it:
///
/// ```compile_fail
/// use comm::{local, CommExt, Communicator};
/// local::run(1, |c| {
///     comm::scope(c, |s| {
///         let mut buf = [0u8; 4];
///         // error: `buf` does not live long enough
///         s.irecv(0, 1, &mut buf)?;
///         Ok::<_, comm::CommError>(())
///     })
/// })
/// .unwrap();
/// ```
///
/// Reading a receive buffer while the transfer may still be writing it does
/// not compile either; it comes back from the scope once complete:
///
/// ```compile_fail
/// use comm::{local, Communicator};
/// local::run(1, |c| {
///     let mut buf = [0u8; 4];
///     comm::scope(c, |s| {
///         s.irecv(0, 1, &mut buf)?;
///         // error: `buf` is mutably borrowed by the receive
///         let first = buf[0];
///         Ok::<_, comm::CommError>(())
///     })
/// })
/// .unwrap();
/// ```
///
/// Every transfer still in flight when `f` returns is waited for before this
/// returns (when `f` panics, abandoned as described above). The result is
/// `f`'s error if it failed,
/// else the first error of those waits, else `f`'s value.
///
/// ```
/// use comm::{local, Communicator};
///
/// // Every rank passes its rank to the next one around a ring.
/// let got = local::run(3, |c| {
///     let (r, p) = (c.rank(), c.size());
///     let mut from_prev = [0u64];
///     let mine = [r as u64];
///     comm::scope(c, |s| {
///         let rx = s.irecv((r + p - 1) % p, 7, &mut from_prev)?;
///         s.isend((r + 1) % p, 7, &mine)?;
///         let buf = s.wait_recv(rx)?;
///         Ok::<_, comm::CommError>(buf[0])
///     })
/// })
/// .unwrap();
/// assert_eq!(got, vec![2, 0, 1]);
/// ```
pub fn scope<'s, T, R, E, F>(comm: &'s dyn Communicator, f: F) -> std::result::Result<R, E>
where
    T: Elem,
    E: From<CommError>,
    F: FnOnce(&mut Scope<'s, T>) -> std::result::Result<R, E>,
{
    let mut store = ScopeStore::default();
    scope_in(comm, &mut store, f)
}

/// [`scope`] with request storage `store` kept by the caller, so repeated
/// exchanges do not allocate it anew. `store` is empty again afterwards
/// (its capacity is kept).
pub fn scope_in<'s, T, R, E, F>(
    comm: &'s dyn Communicator,
    store: &mut ScopeStore,
    f: F,
) -> std::result::Result<R, E>
where
    T: Elem,
    E: From<CommError>,
    F: FnOnce(&mut Scope<'s, T>) -> std::result::Result<R, E>,
{
    let mut s = Scope {
        comm,
        store: std::mem::take(store),
        failed: false,
        _borrow: PhantomData,
    };
    // A panic in `f` drops `s`, and `Scope`'s drop abandons every transfer
    // still in flight (see `RequestImpl::abandon`).
    let out = f(&mut s);
    let waited = s.wait_all();
    *store = std::mem::take(&mut s.store);
    store.recvs.clear();
    store.slots.clear();
    store.sends.clear();
    let r = out?;
    waited?;
    Ok(r)
}

impl<'s, T: Elem> Scope<'s, T> {
    /// The communicator the transfers run on.
    pub fn comm(&self) -> &'s dyn Communicator {
        self.comm
    }

    /// Starts sending `data` to `dest` with `tag`.
    pub fn isend(&mut self, dest: usize, tag: u32, data: &'s [T]) -> Result<Req> {
        let bytes = as_bytes(data);
        // SAFETY: `bytes` is borrowed for 's, which outlives the `scope`
        // call; the request is owned by this scope, which completes it
        // before that call returns (or while unwinding through it).
        let r = unsafe { self.comm.isend_raw(dest, tag, bytes.as_ptr(), bytes.len()) }?;
        self.store.sends.push(r);
        Ok(Req {
            recv: false,
            index: self.store.sends.len() - 1,
        })
    }

    /// Starts receiving exactly `buf.len()` elements from `src` with `tag`.
    /// The buffer comes back through [`wait_recv`](Self::wait_recv) or
    /// [`wait_any_recv`](Self::wait_any_recv) once the message is in it.
    pub fn irecv(&mut self, src: usize, tag: u32, buf: &'s mut [T]) -> Result<Req> {
        let len = buf.len();
        let bytes = as_bytes_mut(buf);
        let ptr = bytes.as_mut_ptr();
        // SAFETY: `buf` is exclusively borrowed for 's, which outlives the
        // `scope` call; this scope owns the request and completes it before
        // that call returns. The bytes are reached again only through
        // `hand_back`, after the request completed.
        let r = unsafe { self.comm.irecv_raw(src, tag, ptr, bytes.len()) }?;
        self.store.recvs.push(r);
        self.store.slots.push(Slot {
            addr: ptr as usize,
            len,
            handed_back: false,
        });
        Ok(Req {
            recv: true,
            index: self.store.recvs.len() - 1,
        })
    }

    fn request(&mut self, r: Req) -> Result<&mut Request> {
        let (list, what) = if r.recv {
            (&mut self.store.recvs, "receive")
        } else {
            (&mut self.store.sends, "send")
        };
        let n = list.len();
        list.get_mut(r.index).ok_or_else(|| {
            CommError::invalid(format!(
                "{what} handle {} is not of this scope ({n} {what}s started)",
                r.index
            ))
        })
    }

    fn note<X>(&mut self, res: Result<X>) -> Result<X> {
        if res.is_err() {
            self.failed = true;
        }
        res
    }

    /// Completes transfer `r` if that is possible without blocking.
    pub fn test(&mut self, r: Req) -> Result<bool> {
        let res = self.request(r)?.test();
        self.note(res)
    }

    /// Blocks until transfer `r` completes.
    pub fn wait(&mut self, r: Req) -> Result<()> {
        let res = self.request(r)?.wait();
        self.note(res)
    }

    /// Blocks until receive `r` completes and hands its buffer back (once).
    pub fn wait_recv(&mut self, r: Req) -> Result<&'s mut [T]> {
        if !r.recv {
            return Err(CommError::invalid(format!(
                "wait_recv was given send handle {}",
                r.index
            )));
        }
        self.wait(r)?;
        self.hand_back(r.index)
    }

    /// Blocks until one receive whose buffer has not been handed back yet
    /// completes, and hands back its handle and buffer; `None` once every
    /// receive's buffer has been handed back. Sends are not waited for here.
    pub fn wait_any_recv(&mut self) -> Result<Option<(Req, &'s mut [T])>> {
        // Receives completed earlier (by `test`) come first.
        let ready = (0..self.store.recvs.len())
            .find(|&k| self.store.recvs[k].is_done() && !self.store.slots[k].handed_back);
        let k = match ready {
            Some(k) => k,
            None => {
                let res = self.comm.wait_any(&mut self.store.recvs);
                match self.note(res)? {
                    Some(k) => k,
                    None => return Ok(None),
                }
            }
        };
        let buf = self.hand_back(k)?;
        Ok(Some((
            Req {
                recv: true,
                index: k,
            },
            buf,
        )))
    }

    fn hand_back(&mut self, k: usize) -> Result<&'s mut [T]> {
        if self.failed {
            return Err(CommError::invalid(
                "a transfer of this scope failed; its receive buffers are not handed back",
            ));
        }
        let slot = &mut self.store.slots[k];
        if slot.handed_back {
            return Err(CommError::invalid(format!(
                "the buffer of receive {k} was handed back already"
            )));
        }
        debug_assert!(self.store.recvs[k].is_done());
        slot.handed_back = true;
        // SAFETY: the slice was lent to `irecv` as `&'s mut [T]` (valid and
        // exclusively ours for 's); its request has completed, so the
        // backend no longer touches it, and it is handed back only once.
        Ok(unsafe { std::slice::from_raw_parts_mut(slot.addr as *mut T, slot.len) })
    }

    /// Waits for every transfer (receives and sends); returns the first
    /// error after trying them all.
    pub fn wait_all(&mut self) -> Result<()> {
        let a = crate::wait_all(&mut self.store.recvs);
        let b = crate::wait_all(&mut self.store.sends);
        let res = a.and(b);
        self.note(res)
    }
}

impl<T: Elem> Drop for Scope<'_, T> {
    fn drop(&mut self) {
        // Normally everything is complete by now. After a panic in the
        // closure the requests are dropped here, before the borrowed
        // buffers can go: each waits, or while unwinding is abandoned
        // (`RequestImpl::abandon`: it returns only once the backend no
        // longer touches the buffer).
        self.store.recvs.clear();
        self.store.sends.clear();
    }
}

#[cfg(test)]
mod tests {
    use crate::{local, scope, CommError, CommExt};
    use std::time::{Duration, Instant};

    /// Handles of one kind are rejected where the other is needed, and a
    /// handle beyond the scope's transfers is an error, not a panic.
    #[test]
    fn handles_are_checked() {
        local::run(2, |c| {
            let peer = 1 - c.rank();
            let mut got = [0u32; 2];
            let mine = [c.rank() as u32; 2];
            scope(c, |s| {
                let rx = s.irecv(peer, 3, &mut got)?;
                let tx = s.isend(peer, 3, &mine)?;
                assert!(rx.is_recv() && !tx.is_recv());
                assert!(
                    s.wait_recv(tx).is_err(),
                    "a send has no buffer to hand back"
                );
                let buf = s.wait_recv(rx)?;
                assert_eq!(buf, &[peer as u32; 2]);
                buf[0] = 7;
                let err = s.wait_recv(rx).unwrap_err();
                assert!(err.to_string().contains("handed back already"), "{err}");
                Ok::<_, CommError>(())
            })?;
            assert_eq!(got, [7, peer as u32]);
            Ok::<_, CommError>(())
        })
        .unwrap();
    }

    /// A transfer still in flight when the closure returns is completed by
    /// the scope, and a failed one is reported even when the closure did
    /// not look at it.
    #[test]
    fn pending_transfers_complete_and_report_at_the_end() {
        local::run(2, |c| {
            let peer = 1 - c.rank();
            let mut got = [0u8; 3];
            let mut short = [0u8; 1];
            let mine = [c.rank() as u8; 3];
            scope(c, |s| {
                s.irecv(peer, 1, &mut got)?;
                s.isend(peer, 1, &mine)
            })?;
            assert_eq!(got, [peer as u8; 3]);
            let res = scope(c, |s| {
                s.irecv(peer, 2, &mut short)?;
                s.isend(peer, 2, &mine)
            });
            assert!(
                matches!(
                    res,
                    Err(CommError::MessageTruncated {
                        expected: 1,
                        got: 3,
                        ..
                    })
                ),
                "{res:?}"
            );
            Ok::<_, CommError>(())
        })
        .unwrap();
    }

    /// A rank that panics inside a scope with a receive pending does not
    /// hang: the receive is abandoned while unwinding, the rank fails, and
    /// the rank waiting for it gets `PeerFailed` naming it. The bound: well
    /// under the backend's 300 s deadlock limit, which a wait for the
    /// never-sent message would otherwise run into.
    #[test]
    fn a_panic_inside_a_scope_fails_the_peers_quickly() {
        let t = Instant::now();
        let err = local::run(2, |c| {
            let mut buf = [0u8; 1];
            if c.rank() == 0 {
                scope(c, |s| {
                    s.irecv(1, 9, &mut buf)?;
                    std::thread::sleep(Duration::from_millis(50));
                    panic!("rank 0 gives up");
                    #[allow(unreachable_code)]
                    Ok::<_, CommError>(())
                })
            } else {
                // Waits for a message rank 0 never sends.
                c.recv(0, 9, &mut buf)
            }
        })
        .unwrap_err();
        assert_eq!(err.rank, 0);
        assert!(err.reason.contains("rank 0 gives up"), "{}", err.reason);
        assert!(
            matches!(&err.ranks[1], Some(r) if r.contains("rank 0")),
            "{:?}",
            err.ranks
        );
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    }
}
