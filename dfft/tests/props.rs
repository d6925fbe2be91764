//! Properties of the dfft plan builders on random global shapes, rank
//! counts, process grids and memory orders:
//!
//! - the boxes of two layouts of the same shape intersect so that every
//!   destination box is covered exactly once by the source boxes;
//! - a `Reshape` puts every value at its global position in the
//!   destination layout (any protocol, batch), and a reshape followed by
//!   its inverse is the identity on random data, bit for bit;
//! - a reshape between equal layouts moves nothing through the
//!   communicator;
//! - the minimum-reshape selection never needs more reshapes than the
//!   pencil pipeline, needs none on one rank, and ends in the documented
//!   layout.

use comm::{local, Communicator};
use dfft::{Fft3d, FftError, Kind, Layout, Options, Output, Protocol, Reshape, Selection};
use num_complex::Complex64;
use proptest::prelude::*;
use proptest::sample::Index;

const PERMS: [[usize; 3]; 6] = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
];

/// Every process grid of `p` ranks that leaves no rank empty.
fn grids(global: [usize; 3], p: usize) -> Vec<[usize; 3]> {
    let mut v = vec![];
    for a in 1..=p {
        for b in 1..=p {
            if p.is_multiple_of(a * b) {
                let d = [a, b, p / (a * b)];
                if (0..3).all(|x| d[x] <= global[x]) {
                    v.push(d);
                }
            }
        }
    }
    v
}

/// A random layout of `global` on `p` ranks (any grid, any memory order),
/// `None` if `p` ranks cannot fit.
fn pick(global: [usize; 3], p: usize, grid: Index, order: usize) -> Option<Layout> {
    let g = grids(global, p);
    if g.is_empty() {
        return None;
    }
    Some(Layout::new(global, g[grid.index(g.len())], PERMS[order]).unwrap())
}

#[derive(Debug, Clone)]
struct Pair {
    from: Layout,
    to: Layout,
}

fn pair() -> impl Strategy<Value = Pair> {
    (
        [1usize..=9, 1usize..=9, 1usize..=9],
        // Up to 8 rank threads per case.
        1usize..=8,
        (any::<Index>(), 0usize..6),
        (any::<Index>(), 0usize..6),
    )
        .prop_filter_map("the ranks must fit the shape", |(g, p, a, b)| {
            Some(Pair {
                from: pick(g, p, a.0, a.1)?,
                to: pick(g, p, b.0, b.1)?,
            })
        })
}

fn protocol() -> impl Strategy<Value = Protocol> {
    prop::sample::select(Protocol::ALL.to_vec())
}

/// Global position of local element `i` of `rank` in `layout`.
fn global_of(layout: &Layout, rank: usize, i: usize) -> [usize; 3] {
    let b = layout.box_of(rank);
    let s = b.shape();
    let [o0, o1, o2] = layout.order();
    let mut p = [0; 3];
    p[o2] = i % s[o2];
    p[o1] = (i / s[o2]) % s[o1];
    p[o0] = i / (s[o2] * s[o1]);
    [0, 1, 2].map(|d| b.lo[d] + p[d])
}

/// A value that names a global point and a field.
fn tag(global: [usize; 3], p: [usize; 3], field: usize) -> Complex64 {
    let lin = (p[0] * global[1] + p[1]) * global[2] + p[2];
    Complex64::new(lin as f64, field as f64)
}

/// SplitMix64: reproducible random bits per rank.
fn bits(seed: u64, n: usize) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
        .collect()
}

fn fft_options(selection: Selection, output: Output) -> Options {
    Options {
        selection,
        output,
        ..Options::default()
    }
}

/// The reshapes and the spectral layout of the plan of `kind` (a run-time
/// choice here; the plans' types tell the kinds apart).
fn planned(
    comm: &dyn comm::Communicator,
    input: &Layout,
    kind: Kind,
    options: Options,
) -> Result<(usize, Layout), FftError> {
    Ok(match kind {
        Kind::C2C => {
            let p = Fft3d::c2c(comm, input, options)?;
            (p.reshapes(), p.output_layout().clone())
        }
        Kind::R2C { halved } => {
            let p = Fft3d::r2c(comm, input, halved, options)?;
            (p.reshapes(), p.output_layout().clone())
        }
    })
}

