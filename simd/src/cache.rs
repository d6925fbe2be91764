//! The CPU's data caches as Linux reports them
//! (`/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}`), read
//! once. Kernels that block for a cache level size their tiles from these.

/// The data and unified caches of CPU 0, `(level, bytes)` in the order
/// Linux lists them; empty where sysfs cannot be read (another OS, a
/// container without it).
pub fn levels() -> &'static [(u32, usize)] {
    static LEVELS: std::sync::OnceLock<Vec<(u32, usize)>> = std::sync::OnceLock::new();
    LEVELS.get_or_init(read)
}

/// The bytes of the data (or unified) cache of `level`, if Linux reports one.
pub fn size(level: u32) -> Option<usize> {
    levels().iter().find(|&&(l, _)| l == level).map(|&(_, b)| b)
}

/// The bytes of the last-level cache (the highest level reported).
pub fn last_level() -> Option<usize> {
    levels().iter().max_by_key(|&&(l, _)| l).map(|&(_, b)| b)
}

fn read() -> Vec<(u32, usize)> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        let (Ok(level), Some(bytes)) = (level.trim().parse::<u32>(), parse_size(size.trim()))
        else {
            continue;
        };
        if kind.trim() != "Instruction" && bytes > 0 {
            out.push((level, bytes));
        }
    }
    out.sort_unstable();
    out
}

/// `32768K`, `1M`, `2G` or a number of bytes.
fn parse_size(s: &str) -> Option<usize> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let n: usize = digits.parse().ok()?;
    let shift = match unit {
        "" => 0,
        "K" | "k" => 10,
        "M" => 20,
        "G" => 30,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("12Q"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn levels_are_what_sysfs_lists() {
        let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
        let l = levels();
        if !dir.exists() {
            assert!(l.is_empty() && last_level().is_none());
            return;
        }
        // Count the data and unified entries of sysfs independently.
        let listed = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read_to_string(e.path().join("type"))
                    .is_ok_and(|t| t.trim() != "Instruction")
            })
            .count();
        assert_eq!(l.len(), listed);
        for &(level, bytes) in l {
            assert!(
                (1..=4).contains(&level) && bytes >= 1024,
                "level {level}: {bytes} bytes"
            );
            assert!(size(level).is_some());
        }
        let top = l.iter().map(|x| x.0).max();
        assert_eq!(last_level().is_some(), top.is_some());
        assert!(l.contains(&(top.unwrap_or(0), last_level().unwrap_or(0))) || l.is_empty());
    }
}
