//! VTK XML image data (one `.vti` piece per rank and a `.pvti` header that
//! ParaView opens), written atomically: a file appears complete or not at all.

use anyhow::{Context, Result};
use comm::IndexBox;
use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file in the same folder and
/// a rename, so readers never see a partial file.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!(
        "{}.tmp{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write()
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The VTK extent of a box of cells: point indices `lo..=hi`.
fn extent(b: &IndexBox) -> String {
    format!(
        "{} {} {} {} {} {}",
        b.lo[0], b.hi[0], b.lo[1], b.hi[1], b.lo[2], b.hi[2]
    )
}

/// One rank's piece as `ImageData` with the values as cell data, raw
/// appended binary (little-endian f64, UInt64 header). `values` are the
/// owned cells in row-major order with the last axis fastest; VTK wants the
/// first axis fastest, so they are reordered here.
pub fn vti_piece(
    whole: &IndexBox,
    piece: &IndexBox,
    spacing: [f64; 3],
    name: &str,
    values: &[f64],
) -> Vec<u8> {
    let s = piece.shape();
    assert_eq!(values.len(), s.iter().product::<usize>());
    let mut out = Vec::with_capacity(values.len() * 8 + 1024);
    let header = format!(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"ImageData\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n\
         <ImageData WholeExtent=\"{}\" Origin=\"0 0 0\" Spacing=\"{} {} {}\">\n\
         <Piece Extent=\"{}\">\n<CellData Scalars=\"{name}\">\n\
         <DataArray type=\"Float64\" Name=\"{name}\" format=\"appended\" offset=\"0\"/>\n\
         </CellData>\n</Piece>\n</ImageData>\n<AppendedData encoding=\"raw\">\n_",
        extent(whole),
        spacing[0],
        spacing[1],
        spacing[2],
        extent(piece)
    );
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&((values.len() * 8) as u64).to_le_bytes());
    for k in 0..s[2] {
        for j in 0..s[1] {
            for i in 0..s[0] {
                out.extend_from_slice(&values[(i * s[1] + j) * s[2] + k].to_le_bytes());
            }
        }
    }
    out.extend_from_slice(b"\n</AppendedData>\n</VTKFile>\n");
    out
}

/// The parallel header listing every piece.
pub fn pvti(
    whole: &IndexBox,
    spacing: [f64; 3],
    name: &str,
    pieces: &[(IndexBox, String)],
) -> String {
    let mut s = format!(
        "<?xml version=\"1.0\"?>\n<VTKFile type=\"PImageData\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n\
         <PImageData WholeExtent=\"{}\" GhostLevel=\"0\" Origin=\"0 0 0\" Spacing=\"{} {} {}\">\n\
         <PCellData Scalars=\"{name}\">\n<PDataArray type=\"Float64\" Name=\"{name}\"/>\n</PCellData>\n",
        extent(whole),
        spacing[0],
        spacing[1],
        spacing[2]
    );
    for (b, file) in pieces {
        s.push_str(&format!(
            "<Piece Extent=\"{}\" Source=\"{file}\"/>\n",
            extent(b)
        ));
    }
    s.push_str("</PImageData>\n</VTKFile>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piece_reorders_to_first_axis_fastest() {
        let b = IndexBox {
            lo: [0, 0, 0],
            hi: [2, 1, 3],
        };
        // Row-major, last axis fastest: value = 10 i + k.
        let v: Vec<f64> = (0..2)
            .flat_map(|i| (0..3).map(move |k| (10 * i + k) as f64))
            .collect();
        let bytes = vti_piece(&b, &b, [1.0; 3], "u", &v);
        let start = bytes.windows(2).position(|w| w == b"\n_").unwrap() + 2;
        let n = u64::from_le_bytes(bytes[start..start + 8].try_into().unwrap());
        assert_eq!(n, 48);
        let vals: Vec<f64> = (0..6)
            .map(|q| {
                f64::from_le_bytes(
                    bytes[start + 8 + 8 * q..start + 16 + 8 * q]
                        .try_into()
                        .unwrap(),
                )
            })
            .collect();
        assert_eq!(vals, vec![0.0, 10.0, 1.0, 11.0, 2.0, 12.0]);
        let dir = std::env::temp_dir().join(format!("heat3d-vti-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        atomic_write(&dir.join("a.vti"), &bytes).unwrap();
        assert_eq!(std::fs::read(dir.join("a.vti")).unwrap(), bytes);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
