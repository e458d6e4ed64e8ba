//! Every experiment `rangedb bench` knows, one module each.

use crate::Experiment;

mod blockstore;
mod bptree;
mod flexdb;
mod flexfile;
mod flextree;
mod gloran;
mod gloran_index;
mod lsm;
mod machine;
mod nbd;
mod rangereduce;
mod rask;
mod records;
mod rocks;

/// All experiments, in the order `rangedb bench all` runs them.
pub fn all() -> Vec<&'static dyn Experiment> {
    vec![
        &machine::Machine,
        &rask::RaskBench,
        &bptree::BpTreeBench,
        &flextree::FlexTreeBench,
        &flexfile::FlexFileBench,
        &lsm::Lsm,
        &flexdb::FlexDbBench,
        &gloran_index::GloranIndex,
        &gloran::Gloran,
        // After every other experiment using RocksDB: it lowers RocksDB's thread pools for the process.
        &rangereduce::RangeReduceBench,
        &nbd::Nbd,
        &blockstore::BlockStoreBench,
    ]
}

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static dyn Experiment> {
    all().into_iter().find(|e| e.name() == name)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// The `--set` keys `src` reads: string literals passed to `ctx.setting` (with or without a turbofish),
    /// `ctx.setting_min`, `ctx.list` and `ctx.set.get`.
    fn keys_read(src: &str) -> BTreeSet<String> {
        let mut keys = BTreeSet::new();
        for call in ["ctx.setting", "ctx.setting_min", "ctx.list", "ctx.set.get"] {
            for (at, _) in src.match_indices(call) {
                let mut rest = &src[at + call.len()..];
                if let Some(r) = rest.strip_prefix("::<") {
                    let Some(end) = r.find(">(") else { continue };
                    rest = &r[end + 1..];
                }
                let Some(r) = rest.strip_prefix('(') else { continue };
                let Some(r) = r.trim_start().strip_prefix('"') else { continue };
                if let Some(end) = r.find('"') {
                    keys.insert(r[..end].to_string());
                }
            }
        }
        keys
    }

    /// Each experiment's `settings()` names exactly the keys its source reads, so the command line refuses
    /// exactly the keys no experiment would read.
    #[test]
    fn every_experiment_declares_the_settings_it_reads() {
        let sources = [
            ("machine", include_str!("machine.rs")),
            ("rask", include_str!("rask.rs")),
            ("bptree", include_str!("bptree.rs")),
            ("flextree", include_str!("flextree.rs")),
            ("flexfile", include_str!("flexfile.rs")),
            ("lsm", include_str!("lsm.rs")),
            ("flexdb", include_str!("flexdb.rs")),
            ("gloran_index", include_str!("gloran_index.rs")),
            ("gloran", include_str!("gloran.rs")),
            ("rangereduce", include_str!("rangereduce.rs")),
            ("nbd", include_str!("nbd.rs")),
            ("blockstore", include_str!("blockstore.rs")),
        ];
        assert_eq!(sources.len(), super::all().len());
        for (name, src) in sources {
            let read = keys_read(src);
            let e = super::find(name).unwrap();
            let declared: BTreeSet<String> = e.settings().iter().map(|s| s.to_string()).collect();
            assert_eq!(declared, read, "{name}: settings() against the keys its source reads");
        }
    }
}
