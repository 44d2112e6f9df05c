//! argv parsing: both forms set the same options; bad values are refused.

use super::*;

fn parse(extra: &[&str]) -> Result<Options, ConfigError> {
    let b = tempfile::tempdir().unwrap();
    let m = tempfile::tempdir().unwrap();
    let mut argv = vec!["boundfs".to_string(), b.path().display().to_string(), m.path().display().to_string()];
    argv.extend(extra.iter().map(|s| s.to_string()));
    let argv: Vec<OsString> = argv.into_iter().map(OsString::from).collect();
    match super::parse(&argv) {
        Ok(o) => Ok(o),
        Err(CliError::Bad(e)) => Err(ConfigError(e, Exit::BadInput)),
        Err(CliError::Refused(f)) => Err(ConfigError(f.msg, f.exit)),
        Err(CliError::Display(e)) => Err(ConfigError(e.to_string(), Exit::BadInput)),
    }
}

#[test]
fn dash_o_and_long_flags_agree() {
    let a = parse(&["-o", "max_size=24G,high_watermark=0.8,low_watermark=0.5,pattern=*.pt,stamp_interval=5m"]).unwrap();
    let b = parse(&[
        "--max-size",
        "24G",
        "--high-watermark",
        "0.8",
        "--low-watermark",
        "0.5",
        "--pattern",
        "*.pt",
        "--stamp-interval",
        "5m",
    ])
    .unwrap();
    assert_eq!(a.max_size, 24 << 30);
    assert_eq!((a.max_size, a.high_watermark, a.low_watermark), (b.max_size, b.high_watermark, b.low_watermark));
    assert_eq!(a.patterns, b.patterns);
    assert_eq!(a.stamp_interval.as_secs(), 300);
}

#[test]
fn defaults() {
    let o = parse(&["-o", "max_size=1M"]).unwrap();
    assert_eq!(o.max_size, 1 << 20);
    assert_eq!((o.high_watermark, o.low_watermark), (0.95, 0.90));
    assert_eq!(o.patterns, vec!["*.bin".to_string()]);
    assert_eq!(o.stamp_interval.as_secs(), 60);
}

#[test]
fn mount_generic_options_are_ignored() {
    assert!(parse(&["-o", "rw,nofail,_netdev,x-systemd.automount,max_size=1G"]).is_ok());
    assert!(parse(&["-o", "defaults,user=alice,comment=x,noatime,nodev,nosuid,max_size=1G"]).is_ok());
}

#[test]
fn bad_values_are_refused_with_the_key_named() {
    for (opts, key) in [
        ("high_watermark=0.9", "max_size"),
        ("max_size=0", "max_size"),
        ("max_size=-1G", "max_size"),
        ("max_size=lots", "max_size"),
        ("max_size=", "max_size"),
        ("max_size=99999999999999999999T", "max_size"),
        ("max_size=1G,high_watermark=1.5", "high_watermark"),
        ("max_size=1G,high_watermark=0", "high_watermark"),
        ("max_size=1G,low_watermark=0.96", "low_watermark"),
        ("max_size=1G,pattern=", "pattern"),
        ("max_size=1G,bogus=1", "bogus"),
        ("max_size=1G,max_size=2G", "max_size"),
        ("max_size=1G,stamp_interval=soon", "stamp_interval"),
        ("max_size=1G,threads=0", "threads"),
    ] {
        let e = parse(&["-o", opts]).expect_err(opts);
        assert!(e.0.contains(key), "{opts}: {}", e.0);
        assert!(!e.0.contains('\n'), "{opts}: one line expected");
    }
}

#[test]
fn mountpoint_inside_backing_is_refused() {
    let b = tempfile::tempdir().unwrap();
    let inner = b.path().join("m");
    std::fs::create_dir(&inner).unwrap();
    assert!(crate::config::check_paths(b.path(), &inner).is_err());
    assert!(crate::config::check_paths(&inner, b.path()).is_err());
    assert!(crate::config::check_paths(b.path(), b.path()).is_err());
    assert!(crate::config::check_paths(&b.path().join("missing"), &inner).is_err());
}

#[test]
fn mount_flags_and_metrics_options() {
    let o = parse(&["-o", "max_size=1G,rw,noexec"]).unwrap();
    assert!(o.noexec);
    let o = parse(&["-o", "max_size=1G,noexec,exec"]).unwrap();
    assert!(!o.noexec, "the last of noexec/exec wins");
    let e = parse(&["-o", "max_size=1G,ro"]).expect_err("ro");
    assert!(e.0.starts_with("ro is not supported"), "{}", e.0);
    assert!(o.metrics_file.is_none());
    assert_eq!(o.metrics_interval.as_secs(), 15);
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("boundfs.prom");
    let o = parse(&["-o", &format!("max_size=1G,metrics_file={},metrics_interval=5s", path.display())]).unwrap();
    assert_eq!(o.metrics_file.unwrap(), d.path().canonicalize().unwrap().join("boundfs.prom"));
    assert_eq!(o.metrics_interval.as_secs(), 5);
    for bad in ["metrics_interval=0s", "metrics_interval=never", "metrics_file=/nonexistent-dir/x.prom"] {
        let e = parse(&["-o", &format!("max_size=1G,{bad}")]).expect_err(bad);
        assert!(e.0.starts_with("metrics_"), "{bad}: {}", e.0);
    }
}

