//! VTK XML output that ParaView and VisIt open: **image data** (a uniform
//! grid; [`Image`]: `.vti` pieces and a `.pvti` header) and **structured
//! grids** (curvilinear point coordinates, such as a spherical shell;
//! [`StructuredGrid`]: `.vts` pieces and a `.pvts` header), each with any
//! number of named scalar or vector fields, as raw appended little-endian
//! `f64` (`UInt64` block headers). `write_parallel` writes every rank's
//! piece and then the header, collectively.
//!
//! # Image data
//!
//! Boxes are [`IndexBox`]es of *cells*: a piece of cells `lo..hi` has the
//! VTK extent `lo..=hi` in points, so neighbouring pieces share their
//! boundary points. A cell field of a piece holds one value (or vector) per
//! cell, `(hi - lo)` per axis; a point field one per point, `(hi - lo + 1)`
//! per axis (a rank that owns cells provides the points on its upper faces
//! too, from its ghosts). Values are given row-major over the piece with
//! the last axis fastest and the components of a vector together; they are
//! reordered to VTK's first-axis-fastest order here.
//!
//! ```
//! use appkit::vtk::{Field, Image};
//! use comm::IndexBox;
//!
//! let image = Image::new([4, 2, 2], [0.5; 3]);
//! let u = vec![1.0; 16];
//! let vel = vec![0.0; 3 * 16];
//! let bytes = image
//!     .piece(&IndexBox::from_shape([4, 2, 2]), &[Field::cell_scalar("u", &u), Field::cell_vector("velocity", &vel)])
//!     .unwrap();
//! let text = String::from_utf8_lossy(&bytes);
//! assert!(text.contains(r#"<CellData Scalars="u" Vectors="velocity">"#));
//! ```
//!
//! # Structured grids
//!
//! Boxes are [`IndexBox`]es of *points*: the whole grid is the points
//! `whole.lo..whole.hi` (VTK's `WholeExtent` is `lo..=hi - 1`), and a piece
//! of points `lo..hi` gives the coordinates of each of its points (x, y, z
//! together) and its point fields, one value or vector per point. Cell
//! fields are allowed too, one value per cell of the piece: `points - 1`
//! per axis, or 1 on an axis where the piece has a single point (VTK's
//! count). The coordinates and the fields are in the grid's [`Order`]:
//! VTK's own ([`Order::FirstFastest`], point index i fastest, then j, then
//! k; written as given) or row-major ([`Order::LastFastest`], reordered
//! here).
//!
//! VTK draws the cells *between* the points of a piece, so pieces that
//! share no points leave a gap of one cell between them in ParaView (the
//! data are all there, the gap only shows). Pieces that overlap by one
//! point (a rank also gives the first points of its upper neighbour, from
//! its ghosts) close it; both are accepted, the header lists the pieces as
//! given. Likewise a periodic axis (the longitude of a spherical shell) is
//! closed only when its first points are repeated after its last.
//!
//! ```
//! use appkit::vtk::{Field, Order, StructuredGrid};
//! use comm::IndexBox;
//!
//! // A quarter annulus: 3 radii x 4 angles x 1 (a 2-D grid).
//! let grid = StructuredGrid::new([3, 4, 1], Order::FirstFastest);
//! let mut xyz = vec![];
//! let mut t = vec![];
//! for j in 0..4 {
//!     for i in 0..3 {
//!         let (r, phi) = (1.0 + 0.5 * i as f64, 0.5 * j as f64);
//!         xyz.extend([r * phi.cos(), r * phi.sin(), 0.0]);
//!         t.push(r);
//!     }
//! }
//! let bytes = grid
//!     .piece(&IndexBox::from_shape([3, 4, 1]), &xyz, &[Field::point_scalar("T", &t)])
//!     .unwrap();
//! let text = String::from_utf8_lossy(&bytes);
//! assert!(text.contains(r#"<Piece Extent="0 2 0 3 0 0">"#));
//! ```

use crate::output::{atomic_write_with, OutputError};
use comm::{CommError, CommExt, Communicator, IndexBox};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why VTK output could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VtkError {
    /// A field with another number of values than its piece needs.
    #[error("VTK field {name:?} ({association} data, {components} component(s)) on a piece of {points_or_cells} {association}s needs {expected} values, got {got}")]
    Length {
        /// The field.
        name: String,
        /// Point or cell.
        association: Association,
        /// Components per point or cell.
        components: usize,
        /// Points or cells of the piece.
        points_or_cells: usize,
        /// Values expected.
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// A field name that cannot stand in an XML attribute or is empty.
    #[error("VTK field name {name:?} is not allowed (empty, or holds a quote, <, >, & or a control character)")]
    Name {
        /// The name.
        name: String,
    },
    /// Two fields with the same name and association.
    #[error("VTK field {name:?} is given twice")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// A component count other than 1 (scalar) or 3 (vector).
    #[error("VTK field {name:?} has {components} components; allowed: 1 (scalar) or 3 (vector)")]
    Components {
        /// The field.
        name: String,
        /// Components given.
        components: usize,
    },
    /// A piece that is not inside the whole extent.
    #[error("VTK piece {piece:?} is not inside the whole extent {whole:?}")]
    Outside {
        /// The piece.
        piece: IndexBox,
        /// The whole extent.
        whole: IndexBox,
    },
    /// A structured-grid piece without points.
    #[error(
        "VTK structured-grid piece {piece:?} holds no points (it needs lo < hi on every axis)"
    )]
    Empty {
        /// The piece, in points.
        piece: IndexBox,
    },
    /// Structured-grid coordinates of another length than three per point.
    #[error("VTK structured-grid piece of {points} points needs {expected} coordinates (x, y, z per point), got {got}")]
    Points {
        /// Points of the piece.
        points: usize,
        /// Coordinates expected.
        expected: usize,
        /// Coordinates given.
        got: usize,
    },
    /// Writing a file failed.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// Other ranks could not write their pieces (each reports its own error).
    #[error("VTK output {stem:?}: rank(s) {ranks:?} could not write their part")]
    Peers {
        /// The file stem.
        stem: String,
        /// The ranks that failed.
        ranks: Vec<usize>,
    },
    /// A collective step failed.
    #[error(transparent)]
    Comm(#[from] CommError),
}

/// Where a field's values sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Association {
    /// One value per grid point (`PointData`).
    Point,
    /// One value per cell (`CellData`).
    Cell,
}

impl std::fmt::Display for Association {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Association::Point => "point",
            Association::Cell => "cell",
        })
    }
}

