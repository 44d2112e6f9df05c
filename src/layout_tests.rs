//! The source layout's rules, checked on the files themselves (see the floors
//! in the crate docs): no module uses one on a higher floor, the top-level
//! modules import each other without cycles, no file is over 600 lines, and
//! every `unsafe` has a `// SAFETY:` comment right above it (the check clippy's
//! `undocumented_unsafe_blocks` makes, here for a CI that runs no clippy).

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
    ("latency", 1),
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

/// `line` without its `//` comment and without the insides of its string and
/// char literals (so a `{`, `//` or `unsafe` in a literal is not code).
fn code_of(line: &str) -> String {
    let b = line.as_bytes();
    let (mut out, mut i) = (String::new(), 0);
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => break,
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                out.push_str("\"\"");
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
            }
            c => out.push(c as char),
        }
        i += 1;
    }
    out
}

/// Length in bytes of the `#[cfg(test)]` item at the start of `s`: its
/// attributes, then the item up to the `;` or `,` that ends it or the `}` that
/// closes its body (brackets matched, literals and comments skipped line by
/// line through [`code_of`]), or up to the bracket that closes the enclosing one.
fn test_item_len(s: &str) -> usize {
    let (mut depth, mut angle, mut pos) = (0i32, 0i32, 0);
    let mut in_type = true; // before the first `=` or `{`: `<` `>` are generics
    for line in s.split_inclusive('\n') {
        let code = code_of(line);
        let attr = code.trim_start().starts_with('#');
        let mut prev = ' ';
        for c in code.chars() {
            match c {
                '(' | '[' => depth += 1,
                '{' => {
                    depth += 1;
                    in_type = false;
                }
                ')' | ']' | '}' => {
                    depth -= 1;
                    if depth < 0 {
                        // The enclosing block ends: the item ended before it.
                        return pos;
                    }
                    if depth == 0 && c == '}' {
                        return pos + line.len();
                    }
                }
                '=' if depth == 0 && !attr => in_type = false,
                '<' if depth == 0 && in_type => angle += 1,
                '>' if depth == 0 && in_type && prev != '-' && prev != '=' => angle -= 1,
                ';' | ',' if depth == 0 && angle <= 0 => return pos + line.len(),
                _ => {}
            }
            prev = c;
        }
        pos += line.len();
    }
    s.len()
}

/// `text` with every item gated by `#[cfg(test)]` at the start of a line
/// blanked out (its line breaks kept, so line numbers stay): what a build
/// without tests compiles.
fn without_test_items(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let at = rest.match_indices("#[cfg(test)]").map(|(i, _)| i).find(|&i| {
            let line_start = rest[..i].rfind('\n').map_or(0, |n| n + 1);
            rest[line_start..i].trim().is_empty()
        });
        let Some(i) = at else { break };
        out.push_str(&rest[..i]);
        let end = i + test_item_len(&rest[i..]);
        out.extend(rest[i..end].chars().filter(|&c| c == '\n'));
        rest = &rest[end..];
    }
    out.push_str(rest);
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
        let text = without_test_items(&std::fs::read_to_string(f).expect("source is UTF-8"));
        for used in uses(&text) {
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

/// Lines (1-based) of `text` with an `unsafe` in code whose comment lines
/// right above (attributes between allowed) hold no `SAFETY:` (nor, for an
/// `unsafe fn`, a `# Safety` doc section).
fn undocumented_unsafe(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let is_unsafe = |code: &str| {
        code.match_indices("unsafe").any(|(i, _)| {
            let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            !word(code[..i].chars().last()) && !word(code[i + "unsafe".len()..].chars().next())
        })
    };
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !is_unsafe(&code_of(line)) {
            continue;
        }
        let mut above =
            lines[..i].iter().rev().map(|l| l.trim()).take_while(|l| l.starts_with("//") || l.starts_with("#["));
        if !above.any(|l| l.contains("SAFETY:") || l.contains("# Safety")) {
            out.push(i + 1);
        }
    }
    out
}

#[test]
fn every_unsafe_says_why_it_is_sound() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut bare = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("source is UTF-8");
        bare.extend(undocumented_unsafe(&text).into_iter().map(|n| format!("{}:{n}", f.display())));
    }
    assert!(
        bare.is_empty(),
        "unsafe without a `// SAFETY:` comment right above it (or move the call into a sys.rs wrapper):\n{}",
        bare.join("\n")
    );
}

#[test]
fn the_unsafe_check_wants_a_comment_right_above() {
    let text = "fn a() {\n    // SAFETY: no pointers.\n    unsafe { f() };\n    // a comment, not why\n    let x = unsafe { g() };\n    let s = \"unsafe { in a string }\"; // unsafe\n}\n/// Does it.\n///\n/// # Safety\n/// `p` is valid.\nunsafe fn h(p: *const u8) {}\n";
    assert_eq!(undocumented_unsafe(text), vec![5]);
}

#[test]
fn test_items_are_skipped_and_the_rest_of_the_file_is_read() {
    let text = "use crate::fs;\n#[cfg(test)]\nmod docs_tests;\n#[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod tests;\nstruct A {\n    #[cfg(test)]\n    n: crate::daemon::N<u8, u8>,\n    m: u8,\n}\nfn f() {\n    #[cfg(test)]\n    crate::testing::crash_point();\n    g('}');\n}\n#[cfg(test)]\nmod t {\n    use crate::fuse;\n    fn x() { let s = \"}\"; }\n}\nuse crate::workers::x;\n";
    let kept = without_test_items(text);
    assert_eq!(kept.lines().count(), text.lines().count(), "line numbers stay");
    assert_eq!(uses(&kept), vec!["fs".to_string(), "workers".to_string()], "{kept}");
    assert!(kept.contains("    m: u8,") && kept.contains("    g("), "{kept}");
}

/// Files that may hold the raw ledger lock (`Accounts::lock`) across
/// several steps, and why; everywhere else an `Accounts` event method is
/// the one door (test code aside).
const RAW_LEDGER_LOCK: &[(&str, &str)] =
    &[("fs/control.rs", "the status snapshot"), ("fs/statfs.rs", "the df figures, one consistent reading")];

#[test]
fn the_raw_ledger_lock_stays_behind_its_door() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut outside = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).expect("under src").to_string_lossy().to_string();
        if rel.ends_with("_tests.rs") || rel == "testing.rs" || RAW_LEDGER_LOCK.iter().any(|(p, _)| *p == rel) {
            continue;
        }
        let text = without_test_items(&std::fs::read_to_string(f).expect("source is UTF-8"));
        for (n, line) in text.lines().enumerate() {
            let code = code_of(line);
            if code.contains("accounts.lock()") || code.contains("accounts().lock()") {
                outside.push(format!("{rel}:{}", n + 1));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "the raw ledger lock outside its allowed files (add an Accounts event instead):\n{}",
        outside.join("\n")
    );
}