proptest! {
    // 64 random cases per property; each plans and runs on at most 8 rank
    // threads over at most 9^3 points, a few milliseconds.
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every point of every destination box lies in exactly one source box,
    /// so the intersections `from.box_of(p) ∩ to.box_of(q)` tile box `q`.
    #[test]
    fn intersections_cover_each_destination_once(c in pair()) {
        let (from, to) = (&c.from, &c.to);
        let p = from.ranks();
        for q in 0..p {
            let dst = to.box_of(q);
            let covered: usize = (0..p).map(|r| from.box_of(r).intersect(&dst).len()).sum();
            prop_assert_eq!(covered, dst.len(), "destination box {:?}", dst);
            for i in dst.lo[0]..dst.hi[0] {
                for j in dst.lo[1]..dst.hi[1] {
                    for k in dst.lo[2]..dst.hi[2] {
                        let n = (0..p)
                            .filter(|&r| from.box_of(r).intersect(&dst).contains([i, j, k]))
                            .count();
                        prop_assert_eq!(n, 1, "point {:?}", [i, j, k]);
                    }
                }
            }
        }
    }

    /// Each value lands at its global position in the destination layout,
    /// for every protocol and batch; and the reverse plan restores random
    /// bits exactly.
    #[test]
    fn reshape_moves_to_global_positions_and_inverts_exactly(
        c in pair(),
        proto in protocol(),
        batch in 1usize..=3,
        seed in any::<u64>(),
    ) {
        let (from, to) = (&c.from, &c.to);
        let g = from.global();
        let out = local::run(from.ranks(), |comm| {
            let r = comm.rank();
            let mut fwd = Reshape::<Complex64>::new(comm, from, to, batch, proto)?;
            let x: Vec<Complex64> = (0..batch)
                .flat_map(|f| (0..from.local_len(r)).map(move |i| (f, i)))
                .map(|(f, i)| tag(g, global_of(from, r, i), f))
                .collect();
            let mut y = vec![Complex64::default(); fwd.output_len()];
            fwd.execute(comm, &x, &mut y)?;
            // Random bits (NaNs included) through u64 there and back.
            let mut there = Reshape::<u64>::new(comm, from, to, batch, proto)?;
            let mut back = Reshape::<u64>::new(comm, to, from, batch, proto)?;
            let data = bits(seed ^ r as u64, there.input_len());
            let mut mid = vec![0u64; there.output_len()];
            let mut again = vec![0u64; back.output_len()];
            there.execute(comm, &data, &mut mid)?;
            back.execute(comm, &mid, &mut again)?;
            Ok::<_, FftError>((y, data == again))
        })
        .unwrap();
        for (r, (y, identity)) in out.iter().enumerate() {
            prop_assert!(*identity, "rank {}: reshape then inverse changed bits", r);
            let n = to.local_len(r);
            prop_assert_eq!(y.len(), n * batch);
            for f in 0..batch {
                for i in 0..n {
                    let want = tag(g, global_of(to, r, i), f);
                    prop_assert_eq!(y[f * n + i], want, "rank {} field {} element {}", r, f, i);
                }
            }
        }
    }

    /// A reshape between equal layouts sends no message: every block stays
    /// on its rank and is copied directly.
    #[test]
    fn equal_layouts_send_nothing(c in pair(), proto in protocol()) {
        let l = &c.from;
        let msgs = local::run(l.ranks(), |comm| {
            let plan = Reshape::<f64>::new(comm, l, l, 1, proto)?;
            let x: Vec<f64> = (0..plan.input_len()).map(|i| i as f64).collect();
            let mut y = vec![0.0; plan.output_len()];
            let mut plan = plan;
            plan.execute(comm, &x, &mut y)?;
            Ok::<_, FftError>((plan.messages(), x == y))
        })
        .unwrap();
        for (r, (m, same)) in msgs.into_iter().enumerate() {
            prop_assert_eq!(m, 0, "rank {}", r);
            prop_assert!(same, "rank {}", r);
        }
    }

    /// The minimum-reshape selection needs no more reshapes than the
    /// pencil pipeline for any input layout, kind and output placement;
    /// its spectrum is in the input layout (`Output::Input`) or in a
    /// layout holding the last transformed axis whole (`Output::Transposed`).
    /// Into the input layout it needs at most one reshape more than the
    /// transposed plan (fewer when it goes straight to the input layout, as
    /// in `min_reshape_thin_axis_needs_no_reorder`).
    #[test]
    fn min_reshape_never_needs_more_than_pencils(
        c in pair(),
        kind in prop_oneof![Just(Kind::C2C), (0usize..3).prop_map(|h| Kind::R2C { halved: h })],
        transposed in any::<bool>(),
    ) {
        let input = &c.from;
        let output = if transposed { Output::Transposed } else { Output::Input };
        let counts = local::run(input.ranks(), |comm| {
            let min = planned(comm, input, kind, fft_options(Selection::MinReshape, output))?;
            let pen = planned(comm, input, kind, fft_options(Selection::Pencils, output))?;
            let tr = planned(
                comm,
                input,
                kind,
                fft_options(Selection::MinReshape, Output::Transposed),
            )?;
            Ok::<_, FftError>(([min.0, pen.0, tr.0], min.1, tr.1))
        });
        let counts = match counts {
            Ok(c) => c,
            // A plan may be impossible (no pencil or slab fits the rank
            // count); then it must be refused on every rank.
            Err(e) => {
                prop_assert!(e.ranks.iter().all(Option::is_some), "{}", e);
                return Ok(());
            }
        };
        let g = input.global();
        let cg = match kind {
            Kind::C2C => g,
            Kind::R2C { halved } => {
                let mut cg = g;
                cg[halved] = g[halved] / 2 + 1;
                cg
            }
        };
        // The last transformed axis: 0 for C2C (axes 2, 1, 0); for R2C the
        // smaller of the two unhalved axes (halved first, then the others
        // from the highest index down).
        let last = match kind {
            Kind::C2C => 0,
            Kind::R2C { halved } => (0..3).find(|&a| a != halved).unwrap(),
        };
        for (r, (n, out, tr_out)) in counts.iter().enumerate() {
            let [min, pen, tr] = *n;
            prop_assert_eq!(n, &counts[0].0, "rank {} disagrees with rank 0", r);
            prop_assert_eq!(out.global(), cg);
            prop_assert!(tr_out.is_whole(last), "output {:?} splits axis {}", tr_out, last);
            if transposed {
                prop_assert_eq!(out, tr_out);
            } else {
                prop_assert_eq!(out, &input.with_global(cg).unwrap());
                // Output::Input is at most the transposed plan plus one
                // reshape back when the transposed spectrum is not in the
                // input layout.
                prop_assert!(
                    min <= tr + usize::from(*tr_out != *out),
                    "rank {}: min-reshape {} > transposed {} + 1",
                    r,
                    min,
                    tr
                );
            }
            prop_assert!(min <= pen, "rank {}: min-reshape {} > pencils {}", r, min, pen);
        }
    }

    /// On one rank every axis is whole: no reshape with either selection,
    /// whatever the memory order.
    #[test]
    fn one_rank_needs_no_reshape(
        g in [1usize..=9, 1usize..=9, 1usize..=9],
        order in 0usize..6,
        transposed in any::<bool>(),
        halved in 0usize..=3,
    ) {
        let input = Layout::new(g, [1, 1, 1], PERMS[order]).unwrap();
        let kind = if halved == 3 { Kind::C2C } else { Kind::R2C { halved } };
        let output = if transposed { Output::Transposed } else { Output::Input };
        let n = local::run(1, |comm| {
            let a = planned(comm, &input, kind, fft_options(Selection::MinReshape, output))?;
            let b = planned(comm, &input, kind, fft_options(Selection::Pencils, output))?;
            Ok::<_, FftError>((a.0, b.0))
        })
        .unwrap();
        prop_assert_eq!(n[0], (0, 0));
    }
}

