//! `cargo xtask msrv`: every workspace crate declares a `rust-version` at
//! least as new as the newest one declared by the crates it builds with
//! (its normal and build dependencies, transitively, workspace crates
//! included), read from `cargo metadata` with the lock file as it is.
//!
//! Only the toolchain of this machine can be installed here, so the
//! declared versions cannot be checked by building with each of them; this
//! check and clippy's `incompatible_msrv` lint (standard-library items newer
//! than the declared version, part of `cargo clippy` in CI) are what stands
//! in for that build.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};

/// A `rust-version` as numbers (`1.89` is `[1, 89, 0]`).
fn version(v: &str) -> Option<[u64; 3]> {
    let mut out = [0u64; 3];
    for (i, part) in v.split('.').enumerate() {
        *out.get_mut(i)? = part.parse().ok()?;
    }
    Some(out)
}

/// For each workspace crate: its declared version and the newest version
/// its build needs, with the crate that needs it.
type Findings = BTreeMap<String, (Option<[u64; 3]>, Option<([u64; 3], String)>)>;

fn findings(meta: &Value) -> Result<Findings> {
    let packages = meta["packages"].as_array().context("no packages")?;
    let by_id: HashMap<&str, &Value> = packages
        .iter()
        .filter_map(|p| Some((p["id"].as_str()?, p)))
        .collect();
    let nodes: HashMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .context("no resolve graph")?
        .iter()
        .filter_map(|n| Some((n["id"].as_str()?, n)))
        .collect();
    let mut out = Findings::new();
    for member in meta["workspace_members"].as_array().context("no members")? {
        let id = member.as_str().context("member id")?;
        let pkg = by_id[id];
        let mut seen = HashSet::new();
        let mut stack = vec![id];
        let mut need: Option<([u64; 3], String)> = None;
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            if x != id {
                let p = by_id[x];
                if let Some(v) = p["rust_version"].as_str().and_then(version) {
                    if need.as_ref().is_none_or(|(n, _)| v > *n) {
                        let name = format!(
                            "{} {}",
                            p["name"].as_str().unwrap_or("?"),
                            p["version"].as_str().unwrap_or("?")
                        );
                        need = Some((v, name));
                    }
                }
            }
            for d in nodes[x]["deps"].as_array().into_iter().flatten() {
                let dev_only = d["dep_kinds"]
                    .as_array()
                    .is_some_and(|k| k.iter().all(|k| k["kind"] == "dev"));
                if !dev_only {
                    if let Some(p) = d["pkg"].as_str() {
                        stack.push(p);
                    }
                }
            }
        }
        let declared = pkg["rust_version"].as_str().and_then(version);
        out.insert(
            pkg["name"].as_str().unwrap_or("?").to_string(),
            (declared, need),
        );
    }
    Ok(out)
}

fn show(v: [u64; 3]) -> String {
    if v[2] == 0 {
        format!("{}.{}", v[0], v[1])
    } else {
        format!("{}.{}.{}", v[0], v[1], v[2])
    }
}

/// Runs the check; an error lists every crate that declares too old a
/// version (or none).
pub fn run() -> Result<()> {
    let out = crate::util::cargo()
        .args(["metadata", "--format-version", "1", "--locked"])
        .output()
        .context("cannot run cargo metadata")?;
    if !out.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let meta: Value = serde_json::from_slice(&out.stdout).context("cargo metadata's JSON")?;
    let mut bad = Vec::new();
    for (name, (declared, need)) in findings(&meta)? {
        let need_text = need
            .as_ref()
            .map(|(v, who)| format!("{} (for {who})", show(*v)))
            .unwrap_or_else(|| "-".into());
        let declared_text = declared.map(show).unwrap_or_else(|| "none".into());
        println!("  {name:<12} declares {declared_text:<6} needs {need_text}");
        match (declared, &need) {
            (None, _) => bad.push(format!("{name} declares no rust-version")),
            (Some(d), Some((n, who))) if d < *n => bad.push(format!(
                "{name} declares rust-version {} but {who} needs {}",
                show(d),
                show(*n)
            )),
            _ => {}
        }
    }
    if !bad.is_empty() {
        bail!("{}", bad.join("; "));
    }
    println!("every crate declares at least the rust-version its dependencies need");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(app_rv: &str, lib_rv: &str) -> Value {
        serde_json::json!({
            "packages": [
                {"id": "app", "name": "app", "version": "0.1.0", "rust_version": app_rv},
                {"id": "lib", "name": "lib", "version": "0.2.0", "rust_version": lib_rv},
                {"id": "dev", "name": "devtool", "version": "1.0.0", "rust_version": "1.99"},
            ],
            "workspace_members": ["app", "lib"],
            "resolve": {"nodes": [
                {"id": "app", "deps": [
                    {"pkg": "lib", "dep_kinds": [{"kind": null}]},
                    {"pkg": "dev", "dep_kinds": [{"kind": "dev"}]},
                ]},
                {"id": "lib", "deps": []},
                {"id": "dev", "deps": []},
            ]}
        })
    }

    #[test]
    fn a_crate_must_declare_what_its_dependencies_need() {
        let f = findings(&meta("1.80", "1.89")).unwrap();
        let (declared, need) = &f["app"];
        assert_eq!(*declared, Some([1, 80, 0]));
        // The dev-dependency's 1.99 does not count.
        assert_eq!(
            need.as_ref().unwrap(),
            &([1, 89, 0], "lib 0.2.0".to_string())
        );
        let f = findings(&meta("1.89", "1.89")).unwrap();
        assert!(f["app"].0 >= f["app"].1.as_ref().map(|n| n.0));
        assert_eq!(version("1.85.1"), Some([1, 85, 1]));
        assert_eq!(version("1.x"), None);
    }
}
