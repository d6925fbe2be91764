//! Sphere packings: validation, text input and output, random packings by
//! overlap relaxation, and distance queries through a bucket grid.

use crate::body::{check_finite, min_image, Body};
use crate::grid::check_lengths;
use crate::rng::{splitmix64, Xoshiro256};
use crate::{IbmError, Result};
use std::f64::consts::PI;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The overlap two spheres of a packing may have, relative to the smaller
/// radius: [`Packing::random`] relaxes overlaps below it and
/// [`Packing::parse`] accepts them, so a written random packing reads back.
pub const OVERLAP_TOLERANCE: f64 = 1e-9;

/// The largest solid fraction [`Packing::random`] accepts.
pub const MAX_RANDOM_FRACTION: f64 = 0.55;

/// The most spheres [`Packing::random`] places (2^26).
pub const MAX_RANDOM_SPHERES: usize = 1 << 26;

/// One sphere: centre and radius.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sphere {
    /// Centre (any finite coordinates; wrapped into the box for queries).
    pub centre: [f64; 3],
    /// Radius.
    pub radius: f64,
}

/// Non-overlapping spheres in a periodic box: a [`Body`] whose distance is
/// the exact minimum over all periodic images of `|x - c| - r`, found
/// through a uniform bucket grid (each sphere filed under the bucket of its
/// centre; buckets are searched in growing shells until no unvisited
/// sphere can be nearer), so a query costs a few dozen sphere distances
/// whatever the number of spheres. A packing of one sphere is one sphere
/// and its periodic images ([`Packing::single`]).
#[derive(Debug, Clone)]
pub struct Packing {
    spheres: Vec<Sphere>,
    lengths: [f64; 3],
    lookup: Lookup,
}

/// Options of [`Packing::random_with`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomOptions {
    /// Most relaxation sweeps before [`IbmError::NotConverged`]
    /// (default 20 000).
    pub max_sweeps: usize,
    /// Pairs that overlap are pushed apart to `2 r (1 + push_margin)`
    /// (finite and at least 0, else [`IbmError::PushMargin`]; default
    /// 1e-3): the small overshoot lets the relaxation end with no overlap
    /// at all instead of creeping towards contact.
    pub push_margin: f64,
}

impl Default for RandomOptions {
    fn default() -> Self {
        RandomOptions {
            max_sweeps: 20_000,
            push_margin: 1e-3,
        }
    }
}

impl Packing {
    /// The packing of `spheres` in the box `lengths`. Errors name the
    /// sphere by its 1-based position: a radius not positive, a diameter not
    /// below the smallest box length, two spheres overlapping (periodic
    /// minimum image) by more than [`OVERLAP_TOLERANCE`] times the smaller
    /// radius. An empty list is valid (all fluid, distance `+inf`).
    pub fn new(spheres: Vec<Sphere>, lengths: [f64; 3]) -> Result<Self> {
        let lines: Vec<usize> = (1..=spheres.len()).collect();
        Packing::validated(spheres, &lines, lengths)
    }

    /// One sphere and its periodic images.
    pub fn single(centre: [f64; 3], radius: f64, lengths: [f64; 3]) -> Result<Self> {
        Packing::new(vec![Sphere { centre, radius }], lengths)
    }

