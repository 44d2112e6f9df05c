//! Ledger unit tests: LRU order, pins, reservations, the eviction handshake.

use std::path::{Path, PathBuf};

use super::*;

fn k(n: u64) -> FileKey {
    FileKey { dev: 1, ino: n }
}

fn block(l: &mut Ledger, n: u64, size: u64) {
    l.upsert(k(n), size, true, Some(PathBuf::from(format!("d/{n}.bin"))), 0);
}

fn victims(l: &mut Ledger) -> Vec<u64> {
    std::iter::from_fn(|| l.take_victim().map(|(key, _)| key.ino)).collect()
}

#[test]
fn least_recently_used_goes_first_and_touch_reorders() {
    let mut l = Ledger::new(1000);
    for n in 1..=4 {
        block(&mut l, n, 10);
    }
    l.touch(k(1), 0, 60);
    assert_eq!(victims(&mut l), vec![2, 3, 4, 1]);
}

#[test]
fn usage_counts_every_object_once() {
    let mut l = Ledger::new(1000);
    block(&mut l, 1, 100);
    l.upsert(k(2), 4096, false, Some("cfg/config.json".into()), 0);
    l.upsert(k(1), 150, true, Some("d/1-link.bin".into()), 0); // second name, same object
    assert_eq!(l.usage(), 150 + 4096);
    assert_eq!(l.counts().block_files, 1);
    assert_eq!(l.counts().files, 2);
}

#[test]
fn non_block_files_are_never_victims() {
    let mut l = Ledger::new(1000);
    l.upsert(k(1), 100, false, Some("config.json".into()), 0);
    l.upsert(k(2), 100, false, Some("x.bin_1234.tmp".into()), 0);
    assert!(l.take_victim().is_none());
}

#[test]
fn pinned_blocks_are_not_victims_until_released_and_then_most_recent() {
    let mut l = Ledger::new(1000);
    for n in 1..=3 {
        block(&mut l, n, 10);
    }
    assert_eq!(l.pin(k(1)), Ok(false));
    assert_eq!(l.counts().open_handles, 1);
    l.unpin(k(1));
    assert_eq!(victims(&mut l), vec![2, 3, 1]);
}

#[test]
fn everything_pinned_means_no_victim() {
    let mut l = Ledger::new(100);
    for n in 1..=3 {
        block(&mut l, n, 30);
        l.pin(k(n)).unwrap();
    }
    assert!(l.take_victim().is_none());
    assert_eq!(l.reserve(20), Err(Shortfall(10)));
}

#[test]
fn reservations_count_against_the_cap() {
    let mut l = Ledger::new(100);
    block(&mut l, 1, 50);
    assert!(l.reserve(40).is_ok());
    assert_eq!(l.committed(), 90);
    assert_eq!(l.reserve(20), Err(Shortfall(10)));
    l.release(40);
    assert!(l.reserve(50).is_ok());
}

#[test]
fn open_before_evict_wins_the_race() {
    // An open pins the victim after the evictor took it but before the check:
    // begin_removal must refuse, and the file stays.
    let mut l = Ledger::new(100);
    block(&mut l, 1, 10);
    let (key, _) = l.take_victim().unwrap();
    l.pin(key).unwrap();
    assert!(!l.begin_removal(key, Removal::Block));
    assert_eq!(l.get(&key).unwrap().state, State::Live);
    l.unpin(key);
    assert_eq!(victims(&mut l), vec![1]);
}

#[test]
fn open_after_evict_check_gets_gone() {
    // The evictor's check came first: an open arriving before the unlink
    // completes must be refused (the caller answers ENOENT).
    let mut l = Ledger::new(100);
    block(&mut l, 1, 10);
    let (key, _) = l.take_victim().unwrap();
    assert!(l.begin_removal(key, Removal::Block));
    assert_eq!(l.pin(key), Err(Gone));
    assert_eq!(l.finish_removal(key), 10);
    assert_eq!(l.usage(), 0);
    // After the unlink the key is unknown: a late open gets a placeholder that
    // the caller removes when it finds the file has no link left.
    assert_eq!(l.pin(key), Ok(true));
    l.mark_unlinked(key);
    l.unpin(key);
    assert!(l.get(&key).is_none());
    assert_eq!(l.usage(), 0);
}

#[test]
fn renamed_away_victim_is_forgotten_not_evicted() {
    let mut l = Ledger::new(100);
    block(&mut l, 1, 10);
    let (key, path) = l.take_victim().unwrap();
    assert_eq!(path, Path::new("d/1.bin"));
    // the evictor found another file under that name:
    l.forget_path(key);
    assert!(l.take_victim().is_none());
    // a lookup/rename that records the name again brings it back
    l.upsert(key, 10, true, Some("d/1.bin".into()), 0);
    assert_eq!(victims(&mut l), vec![1]);
}

