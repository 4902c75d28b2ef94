//! The HTML report: one self-contained page (inline SVG, CSS and a few lines
//! of script; nothing fetched) with the summary, cost over time, migrations
//! over time and utilisation per cluster; where the scenario gives carbon
//! intensity, emissions beside cost in a table and over time.

use std::fmt::Write as _;

use super::report::{Report, RunResult};

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 260.0;
const PAD_LEFT: f64 = 64.0;
const PAD_RIGHT: f64 = 16.0;
const PAD_TOP: f64 = 16.0;
const PAD_BOTTOM: f64 = 36.0;
const COLORS: [&str; 10] = [
    "#444444", "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22",
];
/// Most migrations listed in the table.
const MAX_EVENTS: usize = 500;

/// Renders the report as one HTML page.
pub fn render(report: &Report) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let title = format!("Ferry simulation: {}", escape(&report.scenario));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>{CSS}</style></head>\n<body>\n<h1>{title}</h1>\n"
    );
    let _ = writeln!(
        out,
        "<p>Seed {}, start {}, {} steps of {}s{}; each chart point averages {} step(s).</p>",
        report.seed,
        escape(&report.start),
        report.steps_simulated,
        report.step_seconds,
        if report.complete {
            ""
        } else {
            " (stopped early)"
        },
        report.bucket_steps
    );
    out.push_str("<h2>Summary</h2>\n<pre class=\"summary\">");
    out.push_str(&escape(&report.summary_table()));
    out.push_str("</pre>\n");
    cost_and_emissions(&mut out, report);
    optimum(&mut out, report);

    let runs: Vec<&RunResult> = std::iter::once(&report.baseline)
        .chain(&report.policies)
        .collect();
    let times: Vec<f64> = (0..report.baseline.cost_per_hour.len())
        .map(|k| (k * report.bucket_steps) as f64 * report.step_seconds as f64 / 3600.0)
        .collect();

    out.push_str("<h2>Cost per hour</h2>\n");
    let cost: Vec<Line<'_>> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| Line {
            name: &r.name,
            values: r.cost_per_hour.clone(),
            color: COLORS[i % COLORS.len()],
        })
        .collect();
    out.push_str(&chart("cost", &times, &cost, None));

    // Every run has the series when the scenario has carbon intensity.
    let emissions: Vec<Line<'_>> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            Some(Line {
                name: &r.name,
                values: r.emissions_per_hour.clone()?,
                color: COLORS[i % COLORS.len()],
            })
        })
        .collect();
    if !emissions.is_empty() {
        out.push_str("<h2>CO2 per hour (kg)</h2>\n");
        out.push_str(&chart("emissions", &times, &emissions, None));
    }

    out.push_str("<h2>Migrations started</h2>\n");
    let moves: Vec<Line<'_>> = report
        .policies
        .iter()
        .enumerate()
        .map(|(i, r)| Line {
            name: &r.name,
            values: r.migrations_per_bucket.iter().map(|&m| m as f64).collect(),
            color: COLORS[(i + 1) % COLORS.len()],
        })
        .collect();
    out.push_str(&chart("migrations", &times, &moves, None));

    out.push_str("<h2>CPU requested over allocatable, per cluster</h2>\n");
    for r in &runs {
        let _ = writeln!(out, "<h3>{}</h3>", escape(&r.name));
        let lines: Vec<Line<'_>> = r
            .utilization
            .iter()
            .enumerate()
            .map(|(i, c)| Line {
                name: &c.cluster,
                values: c.cpu.iter().map(|v| v * 100.0).collect(),
                color: COLORS[(i + 1) % COLORS.len()],
            })
            .collect();
        out.push_str(&chart("utilization", &times, &lines, Some(100.0)));
    }

    out.push_str("<h2>Migrations</h2>\n");
    for r in &report.policies {
        let _ = writeln!(
            out,
            "<h3>{} ({} moves)</h3>",
            escape(&r.name),
            r.events.len()
        );
        if r.events.is_empty() {
            continue;
        }
        out.push_str("<table><tr><th>time (h)</th><th>workload</th><th>from</th><th>to</th><th>claimed saving/h</th><th>outcome</th></tr>\n");
        for e in r.events.iter().take(MAX_EVENTS) {
            let _ = writeln!(
                out,
                "<tr><td>{:.2}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{:.4}</td><td>{:?}</td></tr>",
                e.step as f64 * report.step_seconds as f64 / 3600.0,
                escape(&e.namespace),
                escape(&e.name),
                escape(&e.from),
                escape(&e.to),
                e.hourly_savings,
                e.outcome
            );
        }
        out.push_str("</table>\n");
        if r.events.len() > MAX_EVENTS {
            let _ = writeln!(
                out,
                "<p>… and {} more (see the JSON).</p>",
                r.events.len() - MAX_EVENTS
            );
        }
    }
    out.push_str("<div id=\"tip\"></div>\n<script>");
    out.push_str(SCRIPT);
    out.push_str("</script>\n</body></html>\n");
    out
}

