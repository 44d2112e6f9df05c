//! The source layout's rules, checked on the files themselves (see the floors
//! in the crate docs): no module uses one on a higher floor, the top-level
//! modules import each other without cycles, and no file is over 600 lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Floor of each top-level module, bottom (1) to top. `testing` is test-only.
const FLOORS: &[(&str, u32)] = &[
    ("sys", 1),
    ("key", 1),
    ("config", 1),
    ("exit", 1),
    ("claim", 1),
    ("stats", 1),
    ("status", 1),
    ("notify", 1),
    ("wake", 1),
    ("ratelimit", 1),
    ("logging", 1),
    ("ledger", 2),
    ("fs", 3),
    ("workers", 4),
    ("fuse", 5),
    ("daemon", 6),
    ("testing", 7),
];

fn floor(module: &str) -> Option<u32> {
    FLOORS.iter().find(|(m, _)| *m == module).map(|(_, f)| *f)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("src/ is readable") {
        let p = e.expect("src/ entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/fs/data.rs` → `fs`; `src/sys.rs` → `sys`; None for lib.rs and main.rs.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// The top-level modules a file's code (comments and test files aside) names
/// through `crate::`.
fn uses(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let before = rest[..i].chars().last();
            rest = &rest[i + "crate::".len()..];
            if before == Some('$') {
                continue; // a macro's own path (`$crate::ratelimit`)
            }
            let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

#[test]
fn floors_only_look_down_and_modules_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut graph: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for f in &files {
        let Some(m) = module_of(&src, f) else { continue };
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with("_tests.rs") || m == "testing" {
            continue;
        }
        let Some(mine) = floor(&m) else {
            wrong.push(format!("{}: module {m} has no floor in layout_tests.rs", f.display()));
            continue;
        };
        let text = std::fs::read_to_string(f).expect("source is UTF-8");
        // Inline test modules sit at the end of their file.
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        for used in uses(text) {
            match floor(&used) {
                Some(theirs) if theirs > mine => {
                    wrong.push(format!("{}: floor {mine} ({m}) uses crate::{used} on floor {theirs}", f.display()))
                }
                _ => {}
            }
            if used != m {
                let e = graph.entry(m.clone()).or_default();
                if !e.contains(&used) {
                    e.push(used);
                }
            }
        }
    }
    // Depth-first search for a cycle among the top-level modules.
    fn visit(
        n: &str,
        g: &BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<String> {
        if let Some(i) = path.iter().position(|p| p == n) {
            return Some(format!("{} -> {n}", path[i..].join(" -> ")));
        }
        if done.iter().any(|d| d == n) {
            return None;
        }
        path.push(n.to_string());
        for next in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(next, g, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.push(n.to_string());
        None
    }
    let mut done = Vec::new();
    for n in graph.keys() {
        if let Some(c) = visit(n, &graph, &mut Vec::new(), &mut done) {
            wrong.push(format!("import cycle: {c}"));
        }
    }
    assert!(wrong.is_empty(), "layout rules broken:\n{}", wrong.join("\n"));
}

#[test]
fn no_source_file_is_over_600_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).ok()?.lines().count();
            (n > 600).then(|| format!("{}: {n} lines", f.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over 600 lines (split them by what they hold):\n{}", long.join("\n"));
}