/// The documented table of the crate (`dfft/src/lib.rs`): reshapes of a
/// forward plus backward C2C pair on 8 ranks for 64^3 (twice the forward
/// count). A fixed case that anchors the property above to the figures the
/// crate publishes.
#[test]
fn documented_reshape_table() {
    let g = [64; 3];
    let rows: [(Layout, [usize; 3]); 4] = [
        (Layout::bricks(g, 8).unwrap(), [8, 6, 4]),
        (Layout::pencils(g, 8, 2).unwrap(), [6, 4, 2]),
        (Layout::pencils(g, 8, 0).unwrap(), [6, 4, 4]),
        (Layout::slabs(g, 8, 0).unwrap(), [4, 4, 2]),
    ];
    let got = local::run(8, |comm: &dyn Communicator| {
        let mut v = vec![];
        for (l, _) in &rows {
            let pen = Fft3d::c2c(comm, l, fft_options(Selection::Pencils, Output::Input))?;
            let min = Fft3d::c2c(comm, l, fft_options(Selection::MinReshape, Output::Input))?;
            let tr = Fft3d::c2c(
                comm,
                l,
                fft_options(Selection::MinReshape, Output::Transposed),
            )?;
            v.push([2 * pen.reshapes(), 2 * min.reshapes(), 2 * tr.reshapes()]);
        }
        Ok::<_, FftError>(v)
    })
    .unwrap();
    for (i, (_, want)) in rows.iter().enumerate() {
        assert_eq!(got[0][i], *want, "row {i}");
    }
}