/// The order of a piece's values (and of a structured grid's coordinates)
/// over its points or cells `(i, j, k)`, of `(ni, nj, nk)` per axis; the
/// components of a vector are always together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Row-major, the last axis fastest: value `(i * nj + j) * nk + k`, the
    /// order of the rest of parnum (and of [`Image`]); reordered when
    /// written.
    LastFastest,
    /// VTK's order, the first axis fastest: value `(k * nj + j) * ni + i`;
    /// written as given.
    FirstFastest,
}

/// One named field of a piece.
#[derive(Debug, Clone, Copy)]
pub struct Field<'a> {
    /// The name shown in ParaView.
    pub name: &'a str,
    /// 1 for a scalar, 3 for a vector.
    pub components: usize,
    /// Points or cells.
    pub association: Association,
    /// The values over the piece, components together: row-major (last
    /// axis fastest) for an [`Image`], in the grid's [`Order`] for a
    /// [`StructuredGrid`].
    pub values: &'a [f64],
}

impl<'a> Field<'a> {
    /// A scalar per cell.
    pub fn cell_scalar(name: &'a str, values: &'a [f64]) -> Self {
        Field {
            name,
            components: 1,
            association: Association::Cell,
            values,
        }
    }

    /// A 3-vector per cell.
    pub fn cell_vector(name: &'a str, values: &'a [f64]) -> Self {
        Field {
            components: 3,
            ..Field::cell_scalar(name, values)
        }
    }

    /// A scalar per point.
    pub fn point_scalar(name: &'a str, values: &'a [f64]) -> Self {
        Field {
            association: Association::Point,
            ..Field::cell_scalar(name, values)
        }
    }

    /// A 3-vector per point.
    pub fn point_vector(name: &'a str, values: &'a [f64]) -> Self {
        Field {
            components: 3,
            ..Field::point_scalar(name, values)
        }
    }
}

/// Points and cells per axis of one piece.
#[derive(Debug, Clone, Copy)]
struct PieceShape {
    points: [usize; 3],
    cells: [usize; 3],
}

impl PieceShape {
    /// Points or cells per axis, as `a` needs.
    fn of(&self, a: Association) -> [usize; 3] {
        match a {
            Association::Point => self.points,
            Association::Cell => self.cells,
        }
    }
}

/// The geometry of a uniform grid: its whole extent in cells, its origin
/// and its spacing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Image {
    /// The whole grid, in cells.
    pub whole: IndexBox,
    /// Coordinates of point `(0, 0, 0)`.
    pub origin: [f64; 3],
    /// Point spacing per axis.
    pub spacing: [f64; 3],
}

/// The geometry of a curvilinear grid: its whole extent in points and the
/// order of its pieces' values; the coordinates come with each piece.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StructuredGrid {
    /// The whole grid, in points: point indices `lo..hi`.
    pub whole: IndexBox,
    /// The order of every piece's coordinates and field values.
    pub order: Order,
}

/// The VTK extent of a box of cells: point indices `lo..=hi`.
fn extent(b: &IndexBox) -> String {
    format!(
        "{} {} {} {} {} {}",
        b.lo[0], b.hi[0], b.lo[1], b.hi[1], b.lo[2], b.hi[2]
    )
}

/// The VTK extent of a box of points: point indices `lo..=hi - 1`.
fn point_extent(b: &IndexBox) -> String {
    extent(&IndexBox {
        lo: b.lo,
        hi: b.hi.map(|h| h.saturating_sub(1)),
    })
}

fn triple(v: [f64; 3]) -> String {
    format!("{} {} {}", v[0], v[1], v[2])
}

/// The attribute naming the active scalar and vector of a section.
fn active(fields: &[&Field<'_>]) -> String {
    let mut s = String::new();
    if let Some(f) = fields.iter().find(|f| f.components == 1) {
        s.push_str(&format!(" Scalars=\"{}\"", f.name));
    }
    if let Some(f) = fields.iter().find(|f| f.components == 3) {
        s.push_str(&format!(" Vectors=\"{}\"", f.name));
    }
    s
}

fn components_attr(c: usize) -> String {
    if c == 1 {
        String::new()
    } else {
        format!(" NumberOfComponents=\"{c}\"")
    }
}

/// The point fields, then the cell fields, each in the order given: the
/// order of the sections and of the appended blocks.
const SECTIONS: [(Association, &str); 2] = [
    (Association::Point, "PointData"),
    (Association::Cell, "CellData"),
];

/// The fields of association `a`, in the order given.
fn of<'f, 'a>(fields: &'f [Field<'a>], a: Association) -> Vec<&'f Field<'a>> {
    fields.iter().filter(|f| f.association == a).collect()
}

/// Checks that `piece` lies in `whole` (and has `lo <= hi`).
fn check_inside(piece: &IndexBox, whole: &IndexBox) -> Result<(), VtkError> {
    let (w, p) = (whole, piece);
    if (0..3).any(|d| p.lo[d] < w.lo[d] || p.hi[d] > w.hi[d] || p.lo[d] > p.hi[d]) {
        return Err(VtkError::Outside {
            piece: *piece,
            whole: *whole,
        });
    }
    Ok(())
}