#[test]
fn known_options_for_sloppy_mounts() {
    for k in ["max_size=1G", "rw", "noexec", "nofail", "x-systemd.automount", "pattern=*.bin", "allow_other"] {
        assert!(known_option(k), "{k}");
    }
    for k in ["bogus", "bogus=1", "uid=1000"] {
        assert!(!known_option(k), "{k}");
    }
}

#[test]
fn reconcile_and_stale_tmp_options() {
    let o = parse(&["-o", "max_size=1M"]).unwrap();
    assert_eq!((o.reconcile_interval.as_secs(), o.stale_tmp.as_secs()), (60, 3600));
    let o = parse(&["-o", "max_size=1M,reconcile_interval=0,stale_tmp=90m"]).unwrap();
    assert_eq!((o.reconcile_interval.as_secs(), o.stale_tmp.as_secs()), (0, 5400));
    let o = parse(&["--max-size", "1M", "--reconcile-interval", "5s", "--stale-tmp", "0"]).unwrap();
    assert_eq!((o.reconcile_interval.as_secs(), o.stale_tmp.as_secs()), (5, 0));
    for bad in ["reconcile_interval=500ms", "stale_tmp=10ms", "reconcile_interval=-1s", "stale_tmp=1hx"] {
        assert!(parse(&["-o", &format!("max_size=1M,{bad}")]).is_err(), "{bad} accepted");
    }
}

#[test]
fn allow_other_given_twice_is_refused_like_every_key() {
    assert!(parse(&["-o", "max_size=1M,allow_other"]).unwrap().allow_other);
    let e = parse(&["-o", "max_size=1M,allow_other", "--allow-other"]).unwrap_err();
    assert!(e.0.contains("twice"), "{e}");
}

#[test]
fn shared_and_flush() {
    let o = parse(&["-o", "max_size=1M"]).unwrap();
    assert!(!o.shared, "one node unless asked");
    assert_eq!(o.flush, config::FlushMode::Auto);
    let o = parse(&["-o", "max_size=1M,shared,flush=on"]).unwrap();
    assert!(o.shared);
    assert_eq!(o.flush, config::FlushMode::On);
    let o = parse(&["--max-size", "1M", "--shared", "--flush", "off"]).unwrap();
    assert!(o.shared);
    assert_eq!(o.flush, config::FlushMode::Off);
    let e = parse(&["-o", "max_size=1M,shared=yes"]).unwrap_err();
    assert!(e.0.contains("shared takes no value"), "{e}");
    let e = parse(&["-o", "max_size=1M,shared,shared"]).unwrap_err();
    assert!(e.0.contains("given twice"), "{e}");
    let e = parse(&["-o", "max_size=1M,flush=always"]).unwrap_err();
    assert!(e.0.contains("not auto, on or off"), "{e}");
    assert!(known_option("shared") && known_option("flush=on"), "mount -s keeps them");
}

#[test]
fn shared_defaults() {
    let o = parse(&["-o", "max_size=1M"]).unwrap();
    assert_eq!(o.stamp_interval, std::time::Duration::from_secs(60), "the default");
    assert_eq!(o.reconcile_interval, std::time::Duration::from_secs(60), "the default");
    let o = parse(&["-o", "max_size=1M,shared"]).unwrap();
    assert_eq!(o.stamp_interval, config::SHARED_STAMP_INTERVAL);
    assert_eq!(o.reconcile_interval, config::SHARED_RECONCILE_INTERVAL);
    assert_eq!(o.attr_timeout, config::SHARED_ATTR_TIMEOUT);
    let o = parse(&["-o", "max_size=1M,shared,stamp_interval=30s,reconcile_interval=0,attr_timeout=5s"]).unwrap();
    assert_eq!(o.stamp_interval, std::time::Duration::from_secs(30), "given values win");
    assert!(o.reconcile_interval.is_zero());
    assert_eq!(o.attr_timeout, std::time::Duration::from_secs(5));
}

