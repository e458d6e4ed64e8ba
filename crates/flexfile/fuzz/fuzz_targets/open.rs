//! Opening a FlexFile whose tree and log files are arbitrary bytes (spliced into a valid file) must give a typed
//! error or a file that passes `check`, never a panic.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use flexfile::flexfile::{LOG_FILE, TREE_FILE};
use flexfile::{FlexFile, Options};
use libfuzzer_sys::fuzz_target;
use vfs::OpenMode;

fuzz_target!(|data: &[u8]| {
    let fs: Arc<dyn vfs::Fs> = Arc::new(vfs::MemFs::new());
    let dir = Path::new("/f");
    let Ok(mut f) = FlexFile::create(fs.clone(), dir, Options::tiny()) else { return };
    for i in 0..20u8 {
        let _ = f.insert((i as u64 * 13) % (f.size() + 1), &[i; 29]);
    }
    let _ = f.sync();
    drop(f);
    let (which, rest) = match data.split_first() {
        Some((w, r)) => (*w, r),
        None => return,
    };
    let name = if which & 1 == 0 { TREE_FILE } else { LOG_FILE };
    let Ok(file) = fs.open(&dir.join(name), OpenMode::ReadWrite) else { return };
    let off = (which as u64 >> 1) * 16;
    let _ = file.write_all_at(rest, off);
    drop(file);
    if let Ok(mut f) = FlexFile::open(fs, dir, Options::tiny()) {
        let _ = f.check(true);
        let mut buf = vec![0u8; f.size().min(1 << 20) as usize];
        let _ = f.read(0, &mut buf);
    }
});
