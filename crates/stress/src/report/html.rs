//! `--report PATH`: one HTML page (`PATH` itself when it names an `.html` file, else
//! `PATH/index.html`) with the run's machine and build, every scenario's lateness histogram
//! and timeline as inline SVG drawn with plotters' SVG backend and scaled to the page's
//! width, and the runtime's metrics.
//!
//! Without its `ttf`/`ab_glyph` features plotters uses a "naive" font that only estimates text
//! extents, and the SVG backend writes `<text>` elements that the browser renders: no system
//! fonts are read, so this works on headless machines.

use super::{fmt_bytes, fmt_count, fmt_us, ScenarioResult, SuiteResult};
use crate::stats::TimelineBin;
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const SIZE: (u32, u32) = (760, 300);

/// Where `--report target` writes: `target` itself when it ends in `.html`/`.htm`, else
/// `target/index.html`. With `run` (`--repeat`), `target/run-N/index.html`, or
/// `x-run-N.html` next to a file `x.html`.
pub fn page_path(target: &Path, run: Option<u32>) -> PathBuf {
    let is_file = target
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"));
    match (is_file, run) {
        (true, None) => target.to_path_buf(),
        (true, Some(n)) => {
            let stem = target
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("report");
            let ext = target
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("html");
            target.with_file_name(format!("{stem}-run-{n}.{ext}"))
        }
        (false, None) => target.join("index.html"),
        (false, Some(n)) => target.join(format!("run-{n}")).join("index.html"),
    }
}

/// Writes the page to `path`, creating its directory.
pub fn write(suite: &SuiteResult, path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, render(suite))
}

/// The page as a string.
pub fn render(suite: &SuiteResult) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gort stress report</title>\
         <style>body{{font-family:sans-serif;margin:2em;max-width:1600px}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}\
         .bad{{color:#b00}}.ok{{color:#070}}\
         .charts{{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:1em}}\
         .charts svg{{width:100%;height:auto}}\
         dl{{display:grid;grid-template-columns:max-content 1fr;gap:2px 1em}}dt{{font-weight:bold}}dd{{margin:0}}\
         .wide{{overflow-x:auto}}.wide td,.wide th{{padding:2px 4px}}caption{{text-align:left}}</style>\
         </head><body>\n<h1>gort stress report</h1>\n<p>seed <b>{}</b>, {} Ps per runtime, \
         requested duration {} ms{}: <b class=\"{}\">{}</b></p>\n",
        suite.seed,
        suite.procs,
        suite.duration_ms,
        suite.fault.as_deref().map_or(String::new(), |f| format!(", injected fault <b>{}</b>", esc(f))),
        if suite.passed { "ok" } else { "bad" },
        if suite.passed { "PASS".to_string() } else { format!("FAIL ({} violations)", suite.violations) },
    );
    h.push_str(&super::page_parts::host_header(suite.host.as_ref()));
    h.push_str(&summary_table(suite));
    h.push_str(super::page_parts::COLUMNS);
    for s in &suite.scenarios {
        h.push_str(&section(s));
    }
    h.push_str("</body></html>\n");
    h
}

fn summary_table(suite: &SuiteResult) -> String {
    let mut t = String::from(
        "<table><tr><th>scenario</th><th>ops</th><th>started</th><th>fired</th><th>stopped</th>\
         <th>reset</th><th>p50</th><th>p99</th><th>max</th><th>bound</th><th>peak RSS</th>\
         <th>CPU</th><th>violations</th></tr>\n",
    );
    for s in &suite.scenarios {
        let _ = writeln!(
            t,
            "<tr><td><a href=\"#{n}\">{n}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2}s</td>\
             <td class=\"{}\">{}</td></tr>",
            fmt_count(s.ops),
            fmt_count(s.timers.started),
            fmt_count(s.timers.fired),
            fmt_count(s.timers.stopped),
            fmt_count(s.timers.reset),
            fmt_us(s.lateness.p50_us),
            fmt_us(s.lateness.p99_us),
            fmt_us(s.lateness.max_us),
            s.bound
                .map_or("none".into(), |b| format!("{} / {}", fmt_us(b.p99_us), fmt_us(b.max_us))),
            fmt_bytes(s.memory.peak),
            (s.cpu_user_ms + s.cpu_system_ms) / 1e3,
            if s.violation_count == 0 { "ok" } else { "bad" },
            s.violation_count,
            n = esc(&s.name),
        );
    }
    t.push_str("</table>\n");
    t
}

