//! Every experiment `rangedb bench` knows, one module each.

use crate::Experiment;

mod bptree;
mod flexfile;
mod flextree;
mod gloran_index;
mod lsm;
mod machine;
mod nbd;
mod rangereduce;
mod rask;

/// All experiments, in the order `rangedb bench all` runs them.
pub fn all() -> Vec<&'static dyn Experiment> {
    vec![
        &machine::Machine,
        &rask::RaskBench,
        &bptree::BpTreeBench,
        &flextree::FlexTreeBench,
        &flexfile::FlexFileBench,
        &lsm::Lsm,
        &rangereduce::RangeReduceBench,
        &gloran_index::GloranIndex,
        &nbd::Nbd,
    ]
}

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static dyn Experiment> {
    all().into_iter().find(|e| e.name() == name)
}