#[test]
fn unlinked_while_open_counts_until_last_release() {
    let mut l = Ledger::new(100);
    block(&mut l, 1, 10);
    l.pin(k(1)).unwrap();
    l.pin(k(1)).unwrap();
    l.mark_unlinked(k(1));
    assert_eq!(l.usage(), 10);
    l.unpin(k(1));
    assert_eq!(l.usage(), 10);
    l.unpin(k(1));
    assert_eq!(l.usage(), 0);
    assert_eq!(l.counts().open_handles, 0);
}

#[test]
fn parked_victim_returns_on_touch() {
    let mut l = Ledger::new(100);
    block(&mut l, 1, 10);
    let (key, _) = l.take_victim().unwrap();
    l.park(key);
    assert!(l.take_victim().is_none());
    l.touch(key, 5, 60);
    assert_eq!(victims(&mut l), vec![1]);
}

#[test]
fn failed_unlink_parks_instead_of_wedging() {
    let mut l = Ledger::new(100);
    block(&mut l, 1, 10);
    block(&mut l, 2, 10);
    let (key, _) = l.take_victim().unwrap();
    assert!(l.begin_removal(key, Removal::Block));
    l.abort_removal(key);
    assert_eq!(victims(&mut l), vec![2]);
    assert_eq!(l.usage(), 20);
}

#[test]
fn stamps_are_due_once_per_interval() {
    let mut l = Ledger::new(100);
    block(&mut l, 1, 10); // created at t=0: its mtime is fresh
    assert_eq!(l.touch(k(1), 30, 60), None);
    assert_eq!(l.touch(k(1), 60, 60), Some(PathBuf::from("d/1.bin")));
    assert_eq!(l.touch(k(1), 100, 60), None);
    assert!(l.touch(k(1), 120, 60).is_some());
}

#[test]
fn directory_rename_moves_paths() {
    let mut l = Ledger::new(100);
    block(&mut l, 1, 10);
    l.rename_prefix(Path::new("d"), Path::new("e/f"));
    assert_eq!(l.take_victim().unwrap().1, PathBuf::from("e/f/1.bin"));
}

#[test]
fn evictable_bytes_follow_the_lru() {
    let mut l = Ledger::new(1000);
    block(&mut l, 1, 10);
    block(&mut l, 2, 20);
    l.upsert(k(3), 40, false, Some("c.json".into()), 0);
    assert_eq!(l.evictable_bytes(), 30);
    l.pin(k(1)).unwrap();
    assert_eq!(l.evictable_bytes(), 20);
    l.set_size(k(2), 25);
    assert_eq!(l.evictable_bytes(), 25);
    l.unpin(k(1));
    assert_eq!(l.evictable_bytes(), 35);
    let (key, _) = l.take_victim().unwrap();
    assert_eq!(l.evictable_bytes(), 10);
    assert!(l.begin_removal(key, Removal::Block));
    l.finish_removal(key);
    l.remove(k(1));
    assert_eq!(l.evictable_bytes(), 0);
}

#[test]
fn counts_split_files_dirs_and_others() {
    let mut l = Ledger::new(1000);
    block(&mut l, 1, 10);
    l.upsert(k(2), 4096, false, Some("d".into()), 0);
    l.set_kind(k(2), Kind::Dir);
    l.upsert(k(3), 0, false, Some("link".into()), 0);
    l.set_kind(k(3), Kind::Other);
    let c = l.counts();
    assert_eq!((c.files, c.dirs, c.others), (1, 1, 1));
    l.set_kind(k(2), Kind::Dir); // idempotent
    l.remove(k(2));
    l.remove(k(3));
    let c = l.counts();
    assert_eq!((c.files, c.dirs, c.others), (1, 0, 0));
}

#[test]
fn indexed_blocks_count_at_once_and_go_behind_everything_used_since() {
    let mut l = Ledger::new(1000);
    l.start_indexing(0);
    block(&mut l, 9, 10); // created through the mount during the index
    for n in 1..=4 {
        assert!(l.index(k(n), 10, true, Some(PathBuf::from(format!("d/{n}.bin")))));
    }
    assert!(!l.index(k(9), 10, true, None), "a key a request saw first is kept");
    assert_eq!(l.usage(), 50);
    assert_eq!(l.evictable_bytes(), 10, "indexed blocks wait for their order");
    l.touch(k(3), 0, 60); // looked up during the index: most recent
    l.order_indexed(&[k(4), k(3), k(2), k(1)]); // newest mtime first
    assert_eq!(victims(&mut l), vec![1, 2, 4, 9, 3]);
}

