//! Counters of the global index, readable through [`crate::GlobalIndex::stats`].

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters (updated by `&self` lookups, so atomic).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub lookups: AtomicU64,
    pub estimator_checks: AtomicU64,
    pub estimator_positives: AtomicU64,
    pub estimator_false_positives: AtomicU64,
    pub index_probes: AtomicU64,
    pub covered: AtomicU64,
    pub nodes_read: AtomicU64,
    pub buffer_nodes_visited: AtomicU64,
    pub span_checks: AtomicU64,
    pub span_hits: AtomicU64,
}

fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// A snapshot of the index's statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Point-lookup validity checks (`check_entry`).
    pub lookups: u64,
    /// Estimator queries made by lookups.
    pub estimator_checks: u64,
    /// Estimator answers "maybe covered".
    pub estimator_positives: u64,
    /// Positives the index then found uncovered.
    pub estimator_false_positives: u64,
    /// Searches of the LSM-DRtree (buffer and levels).
    pub index_probes: u64,
    /// Probes that found the entry covered.
    pub covered: u64,
    /// DR-tree nodes read by point probes (divide by `index_probes` for nodes per lookup).
    pub nodes_read: u64,
    /// R-tree buffer nodes visited by point probes and span checks.
    pub buffer_nodes_visited: u64,
    /// Lookups that asked, before searching the tables, whether a buffered record deletes every version the
    /// tables may hold (`covers_span`).
    pub span_checks: u64,
    /// Span checks that answered yes: lookups answered without a table search.
    pub span_hits: u64,
    /// Range records inserted.
    pub records_inserted: u64,
    /// Buffer flushes.
    pub flushes: u64,
    /// Level compactions.
    pub compactions: u64,
    /// Bytes of DR-tree files written by flushes, compactions and GC.
    pub bytes_written: u64,
    /// GC runs.
    pub gc_runs: u64,
    /// Areas GC removed or clipped away (buffer and rewritten level).
    pub gc_areas_dropped: u64,
    /// Bytes GC rewrote.
    pub gc_bytes_rewritten: u64,
    /// Estimator RAEs GC dropped.
    pub gc_estimators_dropped: u64,
    /// Estimator rebuilds because the keys' common prefix (the projection prefix) shrank.
    pub estimator_rebuilds: u64,
    /// Bytes of live DR-tree files.
    pub index_file_bytes: u64,
    /// Bytes held by the R-tree buffer.
    pub buffer_bytes: u64,
    /// Bytes held by the estimator.
    pub estimator_bytes: u64,
    /// RAEs in the estimator chain.
    pub estimator_raes: u64,
    /// Areas per disk level.
    pub level_areas: Vec<u64>,
}

impl Stats {
    /// One JSON object with every field, for the engines' `stats` output.
    pub fn to_json(&self) -> String {
        let fields: [(&str, u64); 25] = [
            ("lookups", self.lookups),
            ("estimator_checks", self.estimator_checks),
            ("estimator_positives", self.estimator_positives),
            ("estimator_false_positives", self.estimator_false_positives),
            ("index_probes", self.index_probes),
            ("covered", self.covered),
            ("nodes_read", self.nodes_read),
            ("buffer_nodes_visited", self.buffer_nodes_visited),
            ("span_checks", self.span_checks),
            ("span_hits", self.span_hits),
            ("records_inserted", self.records_inserted),
            ("flushes", self.flushes),
            ("compactions", self.compactions),
            ("bytes_written", self.bytes_written),
            ("gc_runs", self.gc_runs),
            ("gc_areas_dropped", self.gc_areas_dropped),
            ("gc_bytes_rewritten", self.gc_bytes_rewritten),
            ("gc_estimators_dropped", self.gc_estimators_dropped),
            ("estimator_rebuilds", self.estimator_rebuilds),
            ("index_file_bytes", self.index_file_bytes),
            ("buffer_bytes", self.buffer_bytes),
            ("estimator_bytes", self.estimator_bytes),
            ("estimator_raes", self.estimator_raes),
            ("level_count", self.level_areas.len() as u64),
            ("areas", self.level_areas.iter().sum()),
        ];
        let mut s = String::from("{");
        for (k, v) in fields {
            s.push_str(&format!("\"{k}\":{v},"));
        }
        let levels: Vec<String> = self.level_areas.iter().map(u64::to_string).collect();
        s.push_str(&format!("\"level_areas\":[{}]}}", levels.join(",")));
        s
    }
}

impl Counters {
    pub(crate) fn fill(&self, s: &mut Stats) {
        s.lookups = get(&self.lookups);
        s.estimator_checks = get(&self.estimator_checks);
        s.estimator_positives = get(&self.estimator_positives);
        s.estimator_false_positives = get(&self.estimator_false_positives);
        s.index_probes = get(&self.index_probes);
        s.covered = get(&self.covered);
        s.nodes_read = get(&self.nodes_read);
        s.buffer_nodes_visited = get(&self.buffer_nodes_visited);
        s.span_checks = get(&self.span_checks);
        s.span_hits = get(&self.span_hits);
    }
}

pub(crate) fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names_every_counter() {
        let s = Stats { estimator_checks: 7, level_areas: vec![3, 4], ..Stats::default() };
        let j = s.to_json();
        assert!(j.starts_with("{\"lookups\":0,\"estimator_checks\":7,"), "{j}");
        assert!(j.ends_with("\"level_count\":2,\"areas\":7,\"level_areas\":[3,4]}"), "{j}");
        // Every field of the struct appears once (the Debug form lists them).
        let debug = format!("{s:?}");
        for field in debug.split(['{', ',']).filter_map(|f| f.split(':').next()).map(str::trim) {
            if !field.is_empty() && !field.starts_with("Stats") && !field.starts_with(char::is_numeric) {
                assert!(j.contains(&format!("\"{field}\":")), "{field} missing from {j}");
            }
        }
    }
}
