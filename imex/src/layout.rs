//! Which (l, m) modes a rank holds, and the packed per-degree data blocks.

use std::fmt;
use std::sync::Arc;

use num_complex::Complex64;

use crate::ImexError;

#[derive(Debug, PartialEq, Eq)]
struct Degree {
    l: usize,
    ms: Vec<usize>,
    offset: usize,
}

#[derive(Debug, PartialEq, Eq)]
struct Inner {
    nr: usize,
    degrees: Vec<Degree>,
    len: usize,
}

/// The (l, m) modes one rank holds, in any distribution: a list of degrees `l`, each with the
/// strictly increasing orders `m <= l` the rank holds for it, and the number of radial points
/// `nr`. Cheap to clone (shared).
///
/// # Data layout
///
/// A [`ModeBlock`] stores, for each held degree in the order given here, one `nr x 2 nm`
/// column-major block (`nm` = number of orders held for that degree):
///
/// ```text
/// columns 0 .. nm       Re u_{l, m_0}, Re u_{l, m_1}, ..., Re u_{l, m_{nm-1}}
/// columns nm .. 2 nm    Im u_{l, m_0}, Im u_{l, m_1}, ..., Im u_{l, m_{nm-1}}
/// ```
///
/// each column holding the `nr` radial values contiguously. This is the packing of the MagIC
/// paper (its Eq. 18), so all right-hand sides of one degree are solved in one call reading
/// contiguous columns.
#[derive(Clone, PartialEq, Eq)]
pub struct ModeLayout {
    inner: Arc<Inner>,
}

impl fmt::Debug for ModeLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary())
    }
}

impl ModeLayout {
    /// A layout of `nr` radial points and the given degrees with their orders.
    ///
    /// Fails on `nr == 0`, a repeated degree, an order `m > l`, or orders of one degree that do
    /// not strictly increase. A degree with no orders is allowed (it holds no data).
    pub fn new<I, M>(nr: usize, degrees: I) -> Result<Self, ImexError>
    where
        I: IntoIterator<Item = (usize, M)>,
        M: IntoIterator<Item = usize>,
    {
        if nr == 0 {
            return Err(ImexError::InvalidRadialSize { got: nr });
        }
        let mut out: Vec<Degree> = Vec::new();
        let mut offset = 0;
        for (l, ms) in degrees {
            if out.iter().any(|d| d.l == l) {
                return Err(ImexError::DuplicateDegree { l, what: "layout" });
            }
            let ms: Vec<usize> = ms.into_iter().collect();
            for (k, &m) in ms.iter().enumerate() {
                if m > l {
                    return Err(ImexError::InvalidOrder { l, m });
                }
                if k > 0 && ms[k - 1] >= m {
                    return Err(ImexError::UnsortedOrders {
                        l,
                        previous: ms[k - 1],
                        got: m,
                    });
                }
            }
            let size = nr * 2 * ms.len();
            out.push(Degree { l, ms, offset });
            offset += size;
        }
        Ok(Self {
            inner: Arc::new(Inner {
                nr,
                degrees: out,
                len: offset,
            }),
        })
    }

    /// Every mode of degrees `0..=lmax`, all orders `0..=l` (a single rank holding everything).
    pub fn full(nr: usize, lmax: usize) -> Result<Self, ImexError> {
        Self::new(nr, (0..=lmax).map(|l| (l, 0..=l)))
    }

    /// Number of radial points.
    pub fn nr(&self) -> usize {
        self.inner.nr
    }

    /// Number of held degrees.
    pub fn num_degrees(&self) -> usize {
        self.inner.degrees.len()
    }

    /// The held degrees with their orders, in storage order.
    pub fn degrees(&self) -> impl ExactSizeIterator<Item = (usize, &[usize])> + '_ {
        self.inner.degrees.iter().map(|d| (d.l, d.ms.as_slice()))
    }

    /// Degree `l` and its orders at storage position `index`.
    pub fn degree(&self, index: usize) -> Option<(usize, &[usize])> {
        self.inner
            .degrees
            .get(index)
            .map(|d| (d.l, d.ms.as_slice()))
    }

    /// Storage position of degree `l`.
    pub fn index_of(&self, l: usize) -> Option<usize> {
        self.inner.degrees.iter().position(|d| d.l == l)
    }

    /// The orders held for degree `l`.
    pub fn orders(&self, l: usize) -> Option<&[usize]> {
        self.index_of(l)
            .map(|i| self.inner.degrees[i].ms.as_slice())
    }

    /// Number of columns (`2 nm`) of the block at storage position `index`.
    pub fn columns(&self, index: usize) -> usize {
        self.inner.degrees.get(index).map_or(0, |d| 2 * d.ms.len())
    }

    /// Total number of real values of a [`ModeBlock`] of this layout.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether a block of this layout holds no values.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// Range of the values of the block at storage position `index`.
    pub fn block_range(&self, index: usize) -> std::ops::Range<usize> {
        match self.inner.degrees.get(index) {
            Some(d) => d.offset..d.offset + self.inner.nr * 2 * d.ms.len(),
            None => 0..0,
        }
    }

    /// Column of `Re u_{l,m}` in its degree's block, and the degree's storage position.
    fn locate(&self, l: usize, m: usize) -> Option<(usize, usize)> {
        let index = self.index_of(l)?;
        let k = self.inner.degrees[index].ms.binary_search(&m).ok()?;
        Some((index, k))
    }

    /// A short description, for error messages.
    pub(crate) fn summary(&self) -> String {
        let ls: Vec<String> = self
            .inner
            .degrees
            .iter()
            .map(|d| format!("{}:{}", d.l, d.ms.len()))
            .collect();
        format!(
            "nr = {}, {} degrees (l:orders) [{}]",
            self.inner.nr,
            self.inner.degrees.len(),
            ls.join(" ")
        )
    }
}