#[test]
fn sizes_are_powers_of_1024_with_fractions_and_decimal_forms_are_refused() {
    for (v, n) in [
        ("1048576", 1u64 << 20),
        ("24G", 24 << 30),
        ("24GiB", 24 << 30),
        ("1.5G", 3 << 29),
        ("1.5GiB", 3 << 29),
        ("2T", 2 << 40),
        ("0.25M", 1 << 18),
        ("512K", 512 << 10),
        ("512KiB", 512 << 10),
    ] {
        assert_eq!(config::parse_size("max_size", v), Ok(n), "{v}");
    }
    for v in ["10GB", "10g", "10gb", "10Gb", "10kB", "10MB", "1.5", "G", "1..5G", "1.5.2G", "10 G", "10X", "99999999T"]
    {
        let e = config::parse_size("max_size", v).unwrap_err().0;
        assert!(e.starts_with("max_size: ") && !e.contains('\n'), "{v}: {e}");
    }
    let e = config::parse_size("max_size", "10GB").unwrap_err().0;
    assert!(e.contains("write 10G or 10GiB"), "{e}");
}

#[test]
fn a_pattern_without_wildcard_is_refused_and_atime_options_are_applied() {
    let e = parse(&["-o", "max_size=1G,pattern=bin"]).unwrap_err().0;
    assert!(e.contains("no wildcard") && e.contains("pattern=*.bin"), "{e}");
    assert!(parse(&["-o", "max_size=1G,pattern=block-?"]).is_ok());
    let o = parse(&["-o", "max_size=1G,noatime,nodiratime"]).unwrap();
    assert_eq!(o.atime.mount_flags(), libc::MS_NOATIME | libc::MS_NODIRATIME);
    let o = parse(&["-o", "max_size=1G,noatime,relatime"]).unwrap();
    assert_eq!(o.atime.mount_flags(), libc::MS_RELATIME);
    let o = parse(&["-o", "max_size=1G,strictatime,lazytime"]).unwrap();
    assert_eq!(o.atime.words(), vec!["strictatime", "lazytime"]);
}

#[test]
fn warm_entries_default_bounds_and_shared() {
    assert_eq!(parse(&["-o", "max_size=1M"]).unwrap().warm_entries, config::DEFAULT_WARM_ENTRIES);
    assert_eq!(parse(&["-o", "max_size=1M,warm_entries=0"]).unwrap().warm_entries, 0);
    assert_eq!(parse(&["-o", "max_size=1M,shared"]).unwrap().warm_entries, 0, "entries live 2 s with shared");
    assert_eq!(parse(&["-o", "max_size=1M,shared,warm_entries=100"]).unwrap().warm_entries, 100);
    let e = parse(&["-o", "max_size=1M,warm_entries=-1"]).unwrap_err();
    assert!(e.0.contains("warm_entries: '-1' must be a whole number from 0 (off)"), "{e}");
    assert!(parse(&["-o", &format!("max_size=1M,warm_entries={}", config::MAX_WARM_ENTRIES + 1)]).is_err());
}

#[test]
fn an_option_without_its_dash_o_says_where_it_goes() {
    let e = parse(&["max_size=24G"]).expect_err("bare key=value");
    assert_eq!(
        e.0,
        "unexpected argument 'max_size=24G': mount options go after -o, e.g. boundfs BACKING MOUNTPOINT -o max_size=24G"
    );
}

#[test]
fn dash_o_takes_every_value_the_long_option_takes() {
    // a comma inside a glob's braces or a double-quoted value is part of the value
    let a = parse(&["-o", "max_size=1G,pattern=*.{bin,pt},pattern=\"*.a,b\",allow_other"]).unwrap();
    assert_eq!(a.patterns, ["*.{bin,pt}", "*.a,b"]);
    assert!(a.allow_other);
    let b = parse(&["--max-size", "1G", "--pattern", "*.{bin,pt}", "--pattern", "*.a,b", "--allow-other"]).unwrap();
    assert_eq!(a.patterns, b.patterns);
    assert_eq!(split_items("a={x,{y,z}},b,,\"c,d\""), ["a={x,{y,z}}", "b", "", "\"c,d\""]);
    // the item after the comma is named, not the size before it
    let e = parse(&["-o", "max_size=32M,foo"]).unwrap_err();
    assert!(e.0.contains("unknown option 'foo'"), "{}", e.0);
    let e = parse(&["--max-size", "32M,foo"]).unwrap_err();
    assert!(e.0.contains("',foo'"), "{}", e.0);
}

#[test]
fn a_high_watermark_given_alone_brings_the_low_one_under_it() {
    let o = parse(&["-o", "max_size=1G,high_watermark=0.8"]).unwrap();
    assert_eq!((o.high_watermark, o.low_watermark), (0.8, 0.75));
    let o = parse(&["-o", "max_size=1G,high_watermark=0.95"]).unwrap();
    assert_eq!(o.low_watermark, crate::config::DEFAULT_LOW_WATERMARK, "above the default low one: unchanged");
    assert!(parse(&["-o", "max_size=1G,high_watermark=0.8,low_watermark=0.85"]).is_err(), "both given: refused");
}