/// One scenario's part of the page: its heading, summary, findings, metrics and charts.
fn section(s: &ScenarioResult) -> String {
    let mut h = String::new();
    let _ = writeln!(h, "<h2 id=\"{0}\">{0}</h2>", esc(&s.name));
    h.push_str(&summary(s));
    h.push_str(&findings(s));
    h.push_str(&super::page_parts::runtime_metrics(&s.metrics));
    if !s.metrics.is_empty() {
        let m: Vec<String> = s.metrics.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            h,
            "<p><small>metrics at end: {}</small></p>",
            esc(&m.join(", "))
        );
    }
    h.push_str(&charts(s));
    h
}

/// The scenario's wall time, lateness figures against its bound, and memory, in one line.
fn summary(s: &ScenarioResult) -> String {
    let bound = s.bound.map_or("none".into(), |b| {
        format!(
            "p99 &lt; {}, max &lt; {}",
            fmt_us(b.p99_us),
            fmt_us(b.max_us)
        )
    });
    format!(
        "<p>wall {:.0} ms; lateness n={} mean {:.0}µs p50 {} p90 {} p99 {} p99.9 {} max {} (bound: {}); \
         RSS baseline {} peak {} end {}</p>\n",
        s.wall_ms,
        s.lateness.count,
        s.lateness.mean_us,
        fmt_us(s.lateness.p50_us),
        fmt_us(s.lateness.p90_us),
        fmt_us(s.lateness.p99_us),
        fmt_us(s.lateness.p999_us),
        fmt_us(s.lateness.max_us),
        bound,
        fmt_bytes(s.memory.baseline),
        fmt_bytes(s.memory.peak),
        fmt_bytes(s.memory.end),
    )
}

/// The scenario's violations, warnings and notes, a list each (none when empty).
fn findings(s: &ScenarioResult) -> String {
    let mut h = String::new();
    for (class, label, items) in [
        ("bad", "violation", &s.violations),
        ("", "warning", &s.warnings),
        ("", "note", &s.notes),
    ] {
        if !items.is_empty() {
            h.push_str("<ul>");
            for i in items {
                let _ = write!(h, "<li class=\"{class}\">{label}: {}</li>", esc(i));
            }
            h.push_str("</ul>\n");
        }
    }
    h
}

/// The histogram and the timeline side by side; a chart that fails to draw says so instead.
fn charts(s: &ScenarioResult) -> String {
    let mut h = String::from("<div class=\"charts\">");
    for svg in [histogram_svg(s), timeline_svg(&s.name, &s.timeline)] {
        match svg {
            Ok(svg) => h.push_str(&fluid(&svg)),
            Err(e) => {
                let _ = write!(h, "<p class=\"bad\">chart failed: {}</p>", esc(&e));
            }
        }
    }
    h.push_str("</div>\n");
    h
}

/// The lateness histogram: log-scale lateness on x, samples per bucket on y.
pub fn histogram_svg(s: &ScenarioResult) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let caption = format!("{}: lateness histogram (n={})", s.name, s.lateness.count);
        if s.lateness.buckets.is_empty() {
            root.titled(&format!("{caption}: no samples"), ("sans-serif", 16))
                .map_err(|e| e.to_string())?;
        } else {
            draw_histogram(&root, s, caption)?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// Draws the non-empty histogram's axes, bars and the p99 bound (when it is on the axis).
fn draw_histogram(root: &Area<'_>, s: &ScenarioResult, caption: String) -> Result<(), String> {
    let b = &s.lateness.buckets;
    // Bucket 0 (under 1 µs) is drawn from 0.5 on the log axis.
    let left = |lo: u64| if lo == 0 { 0.5 } else { lo as f64 };
    let x_lo = if b[0].0 == 0 {
        0.5
    } else {
        b[0].0 as f64 * 0.9
    };
    let x_hi = (b[b.len() - 1].1 + 1) as f64 * 1.1;
    let y_hi = b.iter().map(|x| x.2).max().unwrap_or(1) as f64 * 1.1;
    let mut chart = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d((x_lo..x_hi).log_scale(), 0f64..y_hi)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("lateness (µs, log scale)")
        .y_desc("samples")
        // Whole-number ticks when a few samples make the axis short (else the labels,
        // rounded down to counts, repeat: 0 0 1 1 2).
        .y_labels((y_hi as usize + 1).clamp(2, 10))
        .x_label_formatter(&|v| fmt_us(*v as u64))
        .y_label_formatter(&|v| fmt_count(*v as u64))
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(b.iter().map(|&(lo, hi, n)| {
            Rectangle::new(
                [(left(lo), 0.0), ((hi + 1) as f64, n as f64)],
                BLUE.mix(0.7).filled(),
            )
        }))
        .map_err(|e| e.to_string())?;
    if let Some(bound) = s.bound {
        let x = bound.p99_us as f64;
        if x > x_lo && x < x_hi {
            chart
                .draw_series(LineSeries::new([(x, 0.0), (x, y_hi)], RED.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label("p99 bound");
        }
    }
    Ok(())
}

/// The timeline: per time bin, max and mean lateness (log scale) and, below, samples per bin.
pub fn timeline_svg(name: &str, bins: &[TimelineBin]) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, SIZE.1 + 160)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        if bins.is_empty() {
            root.titled(&format!("{name}: timeline: no samples"), ("sans-serif", 16))
                .map_err(|e| e.to_string())?;
            root.present().map_err(|e| e.to_string())?;
        } else {
            draw_timeline(&root, name, bins)?;
        }
    }
    Ok(svg)
}

