//! VTK XML image data: one `.vti` piece per rank and a `.pvti` header that
//! ParaView and VisIt open, with any number of named scalar or vector
//! fields on the points or the cells, as raw appended little-endian `f64`
//! (`UInt64` block headers).
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

/// One named field of a piece.
#[derive(Debug, Clone, Copy)]
pub struct Field<'a> {
    /// The name shown in ParaView.
    pub name: &'a str,
    /// 1 for a scalar, 3 for a vector.
    pub components: usize,
    /// Points or cells.
    pub association: Association,
    /// Row-major over the piece, last axis fastest, components together.
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

    /// Points or cells per axis of `piece` for this field.
    fn extent(&self, piece: &IndexBox) -> [usize; 3] {
        let s = piece.shape();
        match self.association {
            Association::Point => s.map(|x| x + 1),
            Association::Cell => s,
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

/// The VTK extent of a box of cells: point indices `lo..=hi`.
fn extent(b: &IndexBox) -> String {
    format!(
        "{} {} {} {} {} {}",
        b.lo[0], b.hi[0], b.lo[1], b.hi[1], b.lo[2], b.hi[2]
    )
}

fn triple(v: [f64; 3]) -> String {
    format!("{} {} {}", v[0], v[1], v[2])
}

/// The attribute naming the active scalar and vector of a section.
fn active(fields: &[(&str, usize)]) -> String {
    let mut s = String::new();
    if let Some((n, _)) = fields.iter().find(|f| f.1 == 1) {
        s.push_str(&format!(" Scalars=\"{n}\""));
    }
    if let Some((n, _)) = fields.iter().find(|f| f.1 == 3) {
        s.push_str(&format!(" Vectors=\"{n}\""));
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

/// The fields of one association, as (name, components), in the order given.
fn of(fields: &[Field<'_>], a: Association) -> Vec<(String, usize)> {
    fields
        .iter()
        .filter(|f| f.association == a)
        .map(|f| (f.name.to_string(), f.components))
        .collect()
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

    /// Checks `fields` against `piece` before anything is written.
    fn check(&self, piece: &IndexBox, fields: &[Field<'_>]) -> Result<(), VtkError> {
        let (w, p) = (&self.whole, piece);
        if (0..3).any(|d| p.lo[d] < w.lo[d] || p.hi[d] > w.hi[d] || p.lo[d] > p.hi[d]) {
            return Err(VtkError::Outside {
                piece: *piece,
                whole: self.whole,
            });
        }
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
            let n: usize = f.extent(piece).iter().product();
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

    /// Writes the piece after [`check`](Self::check).
    fn write_piece(
        &self,
        w: &mut dyn Write,
        piece: &IndexBox,
        fields: &[Field<'_>],
    ) -> std::io::Result<()> {
        let mut xml = format!(
            "<?xml version=\"1.0\"?>\n<VTKFile type=\"ImageData\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n\
             <ImageData WholeExtent=\"{}\" Origin=\"{}\" Spacing=\"{}\">\n<Piece Extent=\"{}\">\n",
            extent(&self.whole),
            triple(self.origin),
            triple(self.spacing),
            extent(piece)
        );
        // Point fields first, then cell fields: the order of the sections
        // and of the appended blocks.
        let mut ordered: Vec<&Field<'_>> = Vec::with_capacity(fields.len());
        let mut offset = 0u64;
        for (a, tag) in [
            (Association::Point, "PointData"),
            (Association::Cell, "CellData"),
        ] {
            let these: Vec<&Field<'_>> = fields.iter().filter(|f| f.association == a).collect();
            if these.is_empty() {
                continue;
            }
            let names: Vec<(&str, usize)> = these.iter().map(|f| (f.name, f.components)).collect();
            xml.push_str(&format!("<{tag}{}>\n", active(&names)));
            for f in &these {
                xml.push_str(&format!(
                    "<DataArray type=\"Float64\" Name=\"{}\"{} format=\"appended\" offset=\"{offset}\"/>\n",
                    f.name,
                    components_attr(f.components)
                ));
                offset += 8 + 8 * f.values.len() as u64;
            }
            xml.push_str(&format!("</{tag}>\n"));
            ordered.extend(these);
        }
        xml.push_str("</Piece>\n</ImageData>\n<AppendedData encoding=\"raw\">\n_");
        w.write_all(xml.as_bytes())?;
        for f in ordered {
            let s = f.extent(piece);
            let c = f.components;
            w.write_all(&(8 * f.values.len() as u64).to_le_bytes())?;
            for k in 0..s[2] {
                for j in 0..s[1] {
                    for i in 0..s[0] {
                        let at = ((i * s[1] + j) * s[2] + k) * c;
                        for v in &f.values[at..at + c] {
                            w.write_all(&v.to_le_bytes())?;
                        }
                    }
                }
            }
        }
        w.write_all(b"\n</AppendedData>\n</VTKFile>\n")
    }

    /// One piece as a `.vti` file's bytes.
    pub fn piece(&self, piece: &IndexBox, fields: &[Field<'_>]) -> Result<Vec<u8>, VtkError> {
        self.check(piece, fields)?;
        let values: usize = fields.iter().map(|f| f.values.len()).sum();
        let mut out = Vec::with_capacity(8 * values + 1024);
        self.write_piece(&mut out, piece, fields)
            .expect("writing to a Vec cannot fail");
        Ok(out)
    }

    /// Writes one piece to `path` atomically.
    pub fn write_piece_file(
        &self,
        path: &Path,
        piece: &IndexBox,
        fields: &[Field<'_>],
    ) -> Result<(), VtkError> {
        self.check(piece, fields)?;
        atomic_write_with(path, |w| self.write_piece(w, piece, fields))?;
        Ok(())
    }

    /// The `.pvti` header listing `pieces` (box and file name, relative to
    /// the header's folder) with the fields named as in `fields` (only the
    /// names, components and associations are used).
    pub fn header(&self, pieces: &[(IndexBox, String)], fields: &[Field<'_>]) -> String {
        let mut s = format!(
            "<?xml version=\"1.0\"?>\n<VTKFile type=\"PImageData\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n\
             <PImageData WholeExtent=\"{}\" GhostLevel=\"0\" Origin=\"{}\" Spacing=\"{}\">\n",
            extent(&self.whole),
            triple(self.origin),
            triple(self.spacing)
        );
        for (a, tag) in [
            (Association::Point, "PPointData"),
            (Association::Cell, "PCellData"),
        ] {
            let these = of(fields, a);
            if these.is_empty() {
                continue;
            }
            let names: Vec<(&str, usize)> = these.iter().map(|(n, c)| (n.as_str(), *c)).collect();
            s.push_str(&format!("<{tag}{}>\n", active(&names)));
            for (n, c) in &these {
                s.push_str(&format!(
                    "<PDataArray type=\"Float64\" Name=\"{n}\"{}/>\n",
                    components_attr(*c)
                ));
            }
            s.push_str(&format!("</{tag}>\n"));
        }
        for (b, file) in pieces {
            s.push_str(&format!(
                "<Piece Extent=\"{}\" Source=\"{file}\"/>\n",
                extent(b)
            ));
        }
        s.push_str("</PImageData>\n</VTKFile>\n");
        s
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
        let rank = comm.rank();
        let name = |r: usize| format!("{stem}_r{r:04}.vti");
        let mine = self.write_piece_file(&dir.join(name(rank)), piece, fields);
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
        let mut header = Ok(());
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
            let p = dir.join(format!("{stem}.pvti"));
            header = crate::output::atomic_write(&p, self.header(&pieces, fields).as_bytes());
            path = Some(p);
        }
        let mut ok = [u64::from(header.is_ok())];
        comm.broadcast(&mut ok, 0)?;
        header?;
        if ok[0] == 0 {
            return Err(VtkError::Peers {
                stem: stem.to_string(),
                ranks: vec![0],
            });
        }
        Ok(path)
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
        let start = bytes.windows(2).position(|w| w == b"\n_").unwrap() + 2;
        let tail = b"\n</AppendedData>\n</VTKFile>\n";
        assert!(bytes.ends_with(tail));
        let raw = &bytes[start..bytes.len() - tail.len()];
        let xml = String::from_utf8(bytes[..start - 1].to_vec()).unwrap()
            + "</AppendedData>\n</VTKFile>\n";
        let tags = tags(&xml);
        assert!(tags[0].starts_with("VTKFile type=\"ImageData\""));
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
}
