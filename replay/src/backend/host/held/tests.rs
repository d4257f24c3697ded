use super::*;

const MIB: u64 = 1 << 20;

/// A fresh private directory on /dev/shm, removed when dropped.
struct ShmDir(PathBuf);

impl ShmDir {
    fn new(tag: &str) -> ShmDir {
        let p = PathBuf::from(format!(
            "/dev/shm/rrstore-test-{}-{tag}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&p);
        fs::DirBuilder::new().mode(0o700).create(&p).unwrap();
        ShmDir(p)
    }

    fn cache(&self, limit: u64) -> HeldArenas {
        HeldArenas {
            limit,
            dir: Some(self.0.clone()),
        }
    }

    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

impl Drop for ShmDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn allocated(h: &Held) -> u64 {
    h.file().metadata().unwrap().blocks() * 512
}

#[test]
fn a_slot_is_allocated_locked_and_reused_once_released() {
    let d = ShmDir::new("reuse");
    let cache = d.cache(64 * MIB);
    let a = cache.acquire(4 * MIB).unwrap().unwrap();
    assert_eq!(a.file().metadata().unwrap().len(), 4 * MIB);
    assert_eq!(allocated(&a), 4 * MIB, "every page allocated up front");
    // Held: a second acquisition gets another slot.
    let b = cache.acquire(4 * MIB).unwrap().unwrap();
    assert_ne!(a.path(), b.path());
    let u = cache.usage().unwrap().unwrap();
    assert_eq!((u.slots, u.bytes, u.in_use), (2, 8 * MIB, 2));
    let first = a.path().to_path_buf();
    drop(a);
    // Released: handed out again, with what it held still there.
    let c = cache.acquire(2 * MIB).unwrap().unwrap();
    assert_eq!(c.path(), first);
    assert_eq!(c.file().metadata().unwrap().len(), 4 * MIB);
    drop((b, c));
    assert_eq!(cache.usage().unwrap().unwrap().in_use, 0);
}

#[test]
fn a_released_slot_grows_for_a_larger_arena() {
    let d = ShmDir::new("grow");
    let cache = d.cache(64 * MIB);
    drop(cache.acquire(MIB).unwrap().unwrap());
    let h = cache.acquire(3 * MIB).unwrap().unwrap();
    assert_eq!(d.names(), ["arena-0"]);
    assert_eq!(allocated(&h), 3 * MIB);
}

#[test]
fn the_limit_counts_held_slots_and_makes_room_by_removing_free_ones() {
    let d = ShmDir::new("limit");
    let cache = d.cache(6 * MIB);
    let a = cache.acquire(4 * MIB).unwrap().unwrap();
    // 4 + 4 > 6 while `a` is held: fresh memory for this one.
    assert!(cache.acquire(4 * MIB).unwrap().is_none());
    assert!(cache.acquire(7 * MIB).unwrap().is_none());
    let b = cache.acquire(2 * MIB).unwrap().unwrap();
    assert_eq!(d.names(), ["arena-0", "arena-1"]);
    drop(b);
    // `a` still held; the free 2 MiB slot is too small and the limit
    // leaves no room to grow it past 2 MiB.
    assert!(cache.acquire(3 * MIB).unwrap().is_none());
    drop(a);
    // Both free: the 4 MiB one grows to 5, the other is removed for room.
    let c = cache.acquire(5 * MIB).unwrap().unwrap();
    assert_eq!(d.names(), ["arena-0"]);
    assert_eq!(allocated(&c), 5 * MIB);
}

#[test]
fn a_lower_limit_cuts_slots_back_and_zero_removes_every_free_one() {
    let d = ShmDir::new("lower");
    let big = d.cache(64 * MIB).acquire(8 * MIB).unwrap().unwrap();
    let held = d.cache(64 * MIB).acquire(MIB).unwrap().unwrap();
    drop(big);
    // Limit 4 MiB: the free 8 MiB slot is cut back to what is asked.
    let h = d.cache(4 * MIB).acquire(2 * MIB).unwrap().unwrap();
    assert_eq!(h.file().metadata().unwrap().len(), 2 * MIB);
    assert_eq!(allocated(&h), 2 * MIB, "the pages past the cut are freed");
    drop(h);
    // Off: every slot nobody holds goes; the held one stays.
    assert!(d.cache(0).acquire(MIB).unwrap().is_none());
    assert_eq!(d.names().len(), 1);
    assert!(held.path().exists());
    drop(held);
    assert!(d.cache(0).acquire(MIB).unwrap().is_none());
    assert!(d.names().is_empty());
}

#[test]
fn off_does_not_create_the_directory() {
    let d = ShmDir::new("off");
    let missing = d.0.join("not-there");
    let cache = HeldArenas {
        limit: 0,
        dir: Some(missing.clone()),
    };
    assert!(cache.acquire(MIB).unwrap().is_none());
    assert!(cache.usage().unwrap().is_none());
    assert!(!missing.exists());
}

#[test]
fn a_directory_that_is_not_private_or_not_in_memory_is_refused() {
    let d = ShmDir::new("private");
    let open = d.0.join("open");
    fs::DirBuilder::new().mode(0o755).create(&open).unwrap();
    fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cache = |dir: &Path| HeldArenas {
        limit: 64 * MIB,
        dir: Some(dir.to_path_buf()),
    };
    let err = cache(&open).acquire(MIB).unwrap_err();
    assert!(
        matches!(err, HeldError::NotPrivate { mode: 0o755, .. }),
        "{err}"
    );
    assert!(err.to_string().contains(DIR_ENV), "{err}");
    let link = d.0.join("link");
    std::os::unix::fs::symlink(&d.0, &link).unwrap();
    let err = cache(&link).acquire(MIB).unwrap_err();
    assert!(
        matches!(err, HeldError::NotPrivate { link: true, .. }),
        "{err}"
    );
    // The build directory is on a disk here (in CI, a clean clone's).
    let disk = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target-held-test");
    if !in_memory(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap() {
        let _ = fs::remove_dir_all(&disk);
        let err = cache(&disk).acquire(MIB).unwrap_err();
        let _ = fs::remove_dir_all(&disk);
        assert!(matches!(err, HeldError::NotMemory { .. }), "{err}");
    }
}

#[test]
fn files_other_than_slots_are_left_alone() {
    let d = ShmDir::new("others");
    fs::write(d.0.join("notes"), b"mine").unwrap();
    drop(d.cache(8 * MIB).acquire(MIB).unwrap().unwrap());
    assert!(d.cache(0).acquire(MIB).unwrap().is_none());
    assert_eq!(d.names(), ["notes"]);
}

#[test]
fn the_default_directory_is_an_rrstore_arenas_one() {
    // The environment's RRSTORE_ARENA_CACHE_DIR is the CLI's to read (it
    // sets HeldArenas::dir); the library's default ignores it.
    let d = default_dir().unwrap();
    let name = d.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("rrstore-arenas"), "{}", d.display());
}
