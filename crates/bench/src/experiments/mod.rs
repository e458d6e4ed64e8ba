//! Every experiment `rangedb bench` knows, one module each.

use crate::Experiment;

mod bptree;
mod flexfile;
mod flextree;
mod machine;
mod nbd;
mod rask;

/// All experiments, in the order `rangedb bench all` runs them.
pub fn all() -> Vec<&'static dyn Experiment> {
    vec![
        &machine::Machine,
        &nbd::Nbd,
        &rask::RaskBench,
        &flextree::FlexTreeBench,
        &flexfile::FlexFileBench,
        &bptree::BpTreeBench,
    ]
}

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static dyn Experiment> {
    all().into_iter().find(|e| e.name() == name)
}
