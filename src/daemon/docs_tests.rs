//! The docs cannot drift from the code: the options in `--help`, the `-o`
//! keys and the options table of docs/reference.md all come from, or are compared with,
//! the one clap definition (`cli::Args`); the status JSON fields and the
//! metrics in docs/reference.md are compared with the one status table
//! (`status::FIELDS`). Adding an option or a status field without its row
//! in the docs fails here.

use std::collections::BTreeSet;
use std::ffi::OsString;

use clap::CommandFactory;

use super::cli::{self, Args};
use super::metrics;
use crate::status::FIELDS;

fn doc(path: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The rows (cells, trimmed) of the markdown table whose header line starts with `header`.
fn table(text: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(header));
    assert!(lines.next().is_some(), "no table with the header '{header}'");
    lines
        .skip(1) // |---|---|
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect())
        .collect()
}

/// The `code` spans of a cell, without a `{labels}` suffix.
fn names(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(|n| n.split('{').next().unwrap_or(n).to_string()).collect()
}

#[test]
fn help_and_dash_o_keys_list_every_option() {
    let help = Args::command().render_long_help().to_string();
    let keys = cli::keys();
    assert!(keys.len() > 20, "{keys:?}");
    for (k, takes_value) in &keys {
        let long = format!("--{}", k.replace('_', "-"));
        assert!(help.contains(&long), "--help lacks {long}");
        let item = if *takes_value { format!("{k}=1") } else { k.clone() };
        let argv: Vec<OsString> = ["boundfs", "-o", &item].iter().map(OsString::from).collect();
        let out = cli::expand(&argv).unwrap_or_else(|e| panic!("-o {item}: {e}"));
        assert!(out[1].to_string_lossy().starts_with(&long), "-o {item} became {out:?}");
        assert!(cli::known_option(&item), "mount -s would drop {item}");
    }
}

/// Each subcommand is in `--help`'s "Other commands" and in the README's
/// Usage lines (`upgrade` was in neither).
#[test]
fn help_and_readme_name_every_subcommand() {
    let help = Args::command().render_long_help().to_string();
    let other = help.split("Other commands:").nth(1).and_then(|t| t.lines().next()).unwrap_or_default();
    let readme = doc("README.md");
    let usage = readme.split("## Usage").nth(1).and_then(|t| t.split("```").nth(1)).unwrap_or_default();
    for c in super::ctl::COMMANDS {
        let line = format!("boundfs {c} MOUNTPOINT");
        assert!(other.contains(&line), "--help's Other commands lack `{line}`: {other}");
        assert!(usage.lines().any(|l| l.starts_with(&line)), "README's Usage lines lack `{line}`: {usage}");
    }
}

#[test]
fn reference_options_table_matches_the_clap_definition() {
    let reference = doc("docs/reference.md");
    let rows = table(&reference, "| option | default | meaning |");
    let keys = cli::keys();
    let documented: BTreeSet<String> = rows.iter().flat_map(|r| names(&r[0])).collect();
    let defined: BTreeSet<String> = keys.iter().map(|(k, _)| k.clone()).collect();
    let missing: Vec<_> = defined.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&defined).collect();
    assert!(missing.is_empty(), "options missing from docs/reference.md's options table: {missing:?}");
    assert!(unknown.is_empty(), "docs/reference.md's options table names options boundfs does not have: {unknown:?}");
    // each default clap applies is the one the table states
    for a in Args::command().get_arguments().filter(|a| a.get_action().takes_values()) {
        let Some(row) = rows.iter().find(|r| names(&r[0]).iter().any(|n| n == a.get_id().as_str())) else {
            continue;
        };
        for d in a.get_default_values() {
            let d = format!("`{}`", d.to_string_lossy());
            assert!(row[1].contains(&d), "docs/reference.md gives {} the default '{}', clap {d}", a.get_id(), row[1]);
        }
    }
}

#[test]
fn reference_lists_every_status_field_and_metric() {
    let reference = doc("docs/reference.md");
    let json: BTreeSet<String> = table(&reference, "| JSON field |").iter().flat_map(|r| names(&r[0])).collect();
    let fields: BTreeSet<String> = FIELDS.iter().map(|f| f.name.to_string()).collect();
    assert_eq!(
        fields.difference(&json).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "status fields missing from docs/reference.md's JSON table"
    );
    assert_eq!(
        json.difference(&fields).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "docs/reference.md's JSON table names fields the status does not have"
    );
    let documented: BTreeSet<String> = table(&reference, "| metric |").iter().flat_map(|r| names(&r[0])).collect();
    let mut exported: BTreeSet<String> =
        FIELDS.iter().filter_map(|f| f.metric.as_ref()).map(|m| m.name.to_string()).collect();
    exported.extend(metrics::LABELLED.iter().map(|m| m.to_string()));
    exported.extend(metrics::HISTOGRAMS.iter().map(|(m, _)| m.to_string()));
    assert_eq!(
        exported.difference(&documented).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "metrics missing from docs/reference.md's metrics table"
    );
    assert_eq!(
        documented.difference(&exported).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "docs/reference.md's metrics table names metrics the file does not have"
    );
}

/// The README is a guide read in ten minutes: at most 400 lines, a table
/// of contents first, then the sections in the order an operator needs
/// them (the rest lives in docs/ by topic).
#[test]
fn readme_is_a_short_guide_in_the_operators_order() {
    let readme = doc("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 400, "README.md has {lines} lines, at most 400: move detail to docs/ by topic");
    let order =
        ["## Contents", "## Install", "## Mount", "## Watch", "## Upgrade", "## Troubleshooting", "## The rest"];
    let at: Vec<Option<usize>> = order.iter().map(|h| readme.lines().position(|l| l == *h)).collect();
    for (h, p) in order.iter().zip(&at) {
        assert!(p.is_some(), "README.md lacks the section `{h}`");
    }
    assert!(at.windows(2).all(|w| w[0] < w[1]), "README.md's sections are not in the order {order:?}: {at:?}");
}