/// Each run's cost beside its emissions, and the emissions' change against
/// the baseline; nothing when the scenario gives no carbon intensity.
fn cost_and_emissions(out: &mut String, report: &Report) {
    let Some(baseline_kg) = report.baseline.emissions_kg else {
        return;
    };
    out.push_str(
        "<h2>Cost and emissions</h2>\n<table class=\"emissions\"><tr><th>run</th><th>total cost</th><th>saving</th><th>CO2 kg</th><th>CO2 against baseline</th></tr>\n",
    );
    for r in std::iter::once(&report.baseline).chain(&report.policies) {
        let (kg, change) = match r.emissions_kg {
            Some(kg) if baseline_kg > 0.0 => (
                format!("{kg:.1}"),
                format!("{:+.1}%", (kg - baseline_kg) / baseline_kg * 100.0),
            ),
            Some(kg) => (format!("{kg:.1}"), "-".to_owned()),
            None => ("-".to_owned(), "-".to_owned()),
        };
        let _ = writeln!(
            out,
            "<tr data-run=\"{name}\"><td>{name}</td><td>{:.2}</td><td>{:.2}</td><td class=\"co2\">{kg}</td><td>{change}</td></tr>",
            r.total_cost(),
            r.saving,
            name = escape(&r.name),
        );
    }
    out.push_str("</table>\n");
}

/// What the hindsight optimum is, and each policy's share of it.
fn optimum(out: &mut String, report: &Report) {
    let o = &report.optimal;
    let kind = if o.exact {
        "exact: no cluster's capacity binds"
    } else {
        "an upper bound: capacity binds, so it is the optimum without capacity"
    };
    let _ = writeln!(
        out,
        "<h2>Hindsight optimum</h2>\n<p class=\"optimal\">With every future price known, the workloads could have saved {:.2}, in {} migration(s) ({kind}).</p>",
        o.saving, o.migrations
    );
    out.push_str(
        "<table class=\"share\"><tr><th>policy</th><th>saving</th><th>share of optimal</th></tr>\n",
    );
    for r in &report.policies {
        let share = r
            .share_of_optimal
            .map_or_else(|| "-".to_owned(), |s| format!("{:.1}%", s * 100.0));
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{:.2}</td><td>{share}</td></tr>",
            escape(&r.name),
            r.saving
        );
    }
    out.push_str("</table>\n");
}

struct Line<'a> {
    name: &'a str,
    values: Vec<f64>,
    color: &'a str,
}