/// A plotters drawing area on the SVG page.
type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Draws the two timeline panels onto `root` (which has room for both), on one time axis.
fn draw_timeline(root: &Area<'_>, name: &str, bins: &[TimelineBin]) -> Result<(), String> {
    let (top, bottom) = root.split_vertically(SIZE.1);
    let t_hi = bins[bins.len() - 1].t_ms.max(1.0) * 1.02;
    draw_lateness_panel(&top, name, bins, t_hi)?;
    draw_expiries_panel(&bottom, bins, t_hi)?;
    root.present().map_err(|e| e.to_string())
}

/// The upper panel: each bin's max and mean lateness (log scale), with a legend.
fn draw_lateness_panel(
    area: &Area<'_>,
    name: &str,
    bins: &[TimelineBin],
    t_hi: f64,
) -> Result<(), String> {
    let y_hi = bins.iter().map(|b| b.max_us).max().unwrap_or(1).max(10) as f64 * 1.5;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{name}: lateness over time"), ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t_hi, (1f64..y_hi).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .y_desc("lateness (µs)")
        .y_label_formatter(&|v| fmt_us(*v as u64))
        .draw()
        .map_err(|e| e.to_string())?;
    // Empty bins have no lateness and are left out; a log axis cannot show 0, so values are
    // drawn from 1 µs.
    let nonempty = || bins.iter().filter(|b| b.count > 0);
    let max: Vec<(f64, f64)> = nonempty()
        .map(|b| (b.t_ms, (b.max_us as f64).max(1.0)))
        .collect();
    let mean: Vec<(f64, f64)> = nonempty().map(|b| (b.t_ms, b.mean_us.max(1.0))).collect();
    for (label, color, points) in [("max", RED, max), ("mean", BLUE, mean)] {
        chart
            .draw_series(LineSeries::new(points, color))
            .map_err(|e| e.to_string())?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

/// The lower panel: how many timers expired in each bin.
fn draw_expiries_panel(area: &Area<'_>, bins: &[TimelineBin], t_hi: f64) -> Result<(), String> {
    let c_hi = bins.iter().map(|b| b.count).max().unwrap_or(1) as f64 * 1.1;
    let mut counts = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..t_hi, 0f64..c_hi)
        .map_err(|e| e.to_string())?;
    counts
        .configure_mesh()
        .x_desc("time since scenario start (ms)")
        .y_desc("expiries")
        .y_label_formatter(&|v| fmt_count(*v as u64))
        .draw()
        .map_err(|e| e.to_string())?;
    counts
        .draw_series(LineSeries::new(
            bins.iter().map(|b| (b.t_ms, b.count as f64)),
            GREEN.stroke_width(1),
        ))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Makes a plotters SVG scale with its container: its fixed `width`/`height` attributes
/// become a `viewBox` (plotters writes `<svg width=".." height=".." viewBox="..">`), and the
/// page's style gives it `width: 100%`.
fn fluid(svg: &str) -> String {
    let Some(end) = svg.find('>') else {
        return svg.to_string();
    };
    let (open, rest) = svg.split_at(end);
    let attr = |name: &str| {
        let key = format!(" {name}=\"");
        let at = open.find(&key)? + key.len();
        let len = open[at..].find('"')?;
        Some((at - key.len(), at + len + 1, open[at..at + len].to_string()))
    };
    let (Some(w), Some(hh)) = (attr("width"), attr("height")) else {
        return svg.to_string();
    };
    let mut tag = open.to_string();
    // Remove the later attribute first so that the earlier one's offsets stay valid.
    for (from, to, _) in if w.0 > hh.0 {
        [w.clone(), hh.clone()]
    } else {
        [hh.clone(), w.clone()]
    } {
        tag.replace_range(from..to, "");
    }
    if !tag.contains("viewBox") {
        tag.push_str(&format!(" viewBox=\"0 0 {} {}\"", w.2, hh.2));
    }
    tag.push_str(" preserveAspectRatio=\"xMidYMid meet\"");
    format!("{tag}{rest}")
}

/// Escapes text for HTML.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample;

    #[test]
    fn charts_are_svg_with_text_and_no_font_files() {
        let s = sample("timer-storm", &[]);
        let hist = histogram_svg(&s).unwrap();
        assert!(hist.starts_with("<svg") && hist.contains("<rect") && hist.contains("<text"));
        assert!(hist.contains("lateness histogram (n=4)"));
        let tl = timeline_svg(&s.name, &s.timeline).unwrap();
        assert!(tl.contains("<polyline") && tl.contains("lateness over time"));
    }

    #[test]
    fn empty_data_still_renders() {
        let mut s = sample("idle", &[]);
        s.lateness = Default::default();
        s.timeline.clear();
        assert!(histogram_svg(&s).unwrap().contains("no samples"));
        assert!(timeline_svg("idle", &[]).unwrap().contains("no samples"));
    }

    #[test]
    fn page_lists_scenarios_and_escapes_text() {
        let suite = SuiteResult::new(
            3,
            2,
            1000,
            None,
            vec![sample("a", &["x<y"]), sample("b", &[])],
        );
        let page = render(&suite);
        assert!(page.contains("<h2 id=\"a\">") && page.contains("<h2 id=\"b\">"));
        assert!(page.contains("x&lt;y") && !page.contains("x<y"));
        assert!(page.contains("a warning &lt;b&gt;"));
        assert_eq!(page.matches("<svg").count(), 4);
        assert!(page.contains("FAIL (1 violations)"));
    }

    #[test]
    fn report_path_is_the_file_or_the_folders_index() {
        let p = |s: &str, run| page_path(Path::new(s), run);
        assert_eq!(p("x.html", None), PathBuf::from("x.html"));
        assert_eq!(p("out/r.HTM", None), PathBuf::from("out/r.HTM"));
        assert_eq!(p("out", None), PathBuf::from("out/index.html"));
        assert_eq!(p("out.d/", None), PathBuf::from("out.d/index.html"));
        assert_eq!(p("out", Some(2)), PathBuf::from("out/run-2/index.html"));
        assert_eq!(p("d/x.html", Some(3)), PathBuf::from("d/x-run-3.html"));
    }

    #[test]
    fn charts_scale_to_the_page_width() {
        let svg = fluid(&histogram_svg(&sample("a", &[])).unwrap());
        let open = &svg[..svg.find('>').unwrap()];
        assert!(open.contains("viewBox=\"0 0 760 300\""), "{open}");
        assert!(
            !open.contains(" width=") && !open.contains(" height="),
            "{open}"
        );
        let page = render(&SuiteResult::new(1, 2, 1, None, vec![sample("a", &[])]));
        assert!(page.contains(".charts svg{width:100%"));
        for col in [
            "started", "fired", "stopped", "reset", "p99", "bound", "RSS", "CPU",
        ] {
            assert!(
                page.contains(&format!("<dt>{col}"))
                    || page.contains(&format!("/ {col}"))
                    || page.contains(&format!("<dt>peak {col}")),
                "{col}"
            );
        }
    }

    #[test]
    fn write_to_a_file_creates_its_directory() {
        let dir = std::env::temp_dir().join(format!("gort-stress-file-{}", std::process::id()));
        let path = page_path(&dir.join("sub").join("r.html"), None);
        write(
            &SuiteResult::new(3, 2, 1000, None, vec![sample("a", &[])]),
            &path,
        )
        .unwrap();
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("gort stress report"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn write_creates_the_directory() {
        let dir = std::env::temp_dir().join(format!("gort-stress-html-{}", std::process::id()));
        let suite = SuiteResult::new(3, 2, 1000, None, vec![sample("a", &[])]);
        let path = page_path(&dir.join("nested"), None);
        write(&suite, &path).unwrap();
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("gort stress report"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