    /// Parses one sphere per line, `x y z r` separated by white space;
    /// blank lines and everything after `#` are ignored. Errors name the
    /// 1-based line number: a line that is not four finite numbers (with
    /// its text), and the checks of [`Packing::new`].
    pub fn parse(text: &str, lengths: [f64; 3]) -> Result<Self> {
        check_lengths(lengths)?;
        let mut spheres = Vec::new();
        let mut lines = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let body = raw.split('#').next().unwrap_or("").trim();
            if body.is_empty() {
                continue;
            }
            let bad = |reason: String| IbmError::Parse {
                line: i + 1,
                text: raw.to_string(),
                reason,
            };
            let tokens: Vec<&str> = body.split_whitespace().collect();
            if tokens.len() != 4 {
                return Err(bad(format!("{} fields", tokens.len())));
            }
            let mut v = [0.0; 4];
            for (k, t) in tokens.iter().enumerate() {
                v[k] = match t.parse::<f64>() {
                    Ok(x) if x.is_finite() => x,
                    Ok(_) => return Err(bad(format!("`{t}` is not finite"))),
                    Err(_) => return Err(bad(format!("`{t}` is not a number"))),
                };
            }
            spheres.push(Sphere {
                centre: [v[0], v[1], v[2]],
                radius: v[3],
            });
            lines.push(i + 1);
        }
        Packing::validated(spheres, &lines, lengths)
    }

    /// Reads and parses a packing file ([`Packing::parse`]).
    pub fn read(path: impl AsRef<Path>, lengths: [f64; 3]) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| IbmError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Packing::parse(&text, lengths)
    }

    /// The packing as text in the format of [`Packing::parse`] (comment
    /// lines with the box and the solid fraction first; numbers written in
    /// the shortest form that reads back to the same bits).
    pub fn to_text(&self) -> String {
        let l = self.lengths;
        let mut s = format!(
            "# ibm packing: {} spheres, box {} {} {}, solid fraction {}\n# x y z r\n",
            self.spheres.len(),
            l[0],
            l[1],
            l[2],
            self.solid_fraction()
        );
        for sp in &self.spheres {
            let c = sp.centre;
            s.push_str(&format!("{} {} {} {}\n", c[0], c[1], c[2], sp.radius));
        }
        s
    }

    /// Writes [`Packing::to_text`] to `path` through a temporary file in
    /// the same folder, synced and then renamed over `path`: `path` holds
    /// either its old contents or the whole new text, never part of it,
    /// and no temporary file is left behind on an error.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let io = |message: String| IbmError::Io {
            path: path.display().to_string(),
            message,
        };
        let name = path
            .file_name()
            .ok_or_else(|| io("not a file name".to_string()))?;
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let tmp = path.with_file_name(format!(
            ".{}.{}.{}.tmp",
            name.to_string_lossy(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let text = self.to_text();
        let attempt = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            drop(f);
            std::fs::rename(&tmp, path)
        };
        attempt().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(e.to_string())
        })
    }

    /// A random monodisperse packing of spheres of `radius` filling the
    /// solid fraction `c` in `[0, 0.55]`, reproducible from `seed` (the same
    /// spheres, to the bit, on every platform): `N = round(c V / (4/3 pi
    /// r^3))` centres uniform at random, then overlap relaxation
    /// ([`Packing::random_with`] with the default [`RandomOptions`]).
    pub fn random(lengths: [f64; 3], radius: f64, c: f64, seed: u64) -> Result<Self> {
        Packing::random_with(lengths, radius, c, seed, RandomOptions::default())
    }

    /// [`Packing::random`] with options. Relaxation: sweeps over the
    /// spheres in index order; each pair closer than `2 r` (periodic minimum
    /// image, found through a cell list rebuilt every sweep, neighbours in a
    /// fixed order) is pushed apart symmetrically along the line of centres
    /// to `2 r (1 + push_margin)`, positions updated at once. It stops after
    /// the first sweep whose largest overlap is below [`OVERLAP_TOLERANCE`]
    /// `r` and whose result a separate check confirms; else
    /// [`IbmError::NotConverged`] after `max_sweeps`. Other errors: a box
    /// length not finite and positive, `2 radius` not below the smallest
    /// box length, `c` outside `[0, 0.55]`, more than
    /// [`MAX_RANDOM_SPHERES`] spheres, a `push_margin` negative or not
    /// finite; all are checked before any sphere is placed. Random sequential
    /// addition would jam near 0.38; this reaches 0.55 (random close
    /// packing is near 0.64).
    pub fn random_with(
        lengths: [f64; 3],
        radius: f64,
        c: f64,
        seed: u64,
        options: RandomOptions,
    ) -> Result<Self> {
        check_lengths(lengths)?;
        if !(options.push_margin.is_finite() && options.push_margin >= 0.0) {
            return Err(IbmError::PushMargin {
                value: options.push_margin,
            });
        }
        let lmin = lengths[0].min(lengths[1]).min(lengths[2]);
        if !(radius > 0.0 && 2.0 * radius < lmin) {
            return Err(IbmError::Radius {
                value: radius,
                max: 0.5 * lmin,
                inclusive: false,
            });
        }
        if !(0.0..=MAX_RANDOM_FRACTION).contains(&c) {
            return Err(IbmError::SolidFraction {
                value: c,
                range: format!("[0, {MAX_RANDOM_FRACTION}] (random packing)"),
            });
        }
        let v: f64 = lengths.iter().product();
        let count = (c * v / (4.0 / 3.0 * PI * radius.powi(3))).round();
        if count > MAX_RANDOM_SPHERES as f64 {
            return Err(IbmError::TooManySpheres {
                count,
                radius,
                fraction: c,
                max: MAX_RANDOM_SPHERES,
            });
        }
        let n = count as usize;
        let mut rng = Xoshiro256::new(seed);
        let mut pos: Vec<[f64; 3]> = (0..n)
            .map(|_| [0, 1, 2].map(|d| rng.uniform() * lengths[d]))
            .collect();
        let tol = OVERLAP_TOLERANCE * radius;
        let target = 2.0 * radius * (1.0 + options.push_margin);
        let mut cells = CellList::new(lengths, 2.0 * radius);
        let mut overlap = f64::INFINITY;
        let mut converged = n < 2;
        let mut sweeps = 0;
        while !converged && sweeps < options.max_sweeps {
            sweeps += 1;
            for p in pos.iter_mut() {
                for d in 0..3 {
                    p[d] = wrap(p[d], lengths[d]);
                }
            }
            cells.build(&pos);
            overlap = cells.relax(&mut pos, radius, target, lengths, true);
            if overlap < tol {
                for p in pos.iter_mut() {
                    for d in 0..3 {
                        p[d] = wrap(p[d], lengths[d]);
                    }
                }
                cells.build(&pos);
                overlap = cells.relax(&mut pos, radius, target, lengths, false);
                converged = overlap < tol;
            }
        }
        if !converged {
            return Err(IbmError::NotConverged {
                fraction: c,
                sweeps,
                overlap,
                radius,
                tolerance: tol,
            });
        }
        let spheres = pos
            .into_iter()
            .map(|p| Sphere {
                centre: [0, 1, 2].map(|d| wrap(p[d], lengths[d])),
                radius,
            })
            .collect();
        Packing::new(spheres, lengths)
    }

    /// The spheres as given (centres not wrapped).
    pub fn spheres(&self) -> &[Sphere] {
        &self.spheres
    }

    /// Number of spheres.
    pub fn len(&self) -> usize {
        self.spheres.len()
    }

    /// True when the packing holds no sphere.
    pub fn is_empty(&self) -> bool {
        self.spheres.is_empty()
    }

    /// The achieved solid fraction `sum 4/3 pi r^3 / V` (overlaps within
    /// [`OVERLAP_TOLERANCE`] are not subtracted).
    pub fn solid_fraction(&self) -> f64 {
        let v: f64 = self.lengths.iter().product();
        self.spheres
            .iter()
            .map(|s| 4.0 / 3.0 * PI * s.radius.powi(3))
            .sum::<f64>()
            / v
    }

    fn validated(spheres: Vec<Sphere>, lines: &[usize], lengths: [f64; 3]) -> Result<Self> {
        check_lengths(lengths)?;
        let lmin = lengths[0].min(lengths[1]).min(lengths[2]);
        for (s, &line) in spheres.iter().zip(lines) {
            check_finite("sphere centre", &s.centre)?;
            check_finite("sphere radius", &[s.radius])?;
            if s.radius <= 0.0 {
                return Err(IbmError::NonPositiveRadius {
                    line,
                    radius: s.radius,
                });
            }
            if 2.0 * s.radius >= lmin {
                return Err(IbmError::SphereTooLarge {
                    line,
                    diameter: 2.0 * s.radius,
                    limit: lmin,
                });
            }
        }
        let buckets = Buckets::new(&spheres, lengths);
        if let Some((i, j, depth)) = buckets.first_overlap(&spheres, lengths) {
            let allowed = OVERLAP_TOLERANCE * spheres[i].radius.min(spheres[j].radius);
            return Err(IbmError::Overlap {
                first: lines[i],
                second: lines[j],
                depth,
                allowed,
            });
        }
        let lookup = Lookup::new(&buckets, lengths, spheres.len());
        Ok(Packing {
            spheres,
            lengths,
            lookup,
        })
    }
}