fn chart(kind: &str, times: &[f64], lines: &[Line<'_>], reference: Option<f64>) -> String {
    let max_y = lines
        .iter()
        .flat_map(|l| l.values.iter().copied())
        .chain(reference)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.05;
    let max_x = times.last().copied().unwrap_or(0.0).max(1e-9);
    let x = |t: f64| PAD_LEFT + t / max_x * (WIDTH - PAD_LEFT - PAD_RIGHT);
    let y = |v: f64| HEIGHT - PAD_BOTTOM - v / max_y * (HEIGHT - PAD_TOP - PAD_BOTTOM);
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<figure><svg class=\"chart\" data-kind=\"{kind}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" xmlns=\"http://www.w3.org/2000/svg\" data-max-x=\"{max_x}\" data-max-y=\"{max_y}\">"
    );
    // Axes and grid: five ticks each way.
    for i in 0..=4 {
        let v = max_y * i as f64 / 4.0;
        let (x2, yv, lx, ly, label) = (
            WIDTH - PAD_RIGHT,
            y(v),
            PAD_LEFT - 6.0,
            y(v) + 4.0,
            short(v),
        );
        let _ = write!(
            svg,
            "<line class=\"grid\" x1=\"{PAD_LEFT}\" x2=\"{x2}\" y1=\"{yv:.1}\" y2=\"{yv:.1}\"/><text x=\"{lx}\" y=\"{ly:.1}\" text-anchor=\"end\">{label}</text>"
        );
        let t = max_x * i as f64 / 4.0;
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}h</text>",
            x(t),
            HEIGHT - PAD_BOTTOM + 18.0,
            short(t)
        );
    }
    if let Some(r) = reference {
        let (x2, yr) = (WIDTH - PAD_RIGHT, y(r));
        let _ = write!(
            svg,
            "<line class=\"limit\" x1=\"{PAD_LEFT}\" x2=\"{x2}\" y1=\"{yr:.1}\" y2=\"{yr:.1}\"/>"
        );
    }
    for line in lines {
        let mut points = String::with_capacity(line.values.len() * 14);
        for (t, v) in times.iter().zip(&line.values) {
            let _ = write!(points, "{:.1},{:.1} ", x(*t), y(*v));
        }
        let _ = write!(
            svg,
            "<polyline class=\"series\" data-name=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>",
            escape(line.name),
            line.color,
            points.trim_end()
        );
    }
    svg.push_str("</svg><figcaption>");
    for line in lines {
        let _ = write!(
            svg,
            "<span class=\"key\"><span class=\"swatch\" style=\"background:{}\"></span>{}</span>",
            line.color,
            escape(line.name)
        );
    }
    svg.push_str("</figcaption></figure>\n");
    svg
}

fn short(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:2em;max-width:960px;color:#222}\
svg.chart{background:#fafafa;border:1px solid #ddd}svg text{font-size:11px;fill:#555}\
line.grid{stroke:#e4e4e4}line.limit{stroke:#d62728;stroke-dasharray:4 3}\
figure{margin:0 0 1.5em}figcaption{font-size:13px}.key{margin-right:1em}\
.swatch{display:inline-block;width:12px;height:3px;margin-right:4px;vertical-align:middle}\
pre.summary{background:#f4f4f4;padding:1em;overflow-x:auto}\
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:2px 6px}\
#tip{position:fixed;pointer-events:none;background:#fff;border:1px solid #999;padding:2px 6px;font-size:12px;display:none}";

/// Marks the page rendered (tests read `data-rendered` from the DOM) and
/// shows the value under the pointer.
const SCRIPT: &str = r#"
(function () {
  var charts = document.querySelectorAll('svg.chart');
  var tip = document.getElementById('tip');
  charts.forEach(function (svg) {
    var lines = svg.querySelectorAll('polyline.series');
    svg.setAttribute('data-series', String(lines.length));
    svg.addEventListener('mousemove', function (ev) {
      var box = svg.getBoundingClientRect();
      var px = (ev.clientX - box.left) * 900 / box.width;
      var maxX = parseFloat(svg.getAttribute('data-max-x'));
      var maxY = parseFloat(svg.getAttribute('data-max-y'));
      var parts = [];
      lines.forEach(function (l) {
        var pts = l.getAttribute('points').split(' ');
        var best = null, dist = Infinity;
        pts.forEach(function (p) {
          var xy = p.split(',');
          var d = Math.abs(parseFloat(xy[0]) - px);
          if (d < dist) { dist = d; best = xy; }
        });
        if (best) {
          var v = (260 - 36 - parseFloat(best[1])) / (260 - 16 - 36) * maxY;
          var h = (parseFloat(best[0]) - 64) / (900 - 64 - 16) * maxX;
          parts.push(l.getAttribute('data-name') + ': ' + v.toPrecision(4) + ' @ ' + h.toFixed(1) + 'h');
        }
      });
      tip.textContent = parts.join(' | ');
      tip.style.left = (ev.clientX + 12) + 'px';
      tip.style.top = (ev.clientY + 12) + 'px';
      tip.style.display = 'block';
    });
    svg.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
  });
  document.body.setAttribute('data-rendered', String(charts.length));
})();
"#;