/// Values of every held mode: one packed `nr x 2 nm` column-major block per degree (see
/// [`ModeLayout`] for the layout). Used for the state `u` and for the explicit terms `N`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModeBlock {
    layout: ModeLayout,
    data: Vec<f64>,
}

impl ModeBlock {
    /// All zeros.
    pub fn zeros(layout: &ModeLayout) -> Self {
        Self {
            layout: layout.clone(),
            data: vec![0.0; layout.len()],
        }
    }

    /// Wraps existing packed data; fails unless `data.len() == layout.len()`.
    pub fn from_vec(layout: &ModeLayout, data: Vec<f64>) -> Result<Self, ImexError> {
        if data.len() != layout.len() {
            return Err(ImexError::LengthMismatch {
                what: "mode block data",
                expected: layout.len(),
                got: data.len(),
            });
        }
        Ok(Self {
            layout: layout.clone(),
            data,
        })
    }

    /// The layout.
    pub fn layout(&self) -> &ModeLayout {
        &self.layout
    }

    /// All values, block after block.
    pub fn as_slice(&self) -> &[f64] {
        &self.data
    }

    /// All values, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [f64] {
        &mut self.data
    }

    /// Sets every value to `value`.
    pub fn fill(&mut self, value: f64) {
        self.data.fill(value);
    }

    /// The `nr x 2 nm` block of degree `l`.
    pub fn block(&self, l: usize) -> Option<&[f64]> {
        let i = self.layout.index_of(l)?;
        Some(&self.data[self.layout.block_range(i)])
    }

    /// The `nr x 2 nm` block of degree `l`, mutable.
    pub fn block_mut(&mut self, l: usize) -> Option<&mut [f64]> {
        let i = self.layout.index_of(l)?;
        let r = self.layout.block_range(i);
        Some(&mut self.data[r])
    }

    /// Every block with its degree and orders, in storage order.
    pub fn blocks(&self) -> impl Iterator<Item = (usize, &[usize], &[f64])> + '_ {
        self.layout
            .degrees()
            .enumerate()
            .map(move |(i, (l, ms))| (l, ms, &self.data[self.layout.block_range(i)]))
    }

    /// Every block with its degree and orders, mutable.
    pub fn blocks_mut(&mut self) -> impl Iterator<Item = (usize, &[usize], &mut [f64])> + '_ {
        let layout = &self.layout;
        let mut rest: &mut [f64] = &mut self.data;
        layout.degrees().enumerate().map(move |(i, (l, ms))| {
            let n = layout.block_range(i).len();
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
            rest = tail;
            (l, ms, head)
        })
    }

    /// The real and imaginary radial columns of mode (l, m).
    pub fn mode(&self, l: usize, m: usize) -> Option<(&[f64], &[f64])> {
        let (i, k) = self.layout.locate(l, m)?;
        let nr = self.layout.nr();
        let nm = self.layout.columns(i) / 2;
        let block = &self.data[self.layout.block_range(i)];
        Some((
            &block[k * nr..(k + 1) * nr],
            &block[(nm + k) * nr..(nm + k + 1) * nr],
        ))
    }

    /// The real and imaginary radial columns of mode (l, m), mutable.
    pub fn mode_mut(&mut self, l: usize, m: usize) -> Option<(&mut [f64], &mut [f64])> {
        let (i, k) = self.layout.locate(l, m)?;
        let nr = self.layout.nr();
        let nm = self.layout.columns(i) / 2;
        let r = self.layout.block_range(i);
        let block = &mut self.data[r];
        let (re_part, im_part) = block.split_at_mut(nm * nr);
        Some((
            &mut re_part[k * nr..(k + 1) * nr],
            &mut im_part[k * nr..(k + 1) * nr],
        ))
    }

    /// Mode (l, m) as complex radial values.
    pub fn mode_complex(&self, l: usize, m: usize) -> Option<Vec<Complex64>> {
        let (re, im) = self.mode(l, m)?;
        Some(
            re.iter()
                .zip(im)
                .map(|(&a, &b)| Complex64::new(a, b))
                .collect(),
        )
    }

    /// Sets mode (l, m) from `nr` complex radial values.
    pub fn set_mode(&mut self, l: usize, m: usize, values: &[Complex64]) -> Result<(), ImexError> {
        let nr = self.layout.nr();
        if values.len() != nr {
            return Err(ImexError::LengthMismatch {
                what: "complex radial values of one mode",
                expected: nr,
                got: values.len(),
            });
        }
        let (re, im) = self.mode_mut(l, m).ok_or(ImexError::ModeNotHeld { l, m })?;
        for ((a, b), v) in re.iter_mut().zip(im.iter_mut()).zip(values) {
            *a = v.re;
            *b = v.im;
        }
        Ok(())
    }
}
