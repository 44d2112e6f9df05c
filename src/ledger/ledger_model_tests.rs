//! Property test of the ledger against a simple model (the way mountpoint-s3's
//! `reftests/` check its superblock): random sequences of request and
//! eviction events, and after each one the ledger's invariant (module docs)
//! on its own state, its totals against the model, and every victim it
//! chooses against the model's idea of an evictable block.

use std::collections::BTreeMap;
use std::path::PathBuf;

use proptest::prelude::*;

use super::*;

/// One event, on one of a few keys so that events collide.
#[derive(Clone, Debug)]
enum Event {
    Upsert {
        k: u64,
        size: u64,
        block: bool,
        named: bool,
    },
    Pin(u64),
    Unpin(u64),
    Touch(u64),
    SetSize(u64, u64),
    Unlinked(u64),
    Remove(u64),
    /// Take a victim; evict it (true) or park it (false).
    Evict(bool),
    Reserve(u64),
    Release(u64),
}

fn event() -> impl Strategy<Value = Event> {
    let k = 0u64..6;
    let size = 0u64..10_000;
    prop_oneof![
        (k.clone(), size.clone(), any::<bool>(), any::<bool>()).prop_map(|(k, size, block, named)| Event::Upsert {
            k,
            size,
            block,
            named
        }),
        k.clone().prop_map(Event::Pin),
        k.clone().prop_map(Event::Unpin),
        k.clone().prop_map(Event::Touch),
        (k.clone(), size.clone()).prop_map(|(k, s)| Event::SetSize(k, s)),
        k.clone().prop_map(Event::Unlinked),
        k.prop_map(Event::Remove),
        any::<bool>().prop_map(Event::Evict),
        size.clone().prop_map(Event::Reserve),
        size.prop_map(Event::Release),
    ]
}

/// What the model knows of one key.
#[derive(Debug, Default)]
struct M {
    size: u64,
    block: bool,
    named: bool,
    opens: u32,
    unlinked: bool,
}

fn key(k: u64) -> FileKey {
    FileKey { dev: 1, ino: k + 10 }
}

fn path(k: u64) -> PathBuf {
    PathBuf::from(format!("d/{k}.bin"))
}

/// The stated invariant, on the ledger's own entries, and its totals.
fn check(l: &Ledger, m: &BTreeMap<u64, M>, reserved: u64) {
    let mut lru_bytes = 0;
    for (k, e) in l.entries.iter() {
        let evictable = e.state == State::Live && e.block && e.opens == 0 && e.path.is_some() && !e.parked;
        assert_eq!(l.entries.lru_contains(k), evictable, "LRU membership of {k:?}: {e:?}");
        if evictable {
            lru_bytes += e.size;
        }
    }
    assert_eq!(l.evictable_bytes(), lru_bytes, "bytes in the LRU");
    assert_eq!(l.usage(), m.values().map(|x| x.size).sum::<u64>(), "usage");
    assert_eq!(l.counts().open_handles, m.values().map(|x| u64::from(x.opens)).sum::<u64>(), "open handles");
    assert_eq!(l.counts().block_files, m.values().filter(|x| x.block).count() as u64, "block files");
    assert_eq!(l.committed(), l.usage() + reserved, "committed");
}

fn apply(l: &mut Ledger, m: &mut BTreeMap<u64, M>, reserved: &mut u64, ev: Event, now: u32) {
    match ev {
        Event::Upsert { k, size, block, named } => {
            l.upsert(key(k), size, block, named.then(|| path(k)), now);
            let x = m.entry(k).or_default();
            x.size = size;
            x.block = block;
            x.named |= named;
        }
        Event::Pin(k) => {
            assert!(l.pin(key(k)).is_ok(), "nothing is being evicted between events");
            m.entry(k).or_default().opens += 1;
        }
        Event::Unpin(k) => {
            l.unpin(key(k));
            if let Some(x) = m.get_mut(&k).filter(|x| x.opens > 0) {
                x.opens -= 1;
                if x.opens == 0 && x.unlinked {
                    m.remove(&k);
                }
            }
        }
        Event::Touch(k) => {
            l.touch(key(k), now, 60);
        }
        Event::SetSize(k, s) => {
            l.set_size(key(k), s);
            if let Some(x) = m.get_mut(&k) {
                x.size = s;
            }
        }
        Event::Unlinked(k) => {
            l.mark_unlinked(key(k));
            if let Some(x) = m.get_mut(&k) {
                if x.opens == 0 {
                    m.remove(&k);
                } else {
                    x.unlinked = true;
                    x.named = false;
                }
            }
        }
        Event::Remove(k) => {
            l.remove(key(k));
            m.remove(&k);
        }
        Event::Evict(evict) => {
            let Some((victim, p)) = l.take_victim() else { return };
            let k = victim.ino - 10;
            let x = m.get(&k).expect("a victim is a known key");
            assert!(x.block && x.named && x.opens == 0 && !x.unlinked, "victim {k}: {x:?}");
            assert_eq!(p, path(k));
            if evict {
                assert!(l.begin_removal(victim, Removal::Block));
                assert_eq!(l.finish_removal(victim), x.size);
                m.remove(&k);
            } else {
                l.park(victim);
            }
        }
        Event::Reserve(b) => {
            if l.reserve(b).is_ok() {
                *reserved += b;
            }
        }
        Event::Release(b) => {
            let b = b.min(*reserved);
            l.release(b);
            *reserved -= b;
        }
    }
}

proptest! {
    #[test]
    fn the_ledger_keeps_its_invariant_under_random_events(events in prop::collection::vec(event(), 1..200)) {
        let mut l = Ledger::new(1 << 20);
        let mut m = BTreeMap::new();
        let mut reserved = 0;
        for (i, ev) in events.into_iter().enumerate() {
            apply(&mut l, &mut m, &mut reserved, ev, i as u32);
            check(&l, &m, reserved);
        }
    }
}