impl Body for Packing {
    fn distance(&self, x: [f64; 3]) -> f64 {
        let l = self.lengths;
        self.lookup.distance([0, 1, 2].map(|d| wrap(x[d], l[d])))
    }

    fn lengths(&self) -> [f64; 3] {
        self.lengths
    }

    fn solid_fraction_exact(&self) -> Option<f64> {
        Some(self.solid_fraction())
    }
}

/// `x` wrapped into `[0, l)`.
#[inline]
fn wrap(x: f64, l: f64) -> f64 {
    let y = x - l * (x / l).floor();
    if y >= l || y < 0.0 {
        0.0
    } else {
        y
    }
}

/// Distinct wrapped indices of `b - 1, b, b + 1` on a ring of `m`.
fn neighbours(b: usize, m: usize) -> ([usize; 3], usize) {
    match m {
        1 => ([0, 0, 0], 1),
        2 => ([0, 1, 0], 2),
        _ => ([(b + m - 1) % m, b, (b + 1) % m], 3),
    }
}

/// The bucket grid of a packing: spheres filed under the bucket of their
/// wrapped centre, stored contiguously per bucket.
#[derive(Debug, Clone)]
struct Buckets {
    m: [usize; 3],
    s: [f64; 3],
    start: Vec<usize>,
    /// Wrapped centre and radius, bucket by bucket.
    items: Vec<[f64; 4]>,
    /// Index of each item's sphere.
    owner: Vec<usize>,
    rmax: f64,
}