/// Found by the property above (it was a known excess of the selection): a
/// 2-D problem embedded as `[1, 64, 64]` on 4 ranks, input in y-pencils
/// (`dims [1, 1, 4]`, order `[0, 2, 1]`). The pencil path needs 2 reshapes
/// per forward C2C (z-pencil, then back to the y-pencil, where axis 0 is
/// already whole). The selection used to need 3: z-pencil, then the slab
/// split along axis 2 with order `[2, 0, 1]` (the input's grid in another
/// memory order), then a reshape that only reordered memory back to
/// `[0, 2, 1]`. It now reshapes straight into the input layout, which holds
/// both remaining axes whole. The same grid with order `[1, 0, 2]` (axis 1
/// whole but strided) takes 2 reshapes against the pencil path's 3, and
/// transforms axis 1 on strided lines. Both spectra have the bits of the
/// pencil path and of one rank.
#[test]
fn min_reshape_thin_axis_needs_no_reorder() {
    let g = [1, 64, 64];
    let y_pencils = Layout::pencils(g, 4, 1).unwrap();
    assert_eq!(
        (y_pencils.dims(), y_pencils.order()),
        ([1, 1, 4], [0, 2, 1])
    );
    let strided = y_pencils.with_order([1, 0, 2]).unwrap();
    type Spectrum = (usize, Vec<([usize; 3], u64, u64)>);
    let spectrum = |comm: &dyn Communicator, l: &Layout, selection| {
        let mut plan = Fft3d::c2c(comm, l, fft_options(selection, Output::Input))?;
        let r = comm.rank();
        let x: Vec<Complex64> = (0..l.local_len(r))
            .map(|i| {
                let t = tag(g, global_of(l, r, i), 0).re;
                Complex64::new((t * 0.37).sin(), (t * 0.11).cos())
            })
            .collect();
        let mut y = vec![Complex64::default(); plan.output_len()];
        let mut scratch = vec![Complex64::default(); plan.scratch_len()];
        plan.forward(comm, &x, &mut y, &mut scratch)?;
        let at = y
            .iter()
            .enumerate()
            .map(|(i, v)| (global_of(l, r, i), v.re.to_bits(), v.im.to_bits()))
            .collect();
        Ok::<Spectrum, FftError>((plan.reshapes(), at))
    };
    // Every rank's values by global position, sorted.
    let gather = |parts: &[Spectrum]| {
        let mut v: Vec<_> = parts.iter().flat_map(|s| s.1.iter().copied()).collect();
        v.sort_unstable();
        v
    };
    let one = local::run(1, |comm| {
        spectrum(
            comm,
            &Layout::new(g, [1; 3], [0, 1, 2])?,
            Selection::MinReshape,
        )
    })
    .unwrap();
    let want = gather(&one);
    for (input, counts) in [(&y_pencils, (2, 2)), (&strided, (2, 3))] {
        let n = local::run(4, |comm| {
            let min = spectrum(comm, input, Selection::MinReshape)?;
            let pen = spectrum(comm, input, Selection::Pencils)?;
            Ok::<_, FftError>((min, pen))
        })
        .unwrap();
        let (min, pen): (Vec<Spectrum>, Vec<Spectrum>) = n.into_iter().unzip();
        assert_eq!(
            (min[0].0, pen[0].0),
            counts,
            "{input:?}: (min-reshape, pencils)"
        );
        assert!(
            gather(&min) == want,
            "{input:?}: min-reshape spectrum differs from one rank"
        );
        assert!(
            gather(&pen) == want,
            "{input:?}: pencil spectrum differs from one rank"
        );
    }
}
