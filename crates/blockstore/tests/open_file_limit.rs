//! A volume whose data spans more data files than the process may hold open. Alone in its test binary because
//! it lowers the process's open-file limit (`RLIMIT_NOFILE`), which would starve tests beside it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use blockstore::{BLOCK_SIZE, Options, Store};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

#[test]
fn regression_more_data_files_than_the_open_file_limit_allows_keep_working() {
    // Every data file stayed open for the volume's lifetime: at the default 64 MiB per file and Linux's usual
    // limit of 1024, a volume holding about 60 GiB of data failed every write with "Too many open files".
    // Scaled down: 64 KiB files, a limit of 128, 300 files and more, then garbage collection over them.
    testkit::lower_open_file_limit(128);
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::OsFs::new());
    let opts = Options {
        data_file_bytes: 64 << 10,
        // One 64 KiB write per segment-cache flush, so one data file each.
        segment_cache_bytes: 64 << 10,
        journal_flush_bytes: 256 << 10,
        flush_in_background: false,
        gc_in_background: false,
        gc_live_percent: 0,
        ..Options::default()
    };
    let mut rng = SmallRng::seed_from_u64(testkit::seeds(&[21])[0]);
    let size = 32u64 << 20;
    let mut model = vec![0u8; size as usize];
    {
        let store = Store::open(fs.clone(), dir.path(), opts.clone()).unwrap();
        let v = store.create_volume("v", size).unwrap();
        // Incompressible 64 KiB writes, so each fills most of a data file.
        for i in 0..300u64 {
            let off = (i * 97 % (size / (64 << 10))) * (64 << 10);
            let data: Vec<u8> = (0..64 << 10).map(|_| rng.random()).collect();
            v.write(&data, off, false).unwrap_or_else(|e| panic!("write {i}: {e}"));
            model[off as usize..off as usize + data.len()].copy_from_slice(&data);
        }
        // Half of every file dies: garbage collection then copies from more files than may be open at once.
        for i in 0..300u64 {
            let off = (i * 97 % (size / (64 << 10))) * (64 << 10);
            let data: Vec<u8> = (0..32 << 10).map(|_| rng.random()).collect();
            v.write(&data, off, false).unwrap_or_else(|e| panic!("overwrite {i}: {e}"));
            model[off as usize..off as usize + data.len()].copy_from_slice(&data);
        }
        v.flush().unwrap();
        let files = v.info().unwrap().data_files.len();
        assert!(files > 128, "only {files} data files: the limit was never tested");
        // A round copies at most a data file's worth (here two half-live files), so many rounds.
        let mut removed = 0;
        for _ in 0..400 {
            let r = v.collect_garbage(60).unwrap();
            if r.files_removed == 0 {
                break;
            }
            removed += r.files_removed;
        }
        assert!(removed > 128, "garbage collection removed only {removed} files");
        let mut back = vec![0u8; size as usize];
        for (i, chunk) in back.chunks_mut(1 << 20).enumerate() {
            v.read(chunk, i as u64 * (1 << 20)).unwrap();
        }
        assert!(back == model, "reads before the reopen differ");
    }
    let store = Store::open(fs, dir.path(), opts).unwrap();
    let v = store.volume("v").unwrap();
    let mut block = vec![0u8; BLOCK_SIZE];
    for b in (0..size / BLOCK_SIZE as u64).step_by(7) {
        v.read(&mut block, b * BLOCK_SIZE as u64).unwrap();
        let at = (b * BLOCK_SIZE as u64) as usize;
        assert!(block[..] == model[at..at + BLOCK_SIZE], "block {b} after the reopen");
    }
}
