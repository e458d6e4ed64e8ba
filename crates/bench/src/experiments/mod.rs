//! Every experiment `rangedb bench` knows, one module each.

use crate::Experiment;

mod machine;
mod nbd;
mod rask;

/// All experiments, in the order `rangedb bench all` runs them.
pub fn all() -> Vec<&'static dyn Experiment> {
    vec![&machine::Machine, &rask::RaskBench, &nbd::Nbd]
}

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static dyn Experiment> {
    all().into_iter().find(|e| e.name() == name)
}
