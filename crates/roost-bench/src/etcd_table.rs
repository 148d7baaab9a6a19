//! The one table of the etcd comparison: etcd, Roost and Roost ÷ etcd for every client count
//! (the medians over `--repeat` measurements, with the range of the per-repeat throughput
//! ratios) and for failover.

use crate::etcd::EtcdArgs;
use crate::etcd_failover::Failover;
use crate::etcd_points::Point;
use crate::stats::{median, ms};

/// One system's medians at one client count.
#[derive(Debug, PartialEq)]
struct Medians {
    rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    cpu_ms: f64,
}

/// The medians of `system`'s measurements of point `point`, if it was measured.
fn medians(points: &[Point], system: &str, point: usize) -> Option<Medians> {
    let of: Vec<&Point> = points
        .iter()
        .filter(|p| p.system == system && p.point == point)
        .collect();
    if of.is_empty() {
        return None;
    }
    let m = |f: fn(&Point) -> f64| median(of.iter().map(|p| f(p)).collect());
    Some(Medians {
        rate: m(|p| p.rate),
        p50_ms: m(|p| ms(p.p50)),
        p99_ms: m(|p| ms(p.p99)),
        cpu_ms: m(|p| p.server_cpu_ms_per_checkout),
    })
}

/// The lowest and highest Roost ÷ etcd throughput over the repeats of point `point`, each
/// repeat's Roost measurement against the same repeat's etcd one.
fn ratio_range(points: &[Point], point: usize) -> Option<(f64, f64)> {
    let rate = |system: &str, repeat: u64| {
        points
            .iter()
            .find(|p| p.system == system && p.point == point && p.repeat == repeat)
            .map(|p| p.rate)
    };
    let ratios: Vec<f64> = points
        .iter()
        .filter(|p| p.system == "roost" && p.point == point)
        .filter_map(|r| {
            let etcd = rate("etcd", r.repeat)?;
            (etcd > 0.0).then(|| r.rate / etcd)
        })
        .collect();
    let min = ratios.iter().copied().reduce(f64::min)?;
    let max = ratios.iter().copied().reduce(f64::max)?;
    Some((min, max))
}

fn ratio(r: f64, e: f64) -> String {
    if e > 0.0 {
        format!("{:.2}", r / e)
    } else {
        "-".into()
    }
}

pub(crate) fn print_comparison(args: &EtcdArgs, points: &[Point], failovers: &[Failover]) {
    if !args.systems.iter().any(|s| s == "etcd") || !args.systems.iter().any(|s| s == "roost") {
        return;
    }
    let fo = |s: &str| failovers.iter().find(|f| f.system == s);
    println!();
    println!(
        "3 nodes each on loopback, {} s per point (+{} s warm-up){}, clients on one HTTP/2 \
         connection to the leader; {}; etcd lease {}; {}; ratio = Roost / etcd",
        args.seconds,
        args.warmup_sec,
        if args.repeat > 1 {
            format!(
                ", each point measured {} times (medians; the throughput ratio's range over the \
                 repeats in brackets)",
                args.repeat
            )
        } else {
            String::new()
        },
        args.tls_label(),
        if args.lease_per_checkout {
            "per checkout"
        } else {
            "per client"
        },
        args.threads_label()
    );
    println!();
    println!("| measure | etcd | Roost | Roost / etcd |");
    println!("|---|--:|--:|--:|");
    for (n, &c) in args.clients.iter().enumerate() {
        let (Some(e), Some(r)) = (medians(points, "etcd", n), medians(points, "roost", n)) else {
            continue;
        };
        let plural = if c == 1 { "client" } else { "clients" };
        let range = match ratio_range(points, n) {
            Some((lo, hi)) if args.repeat > 1 => format!(" ({lo:.2}-{hi:.2})"),
            _ => String::new(),
        };
        println!(
            "| checkouts/s, {c} {plural} | {:.0} | {:.0} | {}{range} |",
            e.rate,
            r.rate,
            ratio(r.rate, e.rate)
        );
        println!(
            "| p50 / p99 ms, {c} {plural} | {:.2} / {:.2} | {:.2} / {:.2} | {} / {} |",
            e.p50_ms,
            e.p99_ms,
            r.p50_ms,
            r.p99_ms,
            ratio(r.p50_ms, e.p50_ms),
            ratio(r.p99_ms, e.p99_ms)
        );
        println!(
            "| server CPU ms per checkout + release, {c} {plural} | {:.2} | {:.2} | {} |",
            e.cpu_ms,
            r.cpu_ms,
            ratio(r.cpu_ms, e.cpu_ms)
        );
    }
    if let (Some(e), Some(r)) = (fo("etcd"), fo("roost")) {
        println!(
            "| failover p50 / max ms ({} trials, kill -9 of the leader to the first acknowledged checkout) | {:.0} / {:.0} | {:.0} / {:.0} | {} / {} |",
            e.samples.len(),
            e.p(50.0),
            e.max(),
            r.p(50.0),
            r.max(),
            ratio(r.p(50.0), e.p(50.0)),
            ratio(r.max(), e.max())
        );
    }
    let errors: u64 = points.iter().map(|p| p.errors).sum();
    if errors > 0 {
        println!();
        println!("({errors} failed calls in total; see the per-point lines)");
    }
}

#[cfg(test)]
mod tests {
    use super::{medians, ratio_range};
    use crate::etcd_points::Point;

    fn point(system: &str, point: usize, repeat: u64, rate: f64) -> Point {
        Point {
            system: system.into(),
            clients: 64,
            point,
            repeat,
            rate,
            checkouts: 0,
            p50: 1000,
            p90: 2000,
            p99: 3000,
            max: 4000,
            errors: 0,
            server_cpu_ms_per_checkout: 0.3,
            leader_cpu_pct: 0.0,
            machine_busy_pct: 0.0,
            writes_per_entry: None,
            term_changes: None,
        }
    }

    /// A repeated point is summarised by its medians, and each repeat's ratio pairs Roost with
    /// etcd of the same repeat, not with another point's or another repeat's.
    #[test]
    fn repeats_give_medians_and_ratios_of_the_same_repeat() {
        let points = vec![
            point("etcd", 0, 0, 100.0),
            point("roost", 0, 0, 90.0),
            point("roost", 0, 1, 120.0),
            point("etcd", 0, 1, 100.0),
            point("etcd", 0, 2, 200.0),
            point("roost", 0, 2, 100.0),
            point("etcd", 1, 0, 1000.0),
            point("roost", 1, 0, 10.0),
        ];
        let roost = medians(&points, "roost", 0).expect("measured");
        assert_eq!(roost.rate, 100.0);
        assert_eq!(medians(&points, "etcd", 0).expect("measured").rate, 100.0);
        assert_eq!(ratio_range(&points, 0), Some((0.5, 1.2)));
        assert_eq!(medians(&points, "roost", 2), None);
    }
}