/// Checks the fields' names, components and lengths on a piece of `shape`.
fn check_fields(shape: &PieceShape, fields: &[Field<'_>]) -> Result<(), VtkError> {
    for (i, f) in fields.iter().enumerate() {
        if f.name.is_empty()
            || f.name
                .chars()
                .any(|c| matches!(c, '"' | '<' | '>' | '&') || c.is_control())
        {
            return Err(VtkError::Name {
                name: f.name.to_string(),
            });
        }
        if fields[..i]
            .iter()
            .any(|g| g.name == f.name && g.association == f.association)
        {
            return Err(VtkError::Duplicate {
                name: f.name.to_string(),
            });
        }
        if f.components != 1 && f.components != 3 {
            return Err(VtkError::Components {
                name: f.name.to_string(),
                components: f.components,
            });
        }
        let n: usize = shape.of(f.association).iter().product();
        if f.values.len() != n * f.components {
            return Err(VtkError::Length {
                name: f.name.to_string(),
                association: f.association,
                components: f.components,
                points_or_cells: n,
                expected: n * f.components,
                got: f.values.len(),
            });
        }
    }
    Ok(())
}

/// The start of a file of `kind`: the XML declaration, `<VTKFile>` and
/// the opening `<{kind} {attrs}>`.
fn file_head(kind: &str, attrs: &str) -> String {
    format!(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"{kind}\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n<{kind} {attrs}>\n"
    )
}

/// One appended block: its byte count, then the values of `c` components
/// over `s` points or cells, given in `order`, in VTK's order.
fn write_block(
    w: &mut dyn Write,
    values: &[f64],
    c: usize,
    s: [usize; 3],
    order: Order,
) -> std::io::Result<()> {
    w.write_all(&(8 * values.len() as u64).to_le_bytes())?;
    match order {
        Order::FirstFastest => {
            for v in values {
                w.write_all(&v.to_le_bytes())?;
            }
        }
        Order::LastFastest => {
            for k in 0..s[2] {
                for j in 0..s[1] {
                    for i in 0..s[0] {
                        let at = ((i * s[1] + j) * s[2] + k) * c;
                        for v in &values[at..at + c] {
                            w.write_all(&v.to_le_bytes())?;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Writes a checked piece: `head` (from [`file_head`] through the
/// `<Piece>` tag), the point and cell data sections, the `<Points>` of a
/// structured grid when `points` is given, the closing tags through
/// `</{kind}>`, then the raw appended blocks in the order they are
/// declared.
fn write_piece_xml(
    w: &mut dyn Write,
    head: String,
    kind: &str,
    shape: &PieceShape,
    order: Order,
    fields: &[Field<'_>],
    points: Option<&[f64]>,
) -> std::io::Result<()> {
    let mut xml = head;
    let mut blocks: Vec<(&[f64], usize, [usize; 3])> = Vec::with_capacity(fields.len() + 1);
    let mut offset = 0u64;
    let mut declare = |xml: &mut String, name: &str, c: usize, n: usize| {
        xml.push_str(&format!(
            "<DataArray type=\"Float64\" Name=\"{name}\"{} format=\"appended\" offset=\"{offset}\"/>\n",
            components_attr(c)
        ));
        offset += 8 + 8 * n as u64;
    };
    for (a, tag) in SECTIONS {
        let these = of(fields, a);
        if these.is_empty() {
            continue;
        }
        xml.push_str(&format!("<{tag}{}>\n", active(&these)));
        for f in these {
            declare(&mut xml, f.name, f.components, f.values.len());
            blocks.push((f.values, f.components, shape.of(a)));
        }
        xml.push_str(&format!("</{tag}>\n"));
    }
    if let Some(p) = points {
        xml.push_str("<Points>\n");
        declare(&mut xml, "Points", 3, p.len());
        blocks.push((p, 3, shape.points));
        xml.push_str("</Points>\n");
    }
    xml.push_str(&format!(
        "</Piece>\n</{kind}>\n<AppendedData encoding=\"raw\">\n_"
    ));
    w.write_all(xml.as_bytes())?;
    for (values, c, s) in blocks {
        write_block(w, values, c, s, order)?;
    }
    w.write_all(b"\n</AppendedData>\n</VTKFile>\n")
}

/// A parallel header of `kind` (`PImageData`, `PStructuredGrid`) with the
/// attributes `attrs`, the fields' declarations (only names, components
/// and associations are used), `<PPoints>` when `points`, and one
/// `<Piece>` per `(box, file)` with the extent `extent` gives.
fn header_xml(
    kind: &str,
    attrs: &str,
    fields: &[Field<'_>],
    points: bool,
    pieces: &[(IndexBox, String)],
    extent: fn(&IndexBox) -> String,
) -> String {
    let mut s = file_head(kind, attrs);
    for (a, tag) in SECTIONS {
        let these = of(fields, a);
        if these.is_empty() {
            continue;
        }
        s.push_str(&format!("<P{tag}{}>\n", active(&these)));
        for f in these {
            s.push_str(&format!(
                "<PDataArray type=\"Float64\" Name=\"{}\"{}/>\n",
                f.name,
                components_attr(f.components)
            ));
        }
        s.push_str(&format!("</P{tag}>\n"));
    }
    if points {
        s.push_str(
            "<PPoints>\n<PDataArray type=\"Float64\" Name=\"Points\" NumberOfComponents=\"3\"/>\n</PPoints>\n",
        );
    }
    for (b, file) in pieces {
        s.push_str(&format!(
            "<Piece Extent=\"{}\" Source=\"{file}\"/>\n",
            extent(b)
        ));
    }
    s.push_str(&format!("</{kind}>\n</VTKFile>\n"));
    s
}

/// The collective protocol of `write_parallel`: every rank writes its
/// piece `{stem}_rNNNN.{ext}` in `dir` through `write_piece`; the
/// outcomes and the boxes are gathered; rank 0 writes the header
/// `{stem}.p{ext}` that `header` makes from every rank's (box, file name),
/// and tells everyone whether that worked. Returns the header's path on
/// rank 0 and `None` elsewhere; when any rank fails, every rank returns an
/// error (the failing rank its own). Nobody returns before every file is
/// on disk.
fn write_parallel_with(
    comm: &dyn Communicator,
    dir: &Path,
    stem: &str,
    ext: &str,
    piece: &IndexBox,
    write_piece: impl FnOnce(&Path) -> Result<(), VtkError>,
    header: impl FnOnce(&[(IndexBox, String)]) -> String,
) -> Result<Option<PathBuf>, VtkError> {
    let rank = comm.rank();
    let name = |r: usize| format!("{stem}_r{r:04}.{ext}");
    let mine = write_piece(&dir.join(name(rank)));
    let mut row = vec![u64::from(mine.is_ok())];
    row.extend(piece.lo.iter().chain(&piece.hi).map(|&x| x as u64));
    let mut all = vec![0u64; 7 * comm.size()];
    comm.allgather(&row, &mut all)?;
    mine?;
    let failed: Vec<usize> = (0..comm.size()).filter(|&r| all[7 * r] == 0).collect();
    if !failed.is_empty() {
        return Err(VtkError::Peers {
            stem: stem.to_string(),
            ranks: failed,
        });
    }
    let mut path = None;
    let mut written = Ok(());
    if rank == 0 {
        let pieces: Vec<(IndexBox, String)> = (0..comm.size())
            .map(|r| {
                let v = &all[7 * r + 1..7 * r + 7];
                let b = IndexBox {
                    lo: [v[0], v[1], v[2]].map(|x| x as usize),
                    hi: [v[3], v[4], v[5]].map(|x| x as usize),
                };
                (b, name(r))
            })
            .collect();
        let p = dir.join(format!("{stem}.p{ext}"));
        written = crate::output::atomic_write(&p, header(&pieces).as_bytes());
        path = Some(p);
    }
    let mut ok = [u64::from(written.is_ok())];
    comm.broadcast(&mut ok, 0)?;
    written?;
    if ok[0] == 0 {
        return Err(VtkError::Peers {
            stem: stem.to_string(),
            ranks: vec![0],
        });
    }
    Ok(path)
}

impl Image {
    /// The grid `0..shape` (cells) with origin 0 and `spacing`.
    pub fn new(shape: [usize; 3], spacing: [f64; 3]) -> Self {
        Image {
            whole: IndexBox::from_shape(shape),
            origin: [0.0; 3],
            spacing,
        }
    }

    /// Checks `piece` and `fields` before anything is written.
    fn check(&self, piece: &IndexBox, fields: &[Field<'_>]) -> Result<PieceShape, VtkError> {
        check_inside(piece, &self.whole)?;
        let cells = piece.shape();
        let shape = PieceShape {
            points: cells.map(|c| c + 1),
            cells,
        };
        check_fields(&shape, fields)?;
        Ok(shape)
    }

    /// Writes the piece after [`check`](Self::check).
    fn write_piece(
        &self,
        w: &mut dyn Write,
        piece: &IndexBox,
        shape: &PieceShape,
        fields: &[Field<'_>],
    ) -> std::io::Result<()> {
        let attrs = format!(
            "WholeExtent=\"{}\" Origin=\"{}\" Spacing=\"{}\"",
            extent(&self.whole),
            triple(self.origin),
            triple(self.spacing)
        );
        let head =
            file_head("ImageData", &attrs) + &format!("<Piece Extent=\"{}\">\n", extent(piece));
        write_piece_xml(
            w,
            head,
            "ImageData",
            shape,
            Order::LastFastest,
            fields,
            None,
        )
    }

    /// One piece (cells `piece`) as a `.vti` file's bytes.
    pub fn piece(&self, piece: &IndexBox, fields: &[Field<'_>]) -> Result<Vec<u8>, VtkError> {
        let shape = self.check(piece, fields)?;
        let values: usize = fields.iter().map(|f| f.values.len()).sum();
        let mut out = Vec::with_capacity(8 * values + 1024);
        self.write_piece(&mut out, piece, &shape, fields)
            .expect("writing to a Vec cannot fail");
        Ok(out)
    }

    /// Writes one piece to `path` atomically; nothing is written when the
    /// piece or a field is wrong.
    pub fn write_piece_file(
        &self,
        path: &Path,
        piece: &IndexBox,
        fields: &[Field<'_>],
    ) -> Result<(), VtkError> {
        let shape = self.check(piece, fields)?;
        atomic_write_with(path, |w| self.write_piece(w, piece, &shape, fields))?;
        Ok(())
    }

    /// The `.pvti` header listing `pieces` (box and file name, relative to
    /// the header's folder) with the fields named as in `fields` (only the
    /// names, components and associations are used).
    pub fn header(&self, pieces: &[(IndexBox, String)], fields: &[Field<'_>]) -> String {
        let attrs = format!(
            "WholeExtent=\"{}\" GhostLevel=\"0\" Origin=\"{}\" Spacing=\"{}\"",
            extent(&self.whole),
            triple(self.origin),
            triple(self.spacing)
        );
        header_xml("PImageData", &attrs, fields, false, pieces, extent)
    }

    /// Writes a distributed snapshot into `dir` (collective): every rank its
    /// piece `{stem}_rNNNN.vti` (cells `piece`, the rank's part of the
    /// fields), then rank 0 the header `{stem}.pvti`, each atomically.
    /// Returns the header's path on rank 0 and `None` elsewhere; when any
    /// rank fails, every rank returns an error (the failing rank its own).
    /// Nobody returns before every file is on disk.
    pub fn write_parallel(
        &self,
        comm: &dyn Communicator,
        dir: &Path,
        stem: &str,
        piece: &IndexBox,
        fields: &[Field<'_>],
    ) -> Result<Option<PathBuf>, VtkError> {
        write_parallel_with(
            comm,
            dir,
            stem,
            "vti",
            piece,
            |path| self.write_piece_file(path, piece, fields),
            |pieces| self.header(pieces, fields),
        )
    }
}

impl StructuredGrid {
    /// The grid of points `0..shape`, its pieces' values in `order`.
    pub fn new(shape: [usize; 3], order: Order) -> Self {
        StructuredGrid {
            whole: IndexBox::from_shape(shape),
            order,
        }
    }

    /// Checks `piece`, `points` and `fields` before anything is written.
    fn check(
        &self,
        piece: &IndexBox,
        points: &[f64],
        fields: &[Field<'_>],
    ) -> Result<PieceShape, VtkError> {
        check_inside(piece, &self.whole)?;
        let n = piece.shape();
        if n.contains(&0) {
            return Err(VtkError::Empty { piece: *piece });
        }
        let count: usize = n.iter().product();
        if points.len() != 3 * count {
            return Err(VtkError::Points {
                points: count,
                expected: 3 * count,
                got: points.len(),
            });
        }
        let shape = PieceShape {
            points: n,
            cells: n.map(|p| (p - 1).max(1)),
        };
        check_fields(&shape, fields)?;
        Ok(shape)
    }

    /// Writes the piece after [`check`](Self::check).
    fn write_piece(
        &self,
        w: &mut dyn Write,
        piece: &IndexBox,
        shape: &PieceShape,
        points: &[f64],
        fields: &[Field<'_>],
    ) -> std::io::Result<()> {
        let attrs = format!("WholeExtent=\"{}\"", point_extent(&self.whole));
        let head = file_head("StructuredGrid", &attrs)
            + &format!("<Piece Extent=\"{}\">\n", point_extent(piece));
        write_piece_xml(
            w,
            head,
            "StructuredGrid",
            shape,
            self.order,
            fields,
            Some(points),
        )
    }

    /// One piece as a `.vts` file's bytes: the points `piece` (a box of
    /// point indices inside [`whole`](Self::whole)) at the coordinates
    /// `points` (x, y, z of each point, in the grid's [`Order`]), with
    /// `fields` (point fields one value or vector per point of the piece,
    /// cell fields one per cell of it).
    pub fn piece(
        &self,
        piece: &IndexBox,
        points: &[f64],
        fields: &[Field<'_>],
    ) -> Result<Vec<u8>, VtkError> {
        let shape = self.check(piece, points, fields)?;
        let values: usize = points.len() + fields.iter().map(|f| f.values.len()).sum::<usize>();
        let mut out = Vec::with_capacity(8 * values + 1024);
        self.write_piece(&mut out, piece, &shape, points, fields)
            .expect("writing to a Vec cannot fail");
        Ok(out)
    }

    /// Writes one piece ([`piece`](Self::piece)) to `path` atomically;
    /// nothing is written when the piece, the coordinates or a field is
    /// wrong.
    pub fn write_piece_file(
        &self,
        path: &Path,
        piece: &IndexBox,
        points: &[f64],
        fields: &[Field<'_>],
    ) -> Result<(), VtkError> {
        let shape = self.check(piece, points, fields)?;
        atomic_write_with(path, |w| self.write_piece(w, piece, &shape, points, fields))?;
        Ok(())
    }

    /// The `.pvts` header listing `pieces` (box of points and file name,
    /// relative to the header's folder) with the fields named as in
    /// `fields` (only the names, components and associations are used).
    pub fn header(&self, pieces: &[(IndexBox, String)], fields: &[Field<'_>]) -> String {
        let attrs = format!(
            "WholeExtent=\"{}\" GhostLevel=\"0\"",
            point_extent(&self.whole)
        );
        header_xml(
            "PStructuredGrid",
            &attrs,
            fields,
            true,
            pieces,
            point_extent,
        )
    }

    /// Writes a distributed snapshot into `dir` (collective): every rank its
    /// piece `{stem}_rNNNN.vts` (points `piece` at the coordinates
    /// `points`, the rank's part of the fields), then rank 0 the header
    /// `{stem}.pvts`, each atomically. Returns the header's path on rank 0
    /// and `None` elsewhere; when any rank fails, every rank returns an
    /// error (the failing rank its own) and no header is written. Nobody
    /// returns before every file is on disk. Pieces may share their
    /// boundary points or not (see the [module documentation](self)).
    pub fn write_parallel(
        &self,
        comm: &dyn Communicator,
        dir: &Path,
        stem: &str,
        piece: &IndexBox,
        points: &[f64],
        fields: &[Field<'_>],
    ) -> Result<Option<PathBuf>, VtkError> {
        write_parallel_with(
            comm,
            dir,
            stem,
            "vts",
            piece,
            |path| self.write_piece_file(path, piece, points, fields),
            |pieces| self.header(pieces, fields),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::tmp;

    /// The tags of the XML part (before the raw data), checked for
    /// balance: every opened element is closed in order.
    fn tags(xml: &str) -> Vec<String> {
        let mut out = vec![];
        let mut stack: Vec<String> = vec![];
        let mut rest = xml;
        while let Some(a) = rest.find('<') {
            let b = rest[a..].find('>').expect("unterminated tag") + a;
            let tag = &rest[a + 1..b];
            rest = &rest[b + 1..];
            if tag.starts_with('?') {
                continue;
            }
            let name = tag
                .trim_start_matches('/')
                .split_whitespace()
                .next()
                .unwrap()
                .trim_end_matches('/')
                .to_string();
            if tag.starts_with('/') {
                assert_eq!(
                    stack.pop().as_deref(),
                    Some(name.as_str()),
                    "closing {name}"
                );
            } else if !tag.ends_with('/') {
                stack.push(name.clone());
            }
            out.push(tag.to_string());
        }
        assert!(stack.is_empty(), "unclosed {stack:?}");
        out
    }

    fn attr(tag: &str, key: &str) -> Option<String> {
        let k = format!(" {key}=\"");
        let a = tag.find(&k)? + k.len();
        let b = tag[a..].find('"')? + a;
        Some(tag[a..b].to_string())
    }

    /// Splits a piece into its XML (with the closing part re-attached) and
    /// its raw appended data, checks the structure and returns each
    /// DataArray's (name, components, decoded values).
    fn parse_piece(bytes: &[u8]) -> Vec<(String, usize, Vec<f64>)> {
        parse_piece_of("ImageData", bytes)
    }

    /// [`parse_piece`] for a file of type `kind`.
    fn parse_piece_of(kind: &str, bytes: &[u8]) -> Vec<(String, usize, Vec<f64>)> {
        let start = bytes.windows(2).position(|w| w == b"\n_").unwrap() + 2;
        let tail = b"\n</AppendedData>\n</VTKFile>\n";
        assert!(bytes.ends_with(tail));
        let raw = &bytes[start..bytes.len() - tail.len()];
        let xml = String::from_utf8(bytes[..start - 1].to_vec()).unwrap()
            + "</AppendedData>\n</VTKFile>\n";
        let tags = tags(&xml);
        assert!(tags[0].starts_with(&format!("VTKFile type=\"{kind}\"")));
        let mut arrays = vec![];
        let mut expected_offset = 0usize;
        for t in tags.iter().filter(|t| t.starts_with("DataArray")) {
            let offset: usize = attr(t, "offset").unwrap().parse().unwrap();
            assert_eq!(offset, expected_offset, "{t}");
            assert_eq!(attr(t, "format").as_deref(), Some("appended"));
            let n = u64::from_le_bytes(raw[offset..offset + 8].try_into().unwrap()) as usize;
            let vals = raw[offset + 8..offset + 8 + n]
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect();
            expected_offset = offset + 8 + n;
            let comps = attr(t, "NumberOfComponents").map_or(1, |c| c.parse().unwrap());
            arrays.push((attr(t, "Name").unwrap(), comps, vals));
        }
        // The raw data is exactly the declared blocks.
        assert_eq!(raw.len(), expected_offset);
        arrays
    }

    #[test]
    fn a_single_cell_scalar_is_the_classic_layout() {
        let b = IndexBox {
            lo: [0, 0, 0],
            hi: [2, 1, 3],
        };
        // Row-major, last axis fastest: value = 10 i + k.
        let v: Vec<f64> = (0..2)
            .flat_map(|i| (0..3).map(move |k| (10 * i + k) as f64))
            .collect();
        let image = Image::new([2, 1, 3], [0.5, 1.0, 0.25]);
        let bytes = image.piece(&b, &[Field::cell_scalar("u", &v)]).unwrap();
        let head = "<?xml version=\"1.0\"?>\n<VTKFile type=\"ImageData\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n\
             <ImageData WholeExtent=\"0 2 0 1 0 3\" Origin=\"0 0 0\" Spacing=\"0.5 1 0.25\">\n\
             <Piece Extent=\"0 2 0 1 0 3\">\n<CellData Scalars=\"u\">\n\
             <DataArray type=\"Float64\" Name=\"u\" format=\"appended\" offset=\"0\"/>\n\
             </CellData>\n</Piece>\n</ImageData>\n<AppendedData encoding=\"raw\">\n_";
        assert!(bytes.starts_with(head.as_bytes()));
        assert_eq!(bytes.len(), head.len() + 8 + 48 + 28);
        let arrays = parse_piece(&bytes);
        assert_eq!(arrays.len(), 1);
        // First axis fastest.
        assert_eq!(arrays[0].2, vec![0.0, 10.0, 1.0, 11.0, 2.0, 12.0]);
    }

    #[test]
    fn several_point_and_cell_fields() {
        let piece = IndexBox {
            lo: [1, 0, 2],
            hi: [3, 2, 3],
        };
        let image = Image {
            origin: [-1.0, 0.0, 0.5],
            ..Image::new([4, 2, 3], [1.0; 3])
        };
        let cells = 2 * 2;
        let points = 3 * 3 * 2;
        let rho: Vec<f64> = (0..cells).map(|x| x as f64).collect();
        let vel: Vec<f64> = (0..3 * cells).map(|x| 100.0 + x as f64).collect();
        let phi: Vec<f64> = (0..points).map(|x| -(x as f64)).collect();
        let fields = [
            Field::cell_scalar("rho", &rho),
            Field::cell_vector("velocity", &vel),
            Field::point_scalar("phi", &phi),
        ];
        let bytes = image.piece(&piece, &fields).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("<PointData Scalars=\"phi\">"), "{text}");
        assert!(text.contains("<CellData Scalars=\"rho\" Vectors=\"velocity\">"));
        assert!(text.contains("Origin=\"-1 0 0.5\""));
        let arrays = parse_piece(&bytes);
        let names: Vec<&str> = arrays.iter().map(|a| a.0.as_str()).collect();
        assert_eq!(names, ["phi", "rho", "velocity"]);
        assert_eq!(arrays[0].2.len(), points);
        assert_eq!(arrays[2].1, 3);
        // Cell (i, j, k) = (1, 0, 0) of the piece is the second value in VTK
        // order; its vector's three components stay together.
        let row_major = 2; // (i * s1 + j) * s2 + k with s = [2, 2, 1]
        assert_eq!(arrays[1].2[1], rho[row_major]);
        assert_eq!(arrays[2].2[3..6], vel[3 * row_major..3 * row_major + 3]);
        // Point (2, 0, 1) in VTK order is 2 + 3 * (0 + 3 * 1) = 11.
        let pr = 13; // (i * 3 + j) * 2 + k over the 3 x 3 x 2 points
        assert_eq!(arrays[0].2[11], phi[pr]);

        let header = image.header(&[(piece, "p_r0000.vti".into())], &fields);
        let t = tags(&header);
        assert!(t[0].starts_with("VTKFile type=\"PImageData\""));
        assert!(t.iter().any(
            |x| x == "PDataArray type=\"Float64\" Name=\"velocity\" NumberOfComponents=\"3\"/"
        ));
        assert!(t
            .iter()
            .any(|x| x == "Piece Extent=\"1 3 0 2 2 3\" Source=\"p_r0000.vti\"/"));
    }

    #[test]
    fn wrong_fields_are_errors() {
        let image = Image::new([2, 2, 2], [1.0; 3]);
        let b = IndexBox::from_shape([2, 2, 2]);
        let v = vec![0.0; 8];
        let e = image
            .piece(&b, &[Field::point_scalar("u", &v)])
            .unwrap_err();
        let m = e.to_string();
        assert!(m.contains("27 points needs 27 values, got 8"), "{m}");
        let e = image.piece(&b, &[Field::cell_vector("v", &v)]).unwrap_err();
        assert!(e.to_string().contains("needs 24 values, got 8"), "{e}");
        let bad = |f: Field<'_>| image.piece(&b, &[f]).unwrap_err();
        assert!(matches!(
            bad(Field::cell_scalar("a\"b", &v)),
            VtkError::Name { .. }
        ));
        assert!(matches!(
            bad(Field::cell_scalar("", &v)),
            VtkError::Name { .. }
        ));
        assert!(matches!(
            bad(Field {
                components: 2,
                ..Field::cell_scalar("w", &v)
            }),
            VtkError::Components { .. }
        ));
        let e = image
            .piece(
                &b,
                &[Field::cell_scalar("u", &v), Field::cell_scalar("u", &v)],
            )
            .unwrap_err();
        assert!(matches!(e, VtkError::Duplicate { .. }));
        let outside = IndexBox {
            lo: [1, 1, 1],
            hi: [3, 2, 2],
        };
        assert!(matches!(
            image.piece(&outside, &[Field::cell_scalar("u", &[0.0; 2])]),
            Err(VtkError::Outside { .. })
        ));
    }

    #[test]
    fn parallel_snapshot_has_every_piece_and_the_header() {
        let dir = tmp("vtk-par");
        let shape = [6, 4, 2];
        let image = Image::new(shape, [1.0; 3]);
        let paths = comm::local::run(3, |c| {
            let r = c.rank();
            let piece = IndexBox {
                lo: [2 * r, 0, 0],
                hi: [2 * r + 2, 4, 2],
            };
            let v: Vec<f64> = (0..16).map(|x| (100 * r + x) as f64).collect();
            image
                .write_parallel(
                    c,
                    &dir,
                    "snap_000003",
                    &piece,
                    &[Field::cell_scalar("u", &v)],
                )
                .map_err(|e| e.to_string())
        })
        .unwrap();
        assert_eq!(
            paths[0].as_deref(),
            Some(dir.join("snap_000003.pvti").as_path())
        );
        assert!(paths[1].is_none() && paths[2].is_none());
        let header = std::fs::read_to_string(dir.join("snap_000003.pvti")).unwrap();
        let pieces: Vec<String> = tags(&header)
            .into_iter()
            .filter(|t| t.starts_with("Piece"))
            .collect();
        assert_eq!(pieces.len(), 3);
        let mut total = 0;
        for (r, t) in pieces.iter().enumerate() {
            let file = attr(t, "Source").unwrap();
            assert_eq!(file, format!("snap_000003_r{r:04}.vti"));
            let arrays = parse_piece(&std::fs::read(dir.join(&file)).unwrap());
            total += arrays[0].2.len();
            assert_eq!(arrays[0].2[0], (100 * r) as f64);
        }
        assert_eq!(total, 6 * 4 * 2);
        // A rank whose piece is wrong fails, and so does every other rank.
        let errs = comm::local::run(2, |c| {
            let n = if c.rank() == 1 { 5 } else { 24 };
            let piece = IndexBox {
                lo: [3 * c.rank(), 0, 0],
                hi: [3 * c.rank() + 3, 4, 2],
            };
            Ok::<_, String>(
                image
                    .write_parallel(
                        c,
                        &dir,
                        "bad",
                        &piece,
                        &[Field::cell_scalar("u", &vec![0.0; n])],
                    )
                    .unwrap_err()
                    .to_string(),
            )
        })
        .unwrap();
        assert!(errs[0].contains("rank(s) [1]"), "{}", errs[0]);
        assert!(errs[1].contains("needs 24 values, got 5"), "{}", errs[1]);
        assert!(!dir.join("bad.pvti").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The XML tags of a piece file (before its raw data).
    fn piece_tags(bytes: &[u8]) -> Vec<String> {
        let start = bytes.windows(2).position(|w| w == b"\n_").unwrap() + 2;
        tags(
            &(String::from_utf8(bytes[..start - 1].to_vec()).unwrap()
                + "</AppendedData>\n</VTKFile>\n"),
        )
    }

    /// A point of a spherical shell: radius index i, colatitude index j,
    /// longitude index k.
    fn shell(i: usize, j: usize, k: usize) -> [f64; 3] {
        let r = 0.35 + 0.2 * i as f64;
        let theta = 0.1 + 0.5 * j as f64;
        let phi = 0.7 * k as f64;
        [
            r * theta.sin() * phi.cos(),
            r * theta.sin() * phi.sin(),
            r * theta.cos(),
        ]
    }

    /// Coordinates and a point scalar (`100 i + 10 j + k`, global indices)
    /// of the points `b`, in `order`.
    fn shell_piece(b: &IndexBox, order: Order) -> (Vec<f64>, Vec<f64>) {
        let (mut xyz, mut t) = (vec![], vec![]);
        let mut push = |i, j, k| {
            xyz.extend(shell(i, j, k));
            t.push((100 * i + 10 * j + k) as f64);
        };
        match order {
            Order::FirstFastest => {
                for k in b.lo[2]..b.hi[2] {
                    for j in b.lo[1]..b.hi[1] {
                        for i in b.lo[0]..b.hi[0] {
                            push(i, j, k);
                        }
                    }
                }
            }
            Order::LastFastest => {
                for i in b.lo[0]..b.hi[0] {
                    for j in b.lo[1]..b.hi[1] {
                        for k in b.lo[2]..b.hi[2] {
                            push(i, j, k);
                        }
                    }
                }
            }
        }
        (xyz, t)
    }

    #[test]
    fn a_structured_piece_declares_its_extents_and_its_points() {
        let grid = StructuredGrid::new([4, 3, 2], Order::FirstFastest);
        let piece = IndexBox {
            lo: [1, 0, 0],
            hi: [4, 3, 2],
        };
        let (xyz, t) = shell_piece(&piece, Order::FirstFastest);
        let b: Vec<f64> = (0..3 * 18).map(|x| 0.25 * x as f64).collect();
        let c: Vec<f64> = (0..4).map(|x| -(x as f64)).collect(); // 2 x 2 x 1 cells
        let fields = [
            Field::point_scalar("T", &t),
            Field::cell_scalar("c", &c),
            Field::point_vector("B", &b),
        ];
        let bytes = grid.piece(&piece, &xyz, &fields).unwrap();
        let tags = piece_tags(&bytes);
        assert_eq!(tags[1], "StructuredGrid WholeExtent=\"0 3 0 2 0 1\"");
        assert_eq!(tags[2], "Piece Extent=\"1 3 0 2 0 1\"");
        assert!(tags
            .iter()
            .any(|t| t == "PointData Scalars=\"T\" Vectors=\"B\""));
        let points_at = tags.iter().position(|t| t == "Points").unwrap();
        let p = &tags[points_at + 1];
        assert!(
            p.starts_with("DataArray type=\"Float64\" Name=\"Points\""),
            "{p}"
        );
        assert_eq!(attr(p, "NumberOfComponents").as_deref(), Some("3"));
        assert_eq!(tags[points_at + 2], "/Points");
        let b_tag = tags.iter().find(|t| t.contains("Name=\"B\"")).unwrap();
        assert_eq!(attr(b_tag, "NumberOfComponents").as_deref(), Some("3"));
        let t_tag = tags.iter().find(|t| t.contains("Name=\"T\"")).unwrap();
        assert_eq!(attr(t_tag, "NumberOfComponents"), None);

        let arrays = parse_piece_of("StructuredGrid", &bytes);
        let names: Vec<&str> = arrays.iter().map(|a| a.0.as_str()).collect();
        assert_eq!(names, ["T", "B", "c", "Points"]);
        // Given in VTK's order, written as given, bit for bit.
        assert_eq!(arrays[3].2, xyz);
        assert_eq!(arrays[1].2, b);
        assert_eq!(arrays[2].2, c);
        // Point (i, j, k) = (2, 1, 1) of the whole grid is point
        // (1, 1, 1) of the piece: 1 + 3 * (1 + 3 * 1) = 13 in VTK order.
        assert_eq!(arrays[3].2[3 * 13..3 * 13 + 3], shell(2, 1, 1));
        assert_eq!(arrays[0].2[13], 211.0);
    }

    #[test]
    fn row_major_pieces_are_reordered() {
        let shape = [3, 4, 2];
        let piece = IndexBox::from_shape(shape);
        let (xyz, t) = shell_piece(&piece, Order::LastFastest);
        let (vtk_xyz, vtk_t) = shell_piece(&piece, Order::FirstFastest);
        assert_ne!(xyz, vtk_xyz);
        // 2 x 3 x 1 cells, row-major: value = 10 i + j.
        let c: Vec<f64> = (0..2)
            .flat_map(|i| (0..3).map(move |j| (10 * i + j) as f64))
            .collect();
        let grid = StructuredGrid::new(shape, Order::LastFastest);
        let bytes = grid
            .piece(
                &piece,
                &xyz,
                &[Field::point_scalar("T", &t), Field::cell_scalar("c", &c)],
            )
            .unwrap();
        let arrays = parse_piece_of("StructuredGrid", &bytes);
        assert_eq!(arrays[0].2, vtk_t);
        assert_eq!(arrays[1].2, [0.0, 10.0, 1.0, 11.0, 2.0, 12.0]);
        assert_eq!(arrays[2].2, vtk_xyz);
    }

    #[test]
    fn a_flat_structured_piece_has_one_cell_across() {
        // One point along k: VTK counts one cell across that axis.
        let grid = StructuredGrid::new([3, 2, 1], Order::FirstFastest);
        let b = IndexBox::from_shape([3, 2, 1]);
        let xyz = vec![0.0; 18];
        let bytes = grid
            .piece(&b, &xyz, &[Field::cell_scalar("c", &[1.0, 2.0])])
            .unwrap();
        assert!(piece_tags(&bytes).contains(&"Piece Extent=\"0 2 0 1 0 0\"".to_string()));
        let e = grid
            .piece(&b, &xyz, &[Field::cell_scalar("c", &[1.0; 6])])
            .unwrap_err();
        assert!(
            e.to_string().contains("2 cells needs 2 values, got 6"),
            "{e}"
        );
    }

    #[test]
    fn wrong_structured_pieces_are_errors_and_write_nothing() {
        let dir = tmp("vts-bad");
        let grid = StructuredGrid::new([4, 3, 2], Order::FirstFastest);
        let b = IndexBox::from_shape([4, 3, 2]);
        let (xyz, t) = shell_piece(&b, Order::FirstFastest);
        let path = dir.join("p.vts");
        let short = &t[..23];
        let e = grid
            .write_piece_file(
                &path,
                &b,
                &xyz,
                &[
                    Field::point_scalar("T", &t),
                    Field::point_vector("B_r", short),
                ],
            )
            .unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("\"B_r\"") && m.contains("needs 72 values, got 23"),
            "{m}"
        );
        let e = grid
            .write_piece_file(&path, &b, &xyz[1..], &[])
            .unwrap_err();
        assert!(
            e.to_string().contains("24 points needs 72 coordinates")
                && e.to_string().contains("got 71"),
            "{e}"
        );
        let empty = IndexBox {
            lo: [1, 0, 0],
            hi: [1, 3, 2],
        };
        assert!(matches!(
            grid.write_piece_file(&path, &empty, &[], &[]),
            Err(VtkError::Empty { .. })
        ));
        let outside = IndexBox {
            lo: [2, 0, 0],
            hi: [5, 3, 2],
        };
        assert!(matches!(
            grid.write_piece_file(&path, &outside, &xyz[..54], &[]),
            Err(VtkError::Outside { .. })
        ));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        // In parallel: the rank with the wrong field fails with its error,
        // the others name it, and no header appears.
        let errs = comm::local::run(2, |c| {
            let piece = IndexBox {
                lo: [2 * c.rank(), 0, 0],
                hi: [2 * c.rank() + 2, 3, 2],
            };
            let (xyz, t) = shell_piece(&piece, Order::FirstFastest);
            let t = if c.rank() == 1 { &t[..5] } else { &t[..] };
            Ok::<_, String>(
                grid.write_parallel(c, &dir, "bad", &piece, &xyz, &[Field::point_scalar("T", t)])
                    .unwrap_err()
                    .to_string(),
            )
        })
        .unwrap();
        assert!(errs[0].contains("rank(s) [1]"), "{}", errs[0]);
        assert!(
            errs[1].contains("\"T\"") && errs[1].contains("got 5"),
            "{}",
            errs[1]
        );
        assert!(!dir.join("bad.pvts").exists());
        assert!(!dir.join("bad_r0001.vts").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_parallel_shell_has_every_piece_in_its_header() {
        // A shell of 4 radii x 6 colatitudes x 3 longitudes on 4 ranks,
        // split 2 x 2 in radius and colatitude; without and with one
        // point of overlap.
        let dir = tmp("vts-par");
        let grid = StructuredGrid::new([4, 6, 3], Order::FirstFastest);
        for overlap in [0, 1] {
            let stem = format!("shell_{overlap}");
            let boxes: Vec<IndexBox> = (0..4)
                .map(|r| {
                    let (a, b) = (r / 2, r % 2);
                    IndexBox {
                        lo: [2 * a, 3 * b, 0],
                        hi: [
                            (2 * a + 2 + overlap).min(4),
                            (3 * b + 3 + overlap).min(6),
                            3,
                        ],
                    }
                })
                .collect();
            let paths = comm::local::run(4, |c| {
                let piece = boxes[c.rank()];
                let (xyz, t) = shell_piece(&piece, Order::FirstFastest);
                grid.write_parallel(
                    c,
                    &dir,
                    &stem,
                    &piece,
                    &xyz,
                    &[Field::point_scalar("T", &t)],
                )
                .map_err(|e| e.to_string())
            })
            .unwrap();
            let header_path = dir.join(format!("{stem}.pvts"));
            assert_eq!(paths[0].as_deref(), Some(header_path.as_path()));
            assert!(paths[1..].iter().all(|p| p.is_none()));
            let header = std::fs::read_to_string(&header_path).unwrap();
            let t = tags(&header);
            assert!(t[0].starts_with("VTKFile type=\"PStructuredGrid\""));
            assert_eq!(
                t[1],
                "PStructuredGrid WholeExtent=\"0 3 0 5 0 2\" GhostLevel=\"0\""
            );
            assert!(t
                .iter()
                .any(|x| x == "PDataArray type=\"Float64\" Name=\"T\"/"));
            let pp = t.iter().position(|x| x == "PPoints").unwrap();
            assert_eq!(
                t[pp + 1],
                "PDataArray type=\"Float64\" Name=\"Points\" NumberOfComponents=\"3\"/"
            );
            let pieces: Vec<&String> = t.iter().filter(|x| x.starts_with("Piece")).collect();
            assert_eq!(pieces.len(), 4);
            let mut points = 0;
            for (r, p) in pieces.iter().enumerate() {
                let b = boxes[r];
                let ext = format!(
                    "{} {} {} {} {} {}",
                    b.lo[0],
                    b.hi[0] - 1,
                    b.lo[1],
                    b.hi[1] - 1,
                    b.lo[2],
                    b.hi[2] - 1
                );
                assert_eq!(attr(p, "Extent"), Some(ext.clone()));
                let file = attr(p, "Source").unwrap();
                assert_eq!(file, format!("{stem}_r{r:04}.vts"));
                let bytes = std::fs::read(dir.join(&file)).unwrap();
                assert_eq!(piece_tags(&bytes)[2], format!("Piece Extent=\"{ext}\""));
                let arrays = parse_piece_of("StructuredGrid", &bytes);
                let (xyz, _) = shell_piece(&b, Order::FirstFastest);
                assert_eq!(arrays[1].2, xyz);
                points += arrays[0].2.len();
            }
            if overlap == 0 {
                assert_eq!(points, 4 * 6 * 3);
            } else {
                assert!(points > 4 * 6 * 3);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