impl Buckets {
    fn new(spheres: &[Sphere], lengths: [f64; 3]) -> Self {
        let n = spheres.len();
        let rmax = spheres.iter().map(|s| s.radius).fold(0.0, f64::max);
        let v: f64 = lengths.iter().product();
        // About one sphere per bucket in dense packings, never smaller than
        // a diameter (overlap checks then look at adjacent buckets only).
        let size = (2.0 * rmax).max((v / n.max(1) as f64).cbrt());
        let m = [0, 1, 2].map(|d| ((lengths[d] / size).floor() as usize).clamp(1, 1 << 10));
        let s = [0, 1, 2].map(|d| lengths[d] / m[d] as f64);
        let nb = m[0] * m[1] * m[2];
        let wrapped: Vec<[f64; 3]> = spheres
            .iter()
            .map(|sp| [0, 1, 2].map(|d| wrap(sp.centre[d], lengths[d])))
            .collect();
        let bucket_of = |c: &[f64; 3]| {
            let b = [0, 1, 2].map(|d| ((c[d] / s[d]) as usize).min(m[d] - 1));
            (b[0] * m[1] + b[1]) * m[2] + b[2]
        };
        let mut start = vec![0usize; nb + 1];
        for c in &wrapped {
            start[bucket_of(c) + 1] += 1;
        }
        for b in 0..nb {
            start[b + 1] += start[b];
        }
        let mut fill = start.clone();
        let mut items = vec![[0.0; 4]; n];
        let mut owner = vec![0; n];
        for (i, c) in wrapped.iter().enumerate() {
            let b = bucket_of(c);
            items[fill[b]] = [c[0], c[1], c[2], spheres[i].radius];
            owner[fill[b]] = i;
            fill[b] += 1;
        }
        Buckets {
            m,
            s,
            start,
            items,
            owner,
            rmax,
        }
    }

    fn bucket(&self, c: [f64; 3]) -> [usize; 3] {
        [0, 1, 2].map(|d| ((c[d] / self.s[d]) as usize).min(self.m[d] - 1))
    }

    /// The first pair (lowest first index, then lowest second index) that
    /// overlaps by more than the tolerance: `(i, j, depth)`.
    fn first_overlap(&self, spheres: &[Sphere], lengths: [f64; 3]) -> Option<(usize, usize, f64)> {
        let m = self.m;
        let mut pos = vec![0; spheres.len()];
        for (k, &o) in self.owner.iter().enumerate() {
            pos[o] = k;
        }
        for (i, si) in spheres.iter().enumerate() {
            let ci = self.items[pos[i]];
            let b = self.bucket([ci[0], ci[1], ci[2]]);
            let nb = [0, 1, 2].map(|d| neighbours(b[d], m[d]));
            let mut found: Option<(usize, f64)> = None;
            for &b0 in &nb[0].0[..nb[0].1] {
                for &b1 in &nb[1].0[..nb[1].1] {
                    for &b2 in &nb[2].0[..nb[2].1] {
                        let q = (b0 * m[1] + b1) * m[2] + b2;
                        for k in self.start[q]..self.start[q + 1] {
                            let j = self.owner[k];
                            if j <= i {
                                continue;
                            }
                            let cj = self.items[k];
                            let mut r2 = 0.0;
                            for d in 0..3 {
                                let dx = min_image(cj[d] - ci[d], lengths[d]);
                                r2 += dx * dx;
                            }
                            let depth = si.radius + cj[3] - r2.sqrt();
                            let allowed = OVERLAP_TOLERANCE * si.radius.min(cj[3]);
                            let earlier = match found {
                                Some((fj, _)) => j < fj,
                                None => true,
                            };
                            if depth > allowed && earlier {
                                found = Some((j, depth));
                            }
                        }
                    }
                }
            }
            if let Some((j, depth)) = found {
                return Some((i, j, depth));
            }
        }
        None
    }

    /// Visits sphere images in shells of buckets of growing Chebyshev
    /// radius around the bucket of `u` (wrapped; unwrapped bucket offsets,
    /// so every periodic image is a distinct candidate): `visit(centre,
    /// radius)` for each, then `done(bound)` after each shell, where no
    /// image outside the shells has a surface distance below `bound`.
    fn shells(
        &self,
        u: [f64; 3],
        lengths: [f64; 3],
        mut visit: impl FnMut([f64; 3], f64),
        mut done: impl FnMut(f64) -> bool,
    ) {
        let b = self.bucket(u);
        let m = self.m;
        let margin = 1e-9 * self.s[0].min(self.s[1]).min(self.s[2]);
        let mut k: i64 = 0;
        loop {
            for o0 in -k..=k {
                let (q0, s0) = self.axis_image(0, b[0], o0, lengths);
                for o1 in -k..=k {
                    let (q1, s1) = self.axis_image(1, b[1], o1, lengths);
                    let edge = o0.abs() == k || o1.abs() == k;
                    let mut o2 = -k;
                    while o2 <= k {
                        let (q2, s2) = self.axis_image(2, b[2], o2, lengths);
                        let q = (q0 * m[1] + q1) * m[2] + q2;
                        for c in &self.items[self.start[q]..self.start[q + 1]] {
                            visit([c[0] + s0, c[1] + s1, c[2] + s2], c[3]);
                        }
                        // Inside the shell only the two end layers are new.
                        o2 += if edge || o2 == k { 1 } else { 2 * k };
                    }
                }
            }
            // Any sphere centre outside the shells lies beyond the faces of
            // the (2k+1)^3 bucket cube around `b`.
            let mut reach = f64::INFINITY;
            for d in 0..3 {
                let lo = u[d] - (b[d] as f64 - k as f64) * self.s[d];
                let hi = (b[d] as f64 + k as f64 + 1.0) * self.s[d] - u[d];
                reach = reach.min(lo).min(hi);
            }
            if done(reach - self.rmax - margin) {
                return;
            }
            k += 1;
        }
    }

