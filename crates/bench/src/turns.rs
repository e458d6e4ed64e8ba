//! Repeated runs in turns (`--set reps=N` of `rangereduce` and `gloran`): every system runs once per turn, so a
//! slow spell of this shared machine falls on all of them; a report gives each metric's median over the turns,
//! and the ratio of two systems per turn (they ran back to back), which cancels more of the machine's drift than
//! the ratio of their medians does.

/// One run's metrics, by name.
pub(crate) type Run = Vec<(String, f64)>;

/// The median of `xs` (the mean of the middle two for an even count); NaN when empty.
pub(crate) fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => xs[n / 2],
        _ => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// Per metric of the first run, the median over `runs`.
pub(crate) fn median_metrics(runs: &[Run]) -> Run {
    let Some(first) = runs.first() else { return Vec::new() };
    first
        .iter()
        .map(|(k, _)| (k.clone(), median(runs.iter().filter_map(|r| metric(r, k)).collect())))
        .collect()
}

/// Metric `name` of `run`.
pub(crate) fn metric(run: &[(String, f64)], name: &str) -> Option<f64> {
    run.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
}

/// Per turn, `f` of the two systems' runs of that turn (turns where it gives `None` are skipped).
pub(crate) fn per_turn(a: &[Run], b: &[Run], f: impl Fn(&Run, &Run) -> Option<f64>) -> Vec<f64> {
    a.iter().zip(b).filter_map(|(x, y)| f(x, y)).collect()
}

/// `values` to `decimals` places and their median, for a report's note: "0.912 0.955 1.020 (median 0.955)".
pub(crate) fn show(values: &[f64], decimals: usize) -> String {
    let shown: Vec<String> = values.iter().map(|r| format!("{r:.decimals$}")).collect();
    format!("{} (median {:.decimals$})", shown.join(" "), median(values.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pairs: &[(&str, f64)]) -> Run {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn medians_are_per_metric_and_average_the_middle_pair() {
        let odd = [
            run(&[("a", 3.0), ("b", 10.0)]),
            run(&[("a", 1.0), ("b", 30.0)]),
            run(&[("a", 2.0), ("b", 20.0)]),
        ];
        assert_eq!(median_metrics(&odd), run(&[("a", 2.0), ("b", 20.0)]));
        let even = [run(&[("a", 4.0)]), run(&[("a", 1.0)]), run(&[("a", 2.0)]), run(&[("a", 8.0)])];
        assert_eq!(median_metrics(&even), run(&[("a", 3.0)]));
        assert_eq!(median_metrics(&odd[..1]), odd[0]);
        assert!(median_metrics(&[]).is_empty());
        assert_eq!(metric(&odd[0], "b"), Some(10.0));
        assert_eq!(metric(&odd[0], "c"), None);
        assert!(median(Vec::new()).is_nan());
        assert_eq!(median(vec![0.9, 1.1]), 1.0);
    }

    #[test]
    fn per_turn_ratios_pair_the_runs_of_one_turn() {
        let a = [run(&[("x", 2.0)]), run(&[("x", 3.0)]), run(&[("y", 1.0)])];
        let b = [run(&[("x", 1.0)]), run(&[("x", 6.0)]), run(&[("x", 1.0)])];
        let r = per_turn(&a, &b, |x, y| Some(metric(x, "x")? / metric(y, "x")?));
        assert_eq!(r, [2.0, 0.5]);
        assert_eq!(show(&r, 3), "2.000 0.500 (median 1.250)");
        assert_eq!(show(&[-5.25], 1), "-5.2 (median -5.2)");
    }
}
