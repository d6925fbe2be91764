use super::*;
use comm::{local, BlockDecomposition, CommError, ProcessGrid};
use proptest::prelude::*;

/// A value that identifies a global cell and a component.
fn tag(c: usize, p: [usize; 3]) -> f64 {
    let mut h = (c as u64) << 48 ^ (p[0] as u64) << 32 ^ (p[1] as u64) << 16 ^ p[2] as u64;
    h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 12) as f64
}

const SENTINEL: f64 = -1.0;

/// Fills the owned cells with `tag`, exchanges, and checks every padded cell:
/// owned cells unchanged, ghost cells within the communicated width equal the
/// tag of the (periodically wrapped) global cell when the neighbourhood
/// covers them and a neighbour exists, every other ghost cell untouched.
fn check_exchange(
    comm: &dyn comm::Communicator,
    global: [usize; 3],
    grid: ProcessGrid,
    spec: HaloSpec,
    comps: [usize; 2],
) -> Result<(), HaloError> {
    let dec = BlockDecomposition::new(global, grid)?;
    let topo = Topology::new(comm, &dec, spec)?;
    let b = topo.owned();
    let mut fields: Vec<Field<f64>> = comps.iter().map(|&c| Field::new(topo.layout(c))).collect();
    for (fi, f) in fields.iter_mut().enumerate() {
        f.as_mut_slice().fill(SENTINEL);
        for c in 0..comps[fi] {
            f.fill_owned(c, &b, |p| tag(10 * fi + c, p));
        }
    }
    let mut ex = Exchanger::new(&topo, comps.iter().sum(), 3)?;
    // Exchange twice: the second must leave everything as the first did.
    for _ in 0..2 {
        let mut refs: Vec<&mut Field<f64>> = fields.iter_mut().collect();
        ex.exchange(comm, &mut refs)?;
    }
    let g = spec.ghost;
    let w = spec.width;
    let n = b.shape();
    let periodic = grid.periodic();
    for (fi, f) in fields.iter().enumerate() {
        let l = f.layout();
        let pad = l.padded();
        for c in 0..l.components {
            for i in 0..pad[0] {
                for j in 0..pad[1] {
                    for k in 0..pad[2] {
                        let p = [i, j, k];
                        let mut outside = 0;
                        let mut reachable = true;
                        let mut global_p = [0usize; 3];
                        for d in 0..3 {
                            let x = p[d] as isize - g[d] as isize + b.lo[d] as isize;
                            if p[d] < g[d] || p[d] >= g[d] + n[d] {
                                outside += 1;
                                let dist = if p[d] < g[d] {
                                    g[d] - p[d]
                                } else {
                                    p[d] + 1 - g[d] - n[d]
                                };
                                if dist > w[d] {
                                    reachable = false;
                                }
                                if !periodic[d] && (x < 0 || x >= global[d] as isize) {
                                    reachable = false;
                                }
                            }
                            global_p[d] = x.rem_euclid(global[d] as isize) as usize;
                        }
                        let covered = match spec.neighborhood {
                            Neighborhood::Faces => outside <= 1,
                            Neighborhood::Full => true,
                        };
                        let got = f.get(c, p);
                        let want = if outside == 0 || (reachable && covered) {
                            tag(10 * fi + c, global_p)
                        } else {
                            SENTINEL
                        };
                        if got != want {
                            return Err(HaloError::Invalid(format!(
                                "rank {} field {fi} comp {c} padded {p:?} (global {global_p:?}): got {got}, want {want}",
                                comm.rank()
                            )));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn grids_for(p: usize) -> Vec<[usize; 3]> {
    match p {
        1 => vec![[1, 1, 1]],
        2 => vec![[2, 1, 1], [1, 1, 2]],
        3 => vec![[3, 1, 1], [1, 3, 1]],
        4 => vec![[2, 2, 1], [1, 2, 2], [4, 1, 1]],
        6 => vec![[3, 2, 1], [1, 2, 3]],
        8 => vec![[2, 2, 2], [4, 2, 1]],
        _ => unreachable!(),
    }
}

#[test]
fn ghost_cells_hold_their_global_cell_for_all_ranks_and_widths() {
    for p in [1, 2, 3, 4, 6, 8] {
        for dims in grids_for(p) {
            let grid = ProcessGrid::new(dims, [true; 3]).unwrap();
            local::run(p, |comm| {
                for w in 1..=10 {
                    // Uneven split, smallest block exactly `w` on split axes.
                    let global = [0, 1, 2].map(|d| {
                        dims[d] * w + (d + 1) % dims[d].max(2) + usize::from(dims[d] == 1)
                    });
                    for nb in [Neighborhood::Faces, Neighborhood::Full] {
                        let spec = HaloSpec {
                            ghost: [w + 1; 3],
                            width: [w; 3],
                            neighborhood: nb,
                        };
                        check_exchange(comm, global, grid, spec, [1, 2])?;
                    }
                }
                Ok::<_, HaloError>(())
            })
            .unwrap_or_else(|e| panic!("{p} ranks, grid {dims:?}: {e}"));
        }
    }
}

#[test]
fn non_periodic_axes_and_anisotropic_widths() {
    let grid = ProcessGrid::new([2, 1, 3], [false, true, false]).unwrap();
    local::run(6, |comm| {
        for nb in [Neighborhood::Faces, Neighborhood::Full] {
            let spec = HaloSpec {
                ghost: [2, 3, 1],
                width: [1, 3, 1],
                neighborhood: nb,
            };
            check_exchange(comm, [5, 4, 7], grid, spec, [1, 1])?;
            // Width zero on an axis: no exchange along it.
            let spec = HaloSpec {
                ghost: [2, 1, 1],
                width: [2, 0, 1],
                neighborhood: nb,
            };
            check_exchange(comm, [5, 4, 7], grid, spec, [2, 1])?;
        }
        Ok::<_, HaloError>(())
    })
    .unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn random_shapes_grids_and_widths(
        shape in prop::array::uniform3(1usize..14),
        p in 1usize..=8,
        w in 1usize..=4,
        periodic in prop::array::uniform3(any::<bool>()),
        full in any::<bool>(),
    ) {
        let Ok(grid) = ProcessGrid::for_shape(shape, p, periodic) else { return Ok(()) };
        let dec = BlockDecomposition::new(shape, grid).unwrap();
        let too_thin = (0..p).any(|r| {
            let s = dec.box_of(r).shape();
            (0..3).any(|d| (grid.dims()[d] > 1 || periodic[d]) && s[d] < w)
        });
        let nb = if full { Neighborhood::Full } else { Neighborhood::Faces };
        let res = local::run(p, |comm| check_exchange(comm, shape, grid, HaloSpec::uniform(w, nb), [1, 1]));
        match res {
            Ok(_) => prop_assert!(!too_thin),
            Err(e) => {
                prop_assert!(too_thin, "unexpected failure: {e}");
                prop_assert!(e.reason.contains("fewer than the communicated width"), "{}", e.reason);
            }
        }
    }
}

#[test]
fn fused_fields_travel_in_one_message_per_neighbor() {
    let grid = ProcessGrid::new([2, 2, 1], [true; 3]).unwrap();
    local::run(4, |comm| {
        let dec = BlockDecomposition::new([8, 8, 8], grid)?;
        let topo = Topology::new(comm, &dec, HaloSpec::uniform(1, Neighborhood::Full))?;
        let mut a = Field::<f64>::new(topo.layout(1));
        let mut b = Field::<f64>::new(topo.layout(3));
        let mut ex = Exchanger::new(&topo, 4, 0)?;
        let mut both: Vec<&mut Field<f64>> = vec![&mut a, &mut b];
        ex.exchange(comm, &mut both)?;
        let s = ex.stats();
        let remote = topo
            .neighbors()
            .iter()
            .filter(|n| n.rank != comm.rank())
            .count();
        // 2 x 2 x 1 periodic: the two pure-z directions wrap onto the rank
        // itself; the other 24 directions are remote.
        assert_eq!(remote, 24);
        assert_eq!(s.messages, remote as u64);
        assert_eq!(s.exchanges, 1);
        // A wrong component count is an error, not a silent mismatch.
        let mut ex3 = Exchanger::<f64>::new(&topo, 3, 1)?;
        let e = ex3.exchange(comm, &mut [&mut a]).unwrap_err();
        assert!(e.to_string().contains("3 components"), "{e}");
        Ok::<_, HaloError>(())
    })
    .unwrap();
}

#[test]
fn interior_and_shell_partition_the_owned_box() {
    // Axes 0 and 2 are split (remote neighbours), axis 1 wraps onto the rank
    // itself: its ghosts are filled during post, so the interior spans it.
    let grid = ProcessGrid::new([2, 1, 2], [true; 3]).unwrap();
    local::run(4, |comm| {
        for (shape, r) in [
            ([18, 7, 24], [2, 1, 3]),
            ([8, 8, 8], [2, 2, 2]),
            ([6, 8, 16], [2, 2, 2]),
        ] {
            let dec = BlockDecomposition::new(shape, grid)?;
            let topo = Topology::new(comm, &dec, HaloSpec::uniform(3, Neighborhood::Faces))?;
            assert_eq!(topo.remote_axes(), [true, false, true]);
            let l = topo.layout(1);
            let owned = l.owned_region();
            let inner = topo.interior(r);
            let shell = topo.shell(r);
            let mut count = vec![0u8; l.padded_len()];
            for reg in shell.iter().chain(std::iter::once(&inner)) {
                for i in reg.lo[0]..reg.hi[0] {
                    for j in reg.lo[1]..reg.hi[1] {
                        for k in reg.lo[2]..reg.hi[2] {
                            count[l.index(0, [i, j, k])] += 1;
                            assert!(owned.contains([i, j, k]));
                        }
                    }
                }
            }
            assert_eq!(
                count.iter().map(|&c| c as usize).sum::<usize>(),
                owned.len()
            );
            assert!(count.iter().all(|&c| c <= 1));
            if !inner.is_empty() {
                // Along remote axes an interior cell's stencil stays inside the
                // owned box; along the local axis it spans the whole box.
                for d in [0, 2] {
                    assert!(inner.lo[d] - r[d] >= owned.lo[d] && inner.hi[d] + r[d] <= owned.hi[d]);
                }
                assert_eq!((inner.lo[1], inner.hi[1]), (owned.lo[1], owned.hi[1]));
            }
        }
        Ok::<_, HaloError>(())
    })
    .unwrap();
}

#[test]
fn overlapped_exchange_allows_reading_while_in_flight() {
    let grid = ProcessGrid::new([3, 1, 1], [true; 3]).unwrap();
    local::run(3, |comm| {
        let dec = BlockDecomposition::new([12, 5, 5], grid)?;
        let topo = Topology::new(comm, &dec, HaloSpec::uniform(1, Neighborhood::Faces))?;
        let mut u = Field::<f64>::new(topo.layout(1));
        u.fill_owned(0, &topo.owned(), |p| tag(0, p));
        let mut ex = Exchanger::new(&topo, 1, 0)?;
        let pending = ex.post(comm, &mut [&mut u])?;
        let inner = topo.interior([1; 3]);
        let sum: f64 = (inner.lo[0]..inner.hi[0])
            .map(|i| u.get(0, [i, 2, 2]))
            .sum();
        pending.finish(&mut [&mut u])?;
        assert!(sum > 0.0);
        let b = topo.owned();
        assert_eq!(u.get(0, [0, 1, 1]), tag(0, [(b.lo[0] + 11) % 12, 0, 0]));
        Ok::<_, HaloError>(())
    })
    .unwrap();
}

/// A `Pending` that is dropped waits for its messages; one that is leaked
/// leaves them with the exchanger: the next `post` completes them, says so,
/// and the exchange after it is correct again. Dropping an exchanger whose
/// `Pending` was leaked waits for its transfers (no write into freed
/// buffers: the in-process backend would otherwise still deliver into them
/// when the next exchange's receive matches an old message).
#[test]
fn dropped_and_leaked_exchanges_leave_the_exchanger_usable() {
    let grid = ProcessGrid::new([3, 1, 1], [true; 3]).unwrap();
    local::run(3, |comm| {
        let dec = BlockDecomposition::new([12, 5, 5], grid)?;
        let topo = Topology::new(comm, &dec, HaloSpec::uniform(1, Neighborhood::Faces))?;
        let b = topo.owned();
        let ghost = |u: &Field<f64>| u.get(0, [0, 1, 1]);
        let expect = |step: f64| tag(0, [(b.lo[0] + 11) % 12, 0, 0]) + step;
        let mut u = Field::<f64>::new(topo.layout(1));
        let mut ex = Exchanger::new(&topo, 1, 0)?;
        // Step 0: post, then drop without finishing.
        u.fill_owned(0, &b, |p| tag(0, p));
        drop(ex.post(comm, &mut [&mut u])?);
        assert_eq!(
            ghost(&u),
            0.0,
            "a dropped exchange fills no ghost by message"
        );
        // Step 1: post, then leak.
        u.fill_owned(0, &b, |p| tag(0, p) + 1.0);
        std::mem::forget(ex.post(comm, &mut [&mut u])?);
        let err = ex.post(comm, &mut [&mut u]).unwrap_err();
        assert!(err.to_string().contains("leaked"), "{err}");
        // Step 2: the exchanger works again, with this step's values.
        u.fill_owned(0, &b, |p| tag(0, p) + 2.0);
        ex.exchange(comm, &mut [&mut u])?;
        assert_eq!(ghost(&u), expect(2.0));
        // Step 3: leak, then drop the exchanger (its drop completes the
        // transfers); a new exchanger on the same channel sees only its own
        // messages.
        u.fill_owned(0, &b, |p| tag(0, p) + 3.0);
        std::mem::forget(ex.post(comm, &mut [&mut u])?);
        drop(ex);
        let mut ex = Exchanger::new(&topo, 1, 0)?;
        u.fill_owned(0, &b, |p| tag(0, p) + 4.0);
        ex.exchange(comm, &mut [&mut u])?;
        assert_eq!(ghost(&u), expect(4.0));
        Ok::<_, HaloError>(())
    })
    .unwrap();
}

#[test]
fn errors_name_rank_axis_and_sizes() {
    // 10 cells over 4 ranks along axis 0: extents 3, 3, 2, 2.
    let grid = ProcessGrid::new([4, 1, 1], [true; 3]).unwrap();
    let err = local::run(4, |comm| {
        let dec = BlockDecomposition::new([10, 4, 4], grid)?;
        Topology::new(comm, &dec, HaloSpec::uniform(3, Neighborhood::Faces)).map(|_| ())
    })
    .unwrap_err();
    // Every rank reports the same error itself (the agreement is one
    // collective, which every rank completes with the messages it has),
    // not as the `PeerFailed` of whichever rank returned first.
    for e in &err.ranks {
        let e = e.as_ref().unwrap();
        assert!(
            e.contains("rank 2 owns 2 cells on axis 0, fewer than the communicated width 3"),
            "{e}"
        );
        assert!(!e.contains(" failed: "), "{e}");
    }
    let e = local::run(1, |comm| {
        let dec = BlockDecomposition::new([4, 4, 4], ProcessGrid::new([1, 1, 1], [true; 3])?)?;
        Topology::new(
            comm,
            &dec,
            HaloSpec {
                ghost: [1; 3],
                width: [1, 2, 1],
                neighborhood: Neighborhood::Faces,
            },
        )
        .map(|_| ())
    })
    .unwrap_err();
    assert!(
        e.reason
            .contains("width 2 on axis 1 exceeds the allocated ghost width 1"),
        "{}",
        e.reason
    );
    // Ranks that disagree: every rank gets the error, nobody hangs.
    let e = local::run(3, |comm| {
        let dec = BlockDecomposition::new([9, 4, 4], ProcessGrid::new([3, 1, 1], [true; 3])?)?;
        let w = if comm.rank() == 2 { 2 } else { 1 };
        Topology::new(comm, &dec, HaloSpec::uniform(w, Neighborhood::Faces)).map(|_| ())
    })
    .unwrap_err();
    assert!(
        e.ranks
            .iter()
            .all(|r| r.as_ref().is_some_and(|m| m.contains("rank 2 disagrees"))),
        "{e:?}"
    );
    // A grid that does not match the communicator.
    let e = local::run(2, |comm| {
        let dec = BlockDecomposition::new([9, 4, 4], ProcessGrid::new([3, 1, 1], [true; 3])?)?;
        Topology::new(comm, &dec, HaloSpec::uniform(1, Neighborhood::Faces)).map(|_| ())
    })
    .unwrap_err();
    assert!(
        e.reason
            .contains("holds 3 ranks but the communicator has 2"),
        "{}",
        e.reason
    );
    // A rank that fails mid-exchange: the others get an error, not a hang.
    let e = local::run(4, |comm| {
        let dec = BlockDecomposition::new([8, 8, 8], ProcessGrid::new([4, 1, 1], [true; 3])?)?;
        let topo = Topology::new(comm, &dec, HaloSpec::uniform(1, Neighborhood::Faces))?;
        if comm.rank() == 1 {
            return Err(HaloError::Comm(CommError::invalid("NaN in the field")));
        }
        let mut u = Field::<f64>::new(topo.layout(1));
        let mut ex = Exchanger::new(&topo, 1, 0)?;
        ex.exchange(comm, &mut [&mut u])?;
        // Rank 3's neighbours are 2 and 0, so its exchange can succeed; the
        // barrier needs rank 1.
        comm.barrier().map_err(HaloError::from)
    })
    .unwrap_err();
    assert_eq!(e.rank, 1);
    assert!(e
        .ranks
        .iter()
        .enumerate()
        .all(|(r, m)| r == 1 || m.as_ref().is_some_and(|m| m.contains("rank 1 failed"))));
}

/// The host field's copies, packs and unpacks take rows of a few values
/// through lengths fixed at compile time (1 to 16) and longer ones through
/// slices: every width from 0 (an empty region) to 20 must move exactly the
/// values a plain loop over the cells moves, in both components, and
/// nothing else.
#[test]
fn host_rows_of_every_width_move_like_a_plain_loop() {
    let layout = FieldLayout {
        owned: [5, 6, 40],
        ghost: [2, 3, 20],
        components: 2,
    };
    let s = layout.strides();
    let at = |p: [usize; 3]| p[0] * s[0] + p[1] * s[1] + p[2];
    let mut base = Field::<f64>::new(layout);
    for (i, v) in base.as_mut_slice().iter_mut().enumerate() {
        *v = i as f64 + 0.5;
    }
    let cells = |r: &Region| -> Vec<[usize; 3]> {
        (r.lo[0]..r.hi[0])
            .flat_map(|i| {
                (r.lo[1]..r.hi[1]).flat_map(move |j| (r.lo[2]..r.hi[2]).map(move |k| [i, j, k]))
            })
            .collect()
    };
    for w in 0..=20 {
        let src = Region {
            lo: [1, 2, 3],
            hi: [4, 5, 3 + w],
        };
        let dst = Region {
            lo: [2, 0, 45],
            hi: [5, 3, 45 + w],
        };
        for comp in 0..2 {
            // Copy.
            let mut got = base.clone();
            got.copy_region(comp, &src, &dst).unwrap();
            let mut want = base.clone();
            for (a, b) in cells(&src).into_iter().zip(cells(&dst)) {
                let v = want.component(comp)[at(a)];
                want.component_mut(comp)[at(b)] = v;
            }
            assert_eq!(got, want, "copy, width {w}, component {comp}");
            // Pack.
            let mut out = vec![0.0; src.len()];
            base.pack(comp, &src, &mut out).unwrap();
            let plain: Vec<f64> = cells(&src)
                .into_iter()
                .map(|p| base.component(comp)[at(p)])
                .collect();
            assert_eq!(out, plain, "pack, width {w}, component {comp}");
            // Unpack.
            let mut got = base.clone();
            let input: Vec<f64> = (0..dst.len()).map(|i| -(i as f64) - 1.0).collect();
            got.unpack(comp, &dst, &input).unwrap();
            let mut want = base.clone();
            for (p, v) in cells(&dst).into_iter().zip(&input) {
                want.component_mut(comp)[at(p)] = *v;
            }
            assert_eq!(got, want, "unpack, width {w}, component {comp}");
        }
    }
}