    /// Exact signed distance from `u` (wrapped) by a shell search.
    fn distance(&self, u: [f64; 3], lengths: [f64; 3]) -> f64 {
        if self.items.is_empty() {
            return f64::INFINITY;
        }
        let best = std::cell::Cell::new(f64::INFINITY);
        self.shells(
            u,
            lengths,
            |c, r| {
                let r2 = (u[0] - c[0]).powi(2) + (u[1] - c[1]).powi(2) + (u[2] - c[2]).powi(2);
                best.set(best.get().min(r2.sqrt() - r));
            },
            |bound| best.get() <= bound,
        );
        best.get()
    }

    /// Every sphere image whose surface is within `cutoff` of `u`
    /// (wrapped), as `[x, y, z, r]`.
    fn within(&self, u: [f64; 3], lengths: [f64; 3], cutoff: f64, out: &mut Vec<[f64; 4]>) {
        self.shells(
            u,
            lengths,
            |c, r| {
                let r2 = (u[0] - c[0]).powi(2) + (u[1] - c[1]).powi(2) + (u[2] - c[2]).powi(2);
                if r2.sqrt() - r <= cutoff {
                    out.push([c[0], c[1], c[2], r]);
                }
            },
            |bound| bound > cutoff,
        );
    }

    /// The wrapped bucket index and the image shift of bucket `b + o` along
    /// axis `d`.
    #[inline]
    fn axis_image(&self, d: usize, b: usize, o: i64, lengths: [f64; 3]) -> (usize, f64) {
        let m = self.m[d] as i64;
        let t = b as i64 + o;
        let w = t.rem_euclid(m);
        (w as usize, t.div_euclid(m) as f64 * lengths[d])
    }
}

/// The query structure of a packing: a fine bucket grid (about
/// `TARGET_BUCKETS_PER_SPHERE` = 64 buckets per sphere, about 2^22 at
/// most) holding, per bucket, every sphere image that can be the
/// nearest to some point of the bucket. With `d` the distance from the
/// bucket centre and `hd` the bucket's half-diagonal, the nearest sphere
/// of any point of the bucket has its surface within `d + 2 hd` of the
/// centre (triangle inequality twice), so those images are kept and a
/// query is one short loop.
#[derive(Debug, Clone)]
struct Lookup {
    m: [usize; 3],
    s: [f64; 3],
    start: Vec<usize>,
    cand: Vec<[f64; 4]>,
}

const TARGET_BUCKETS_PER_SPHERE: usize = 64;

impl Lookup {
    fn new(buckets: &Buckets, lengths: [f64; 3], n: usize) -> Self {
        let v: f64 = lengths.iter().product();
        let target = (TARGET_BUCKETS_PER_SPHERE * n).clamp(1, 1 << 22) as f64;
        let size = (v / target).cbrt();
        let m = [0, 1, 2].map(|d| ((lengths[d] / size).round() as usize).clamp(1, 1 << 10));
        let s = [0, 1, 2].map(|d| lengths[d] / m[d] as f64);
        let mut start = Vec::with_capacity(m[0] * m[1] * m[2] + 1);
        let mut cand = Vec::new();
        start.push(0);
        if n > 0 {
            let hd = 0.5 * (s[0] * s[0] + s[1] * s[1] + s[2] * s[2]).sqrt();
            let margin = 1e-9 * hd;
            for i in 0..m[0] {
                for j in 0..m[1] {
                    for k in 0..m[2] {
                        let c = [
                            (i as f64 + 0.5) * s[0],
                            (j as f64 + 0.5) * s[1],
                            (k as f64 + 0.5) * s[2],
                        ];
                        let d = buckets.distance(c, lengths);
                        let first = cand.len();
                        buckets.within(c, lengths, d + 2.0 * hd + margin, &mut cand);
                        // Nearest surface first: later candidates are then
                        // mostly rejected without a square root.
                        let key = |e: &[f64; 4]| {
                            ((c[0] - e[0]).powi(2) + (c[1] - e[1]).powi(2) + (c[2] - e[2]).powi(2))
                                .sqrt()
                                - e[3]
                        };
                        cand[first..].sort_by(|a, b| key(a).total_cmp(&key(b)));
                        start.push(cand.len());
                    }
                }
            }
        } else {
            start.resize(m[0] * m[1] * m[2] + 1, 0);
        }
        Lookup { m, s, start, cand }
    }