#[test]
fn while_indexing_reservations_are_checked_against_the_bound() {
    let mut l = Ledger::new(100);
    l.start_indexing(60);
    assert_eq!(l.reserve_checked(30), Ok(()));
    l.release(30); // the write landed: its bytes stay in the bound
    assert_eq!(l.reserve_checked(30), Err(Refused::Indexing), "60 + 30 + 30 > 100");
    assert_eq!(l.reserve_checked(10), Ok(()));
    l.indexed();
    assert_eq!(l.reserve_checked(80), Ok(()), "exact usage (0) once indexed");
    assert_eq!(l.reserve_checked(30), Err(Refused::Short(20)));
}

#[test]
fn a_new_object_reusing_an_evicted_inode_number_is_kept() {
    let mut l = Ledger::new(1000);
    block(&mut l, 1, 100);
    let (key, _) = l.take_victim().unwrap();
    assert!(l.begin_removal(key, Removal::Block));
    // unlinked; the filesystem gives inode 1 to a directory made elsewhere
    l.fresh(k(1));
    l.upsert(k(1), 4, false, None, 0);
    assert_eq!(l.finish_removal(key), 0, "the late finish must not drop the new object");
    assert_eq!(l.usage(), 4);
    assert!(l.get(&k(1)).is_some());
    // the same for an emptied directory the reaper removes
    l.begin_removal(k(1), Removal::Dir);
    l.fresh(k(1));
    l.upsert(k(1), 8, true, Some(PathBuf::from("d/1.bin")), 0);
    l.finish_removal(k(1));
    assert_eq!(l.usage(), 8);
    assert_eq!(l.pin(k(1)), Ok(false), "an open of the new file is not refused as Gone");
}

// ---- reconcile support

fn lru_order(l: &mut Ledger) -> Vec<u64> {
    victims(l)
}

#[test]
fn adopt_counts_a_new_file_once_and_never_overrides_a_known_one() {
    let mut l = Ledger::new(1000);
    block(&mut l, 1, 10);
    assert!(l.adopt(k(2), 20, true, Some("e/2.bin".into())));
    assert!(!l.adopt(k(1), 99, true, Some("e/1.bin".into())), "a known key is left alone");
    assert!(l.adopt(k(3), 5, false, None));
    assert_eq!(l.usage(), 35);
    assert_eq!(l.counts().block_files, 2);
    assert_eq!(l.get(&k(1)).unwrap().path.as_deref(), Some(Path::new("d/1.bin")));
    // an adopted block's first touch stamps its mtime at once
    assert!(l.touch(k(2), 0, 60).is_some());
}

#[test]
fn drop_unused_spares_open_and_evicting_entries() {
    let mut l = Ledger::new(1000);
    for n in 1..=3 {
        block(&mut l, n, 10);
    }
    l.pin(k(2)).unwrap();
    let (v, _) = l.take_victim().unwrap();
    assert_eq!(v, k(1));
    assert!(l.begin_removal(v, Removal::Block));
    let unused = l.unused_keys();
    assert_eq!(unused, vec![k(3)], "only live, unopened entries are candidates");
    assert_eq!(l.drop_unused(k(2)), 0, "an open file is never dropped");
    assert_eq!(l.drop_unused(k(1)), 0, "an entry being evicted is the evictor's");
    assert_eq!(l.drop_unused(k(3)), 10);
    assert_eq!(l.usage(), 20);
    assert_eq!(l.unused_path(&k(3)), None);
    assert_eq!(l.unused_path(&k(2)), None);
}

#[test]
fn restore_path_makes_a_block_evictable_again() {
    let mut l = Ledger::new(1000);
    block(&mut l, 1, 10);
    l.forget_path(k(1));
    assert!(l.take_victim().is_none());
    assert!(l.restore_path(k(1), "d/renamed.bin".into(), true));
    assert!(!l.restore_path(k(1), "d/other.bin".into(), true), "a known path is kept");
    assert_eq!(l.take_victim().unwrap().1, PathBuf::from("d/renamed.bin"));
}

#[test]
fn adopted_blocks_take_their_mtime_place_in_the_lru() {
    let mut l = Ledger::new(1000);
    // known blocks 1, 2, 3 (oldest first) with walk mtimes 10, 20, 30
    for n in 1..=3 {
        block(&mut l, n, 10);
    }
    let mtime = |key: &FileKey| Some(key.ino as i128 * 10);
    // 4 at mtime 25 goes between 2 and 3; 5 at 5 first; 6 at 15 between 1 and 2
    for n in 4..=6 {
        l.adopt(k(n), 10, true, Some(format!("e/{n}.bin").into()));
    }
    l.place_by_mtime(&[(k(4), 25), (k(5), 5), (k(6), 15)], mtime);
    assert_eq!(lru_order(&mut l), vec![5, 1, 6, 2, 4, 3]);
}

