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