    /// Signed distance from `u` (wrapped into the box).
    #[inline]
    fn distance(&self, u: [f64; 3]) -> f64 {
        let m = self.m;
        let b = [0, 1, 2].map(|d| ((u[d] / self.s[d]) as usize).min(m[d] - 1));
        let q = (b[0] * m[1] + b[1]) * m[2] + b[2];
        let mut best = f64::INFINITY;
        for c in &self.cand[self.start[q]..self.start[q + 1]] {
            let r2 = (u[0] - c[0]).powi(2) + (u[1] - c[1]).powi(2) + (u[2] - c[2]).powi(2);
            // |x - c| - r < best only if |x - c|^2 < (best + r)^2 (best + r
            // > 0); the comparison is exact where it matters because the
            // square root is then taken and compared as usual.
            let lim = best + c[3];
            if lim > 0.0 && r2 >= lim * lim * (1.0 + 1e-12) {
                continue;
            }
            best = best.min(r2.sqrt() - c[3]);
        }
        best
    }
}

/// A cell list for the relaxation of a monodisperse random packing.
#[derive(Debug)]
struct CellList {
    m: [usize; 3],
    s: [f64; 3],
    start: Vec<usize>,
    order: Vec<usize>,
    cell: Vec<usize>,
}

impl CellList {
    fn new(lengths: [f64; 3], size: f64) -> Self {
        let m = [0, 1, 2].map(|d| ((lengths[d] / size).floor() as usize).clamp(1, 1 << 10));
        let s = [0, 1, 2].map(|d| lengths[d] / m[d] as f64);
        CellList {
            m,
            s,
            start: vec![0; m[0] * m[1] * m[2] + 1],
            order: Vec::new(),
            cell: Vec::new(),
        }
    }

    /// Files every position (wrapped) under its cell, stably by index.
    fn build(&mut self, pos: &[[f64; 3]]) {
        let m = self.m;
        self.cell.clear();
        self.cell.extend(pos.iter().map(|p| {
            let b = [0, 1, 2].map(|d| ((p[d] / self.s[d]) as usize).min(m[d] - 1));
            (b[0] * m[1] + b[1]) * m[2] + b[2]
        }));
        self.start.fill(0);
        for &c in &self.cell {
            self.start[c + 1] += 1;
        }
        for c in 0..self.start.len() - 1 {
            self.start[c + 1] += self.start[c];
        }
        let mut fill = self.start.clone();
        self.order.clear();
        self.order.resize(pos.len(), 0);
        for (i, &c) in self.cell.iter().enumerate() {
            self.order[fill[c]] = i;
            fill[c] += 1;
        }
    }

    /// One sweep: for every pair `i < j` closer than `2 r`, the overlap is
    /// recorded and (when `push`) the pair is pushed apart to `target`.
    /// Returns the largest overlap met.
    fn relax(
        &self,
        pos: &mut [[f64; 3]],
        r: f64,
        target: f64,
        lengths: [f64; 3],
        push: bool,
    ) -> f64 {
        let m = self.m;
        let contact2 = 4.0 * r * r;
        let mut worst: f64 = 0.0;
        for i in 0..pos.len() {
            let c = self.cell[i];
            let b = [c / (m[1] * m[2]), (c / m[2]) % m[1], c % m[2]];
            let nb = [0, 1, 2].map(|d| neighbours(b[d], m[d]));
            for &b0 in &nb[0].0[..nb[0].1] {
                for &b1 in &nb[1].0[..nb[1].1] {
                    for &b2 in &nb[2].0[..nb[2].1] {
                        let q = (b0 * m[1] + b1) * m[2] + b2;
                        for &j in &self.order[self.start[q]..self.start[q + 1]] {
                            if j <= i {
                                continue;
                            }
                            let mut dx = [0.0; 3];
                            let mut r2 = 0.0;
                            for d in 0..3 {
                                dx[d] = min_image(pos[j][d] - pos[i][d], lengths[d]);
                                r2 += dx[d] * dx[d];
                            }
                            if r2 >= contact2 {
                                continue;
                            }
                            let dist = r2.sqrt();
                            worst = worst.max(2.0 * r - dist);
                            if !push {
                                continue;
                            }
                            let dir = if dist > 0.0 {
                                dx.map(|v| v / dist)
                            } else {
                                coincident_direction(i, j)
                            };
                            let step = 0.5 * (target - dist);
                            for d in 0..3 {
                                pos[i][d] -= step * dir[d];
                                pos[j][d] += step * dir[d];
                            }
                        }
                    }
                }
            }
        }
        worst
    }
}