#[test]
fn adopted_blocks_older_or_newer_than_all_go_to_the_ends() {
    let mut l = Ledger::new(1000);
    for n in 1..=3 {
        block(&mut l, n, 10);
    }
    let mtime = |key: &FileKey| Some(key.ino as i128 * 10);
    for n in [7, 8, 9] {
        l.adopt(k(n), 10, true, Some(format!("e/{n}.bin").into()));
    }
    // 7 and 8 older than everything (in reverse name order), 9 newer
    l.place_by_mtime(&[(k(8), 1), (k(7), 2)], mtime);
    l.place_by_mtime(&[(k(9), 100)], mtime);
    assert_eq!(lru_order(&mut l), vec![8, 7, 1, 2, 3, 9]);
}

#[test]
fn begin_remove_refuses_an_open_file_and_guards_an_unknown_one() {
    let mut l = Ledger::new(1000);
    l.upsert(k(1), 10, false, Some("a.tmp".into()), 0);
    l.pin(k(1)).unwrap();
    assert!(!l.begin_removal(k(1), Removal::Stale { size: 10 }), "an open temporary is never removed");
    l.unpin(k(1));
    assert!(l.begin_removal(k(1), Removal::Stale { size: 10 }));
    assert_eq!(l.pin(k(1)), Err(Gone), "an open racing the removal answers ENOENT");
    assert_eq!(l.finish_removal(k(1)), 10);
    // unknown to the ledger: indexed, then guarded the same way
    assert!(l.begin_removal(k(2), Removal::Stale { size: 30 }));
    assert_eq!(l.usage(), 30);
    assert_eq!(l.pin(k(2)), Err(Gone));
    l.abort_removal(k(2));
    assert_eq!(l.usage(), 30, "a failed removal keeps the file counted");
    assert_eq!(l.pin(k(2)), Ok(false));
}

#[test]
fn a_block_found_with_a_recent_mtime_is_not_stamped_again_at_once() {
    let mut l = Ledger::new(1000);
    assert!(l.index(k(1), 10, true, Some(PathBuf::from("d/1.bin"))));
    assert!(l.index(k(2), 10, true, Some(PathBuf::from("d/2.bin"))));
    l.mark_stamped_at_start(k(2));
    assert!(l.touch(k(1), 5, 60).is_some(), "an old mtime is stamped at the first touch");
    assert!(l.touch(k(2), 5, 60).is_none(), "a recent mtime waits one interval");
    assert!(l.touch(k(2), 60, 60).is_some());
}

#[test]
fn local_bytes_count_only_files_created_here() {
    let mut l = Ledger::new(1 << 30);
    block(&mut l, 1, 4096);
    l.mark_local(k(1));
    assert!(l.index(k(2), 8192, true, Some(PathBuf::from("d/2.bin"))), "another node's file, found by the index");
    assert_eq!(l.local_bytes(), 4096);
    assert_eq!(l.usage(), 4096 + 8192);
    l.set_size(k(1), 12288);
    assert_eq!(l.local_bytes(), 12288, "follows the size");
    l.remove(k(1));
    assert_eq!(l.local_bytes(), 0);
}

#[test]
fn stamped_at_is_the_last_own_stamp() {
    let mut l = Ledger::new(1 << 30);
    block(&mut l, 1, 4096);
    assert_eq!(l.stamped_at(k(1)), Some(0), "created at second 0 counts as a stamp then");
    l.touch(k(1), 30, 10);
    assert_eq!(l.stamped_at(k(1)), Some(30));
    assert!(l.index(k(2), 1, true, None));
    assert_eq!(l.stamped_at(k(2)), None, "found by the index, never stamped here");
}

#[test]
fn reservations_held_past_max_size_wake_the_evictor_below_the_high_watermark() {
    // A handed passthrough writer's reservation is held room or not (after a
    // crash or an upgrade); its bytes are coming, so the evictor must make
    // room for them even while usage itself is below the high watermark
    // (faults/crash-recovery saw du 336 KiB over max_size without it).
    let mut l = Ledger::new(1000);
    block(&mut l, 1, 500);
    assert!(!l.should_wake());
    l.hold(300);
    assert!(!l.should_wake(), "reservations within max_size wake nothing");
    l.hold(400); // committed 1200 > 1000
    assert!(l.should_wake());
    assert!(l.excess() >= 200, "at least what the reservations hold past max_size: {}", l.excess());
}