/// A unit vector chosen from the pair's indices, for coincident centres.
fn coincident_direction(i: usize, j: usize) -> [f64; 3] {
    let mut st = (i as u64) << 32 ^ j as u64;
    let v = [0; 3].map(|_| (splitmix64(&mut st) >> 11) as f64 / (1u64 << 52) as f64 - 1.0);
    let n = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    if n > 1e-3 {
        v.map(|x| x / n)
    } else {
        [1.0, 0.0, 0.0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brute force over images -2..=2 per axis.
    fn brute(p: &Packing, x: [f64; 3]) -> f64 {
        let l = p.lengths;
        let mut best = f64::INFINITY;
        for s in p.spheres() {
            for i in -2..=2 {
                for j in -2..=2 {
                    for k in -2..=2 {
                        let c = [
                            wrap(s.centre[0], l[0]) + i as f64 * l[0],
                            wrap(s.centre[1], l[1]) + j as f64 * l[1],
                            wrap(s.centre[2], l[2]) + k as f64 * l[2],
                        ];
                        let u = [0, 1, 2].map(|d| wrap(x[d], l[d]));
                        let r =
                            ((u[0] - c[0]).powi(2) + (u[1] - c[1]).powi(2) + (u[2] - c[2]).powi(2))
                                .sqrt();
                        best = best.min(r - s.radius);
                    }
                }
            }
        }
        best
    }

    #[test]
    fn bucket_distance_matches_brute_force() {
        let mut rng = Xoshiro256::new(3);
        let cases = [
            Packing::single([0.1, 0.95, 0.5], 0.3, [1.0, 1.0, 1.2]).unwrap(),
            Packing::random([1.0, 1.5, 1.0], 0.08, 0.3, 11).unwrap(),
            Packing::random([1.0; 3], 0.06, 0.05, 5).unwrap(),
            Packing::new(
                vec![
                    Sphere {
                        centre: [0.2, 0.2, 0.2],
                        radius: 0.4,
                    },
                    Sphere {
                        centre: [0.5, 0.7, 0.8],
                        radius: 0.02,
                    },
                    Sphere {
                        centre: [-0.1, 0.7, 1.3],
                        radius: 0.05,
                    },
                ],
                [1.0, 1.0, 1.0],
            )
            .unwrap(),
        ];
        for p in &cases {
            for _ in 0..400 {
                let x = [0; 3].map(|_| 3.0 * rng.uniform() - 1.0);
                let (a, b) = (p.distance(x), brute(p, x));
                assert!((a - b).abs() < 1e-14, "{a} vs {b} at {x:?}");
            }
        }
        assert_eq!(
            Packing::new(vec![], [1.0; 3]).unwrap().distance([0.3; 3]),
            f64::INFINITY
        );
    }

    #[test]
    fn parse_errors_name_lines() {
        let l = [1.0; 3];
        let e = Packing::parse("# c\n0.5 0.5 0.5 0.1\n\n0.1 0.2 x 0.1\n", l).unwrap_err();
        assert!(matches!(e, IbmError::Parse { line: 4, .. }), "{e}");
        assert!(e.to_string().contains("0.1 0.2 x 0.1"), "{e}");
        let e = Packing::parse("0.5 0.5 0.5 0.1 0.2\n", l).unwrap_err();
        assert!(e.to_string().contains("5 fields"), "{e}");
        let e = Packing::parse("0.5 0.5 0.5 inf\n", l).unwrap_err();
        assert!(matches!(e, IbmError::Parse { line: 1, .. }), "{e}");
        let e = Packing::parse("0.5 0.5 0.5 -0.1\n", l).unwrap_err();
        assert_eq!(
            e,
            IbmError::NonPositiveRadius {
                line: 1,
                radius: -0.1
            }
        );
        let e = Packing::parse("\n0.5 0.5 0.5 0.5\n", l).unwrap_err();
        assert!(matches!(e, IbmError::SphereTooLarge { line: 2, .. }), "{e}");
        // Overlap through the periodic boundary: centres 0.15 apart.
        let e = Packing::parse("0.05 0.5 0.5 0.1\n#\n0.9 0.5 0.5 0.1 # comment\n", l).unwrap_err();
        match e {
            IbmError::Overlap {
                first,
                second,
                depth,
                ..
            } => {
                assert_eq!((first, second), (1, 3));
                assert!((depth - 0.05).abs() < 1e-12, "{depth}");
            }
            other => panic!("{other}"),
        }
        // Touching is fine.
        Packing::parse("0.05 0.5 0.5 0.1\n0.85 0.5 0.5 0.1\n", l).unwrap();
    }

    #[test]
    fn random_packing_has_no_overlap_by_brute_force() {
        let l = [1.0, 1.2, 0.9];
        let r = 0.0475;
        let p = Packing::random(l, r, 0.55, 7).unwrap();
        assert!(p.len() > 1000, "{}", p.len());
        let s = p.spheres();
        let mut worst = f64::NEG_INFINITY;
        for i in 0..s.len() {
            for j in i + 1..s.len() {
                let mut r2 = 0.0;
                for d in 0..3 {
                    let dx = min_image(s[j].centre[d] - s[i].centre[d], l[d]);
                    r2 += dx * dx;
                }
                worst = worst.max(2.0 * r - r2.sqrt());
            }
        }
        assert!(worst < OVERLAP_TOLERANCE * r, "largest overlap {worst:e}");
        for sp in s {
            for d in 0..3 {
                assert!((0.0..l[d]).contains(&sp.centre[d]));
            }
        }
    }

    #[test]
    fn random_packing_reaches_055_reproducibly() {
        let l = [1.0; 3];
        let r = 0.07;
        let a = Packing::random(l, r, 0.55, 42).unwrap();
        let b = Packing::random(l, r, 0.55, 42).unwrap();
        let n = (0.55 / (4.0 / 3.0 * PI * r * r * r)).round();
        assert_eq!(a.len() as f64, n);
        assert!(
            (a.solid_fraction() - 0.55).abs() < 0.5 / n,
            "{}",
            a.solid_fraction()
        );
        for (s, t) in a.spheres().iter().zip(b.spheres()) {
            assert_eq!(s.centre.map(f64::to_bits), t.centre.map(f64::to_bits));
        }
        let c = Packing::random(l, r, 0.55, 43).unwrap();
        assert_ne!(a.spheres()[0].centre, c.spheres()[0].centre);
        // Written and read back: the same bits.
        let back = Packing::parse(&a.to_text(), l).unwrap();
        assert_eq!(back.spheres(), a.spheres());
        let path = std::env::temp_dir().join(format!("ibm-packing-{}.txt", std::process::id()));
        a.write(&path).unwrap();
        let back = Packing::read(&path, l).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back.spheres(), a.spheres());
        let e = Packing::random(l, r, 0.56, 1).unwrap_err();
        assert!(e.to_string().contains("0.56"), "{e}");
        let e = Packing::random_with(
            l,
            r,
            0.5,
            1,
            RandomOptions {
                max_sweeps: 2,
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                IbmError::NotConverged {
                    fraction: 0.5,
                    sweeps: 2,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn random_options_and_radius_are_checked() {
        let l = [1.0; 3];
        for m in [-1e-3, f64::NAN, f64::INFINITY] {
            let e = Packing::random_with(
                l,
                0.1,
                0.2,
                1,
                RandomOptions {
                    push_margin: m,
                    ..Default::default()
                },
            )
            .unwrap_err();
            assert!(matches!(e, IbmError::PushMargin { .. }), "{e}");
            assert!(e.to_string().contains(&format!("push margin {m}")), "{e}");
        }
        // The diameter must be below the box: the bound is exclusive.
        let e = Packing::random(l, 0.5, 0.2, 1).unwrap_err();
        assert_eq!(e.to_string(), "radius 0.5 outside the valid range (0, 0.5)");
    }

    #[test]
    fn write_replaces_the_file_whole() {
        let dir = std::env::temp_dir().join(format!("ibm-write-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let l = [1.0; 3];
        let a = Packing::single([0.5; 3], 0.1, l).unwrap();
        let b = Packing::single([0.25; 3], 0.2, l).unwrap();
        let path = dir.join("bed.txt");
        a.write(&path).unwrap();
        // A second name for the old file: a write that replaces the file
        // (rather than truncating and refilling it) leaves it untouched.
        let old = dir.join("old.txt");
        std::fs::hard_link(&path, &old).unwrap();
        b.write(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), b.to_text());
        assert_eq!(std::fs::read_to_string(&old).unwrap(), a.to_text());
        // A failed write names the path and leaves no temporary file.
        let bad = dir.join("missing").join("bed.txt");
        let e = b.write(&bad).unwrap_err();
        assert!(
            matches!(&e, IbmError::Io { path, .. } if path.contains("missing")),
            "{e}"
        );
        // Renaming onto a folder fails after the temporary file is written.
        let sub = dir.join("sub");
        std::fs::create_dir_all(sub.join("x")).unwrap();
        let e = b.write(&sub).unwrap_err();
        assert!(matches!(e, IbmError::Io { .. }), "{e}");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["bed.txt", "old.txt", "sub"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
