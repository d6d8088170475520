//! Line charts as inline SVG, so a report is one self-contained file that opens offline.
//!
//! Written here rather than with `plotters`: plotters lays out text through a font backend
//! (`ttf`, which needs the system's fontconfig and FreeType, or `ab_glyph` with a font file
//! shipped in the crate), while a browser lays out SVG text by itself. These charts need axes,
//! ticks, lines, markers and a legend, nothing more. It knows nothing about experiments.

use std::fmt::Write as _;

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// (x, y) points; x is an index when the chart has categories.
    pub points: Vec<(f64, f64)>,
    /// Dashed line (peers, reference lines).
    pub dashed: bool,
}

/// A chart.
#[derive(Debug, Clone, Default)]
pub struct LineChart {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic x axis (positive x only).
    pub log_x: bool,
    /// Named x positions (0, 1, 2, …) instead of numbers.
    pub categories: Vec<String>,
    /// Named x ticks at numeric positions (e.g. `64 KB` at 65536).
    pub x_ticks: Vec<(f64, String)>,
    /// The lines.
    pub series: Vec<Series>,
}

const W: f64 = 580.0;
const H: f64 = 340.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 48.0;
const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
    "#bcbd22",
];

/// Marker shapes: circle, square, triangle, diamond.
const MARKERS: usize = 4;

/// Marker `shape` at (x, y) with `inner` (a `<title>`) inside.
fn marker(shape: usize, x: f64, y: f64, color: &str, inner: &str) -> String {
    match shape % MARKERS {
        0 => format!(r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}">{inner}</circle>"#),
        1 => format!(
            r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{color}">{inner}</rect>"#,
            x - 3.5,
            y - 3.5
        ),
        2 => format!(
            r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{color}">{inner}</polygon>"#,
            x,
            y - 4.5,
            x - 4.5,
            y + 3.5,
            x + 4.5,
            y + 3.5
        ),
        _ => format!(
            r#"<polygon points="{:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1}" fill="{color}">{inner}</polygon>"#,
            x,
            y - 4.5,
            x + 4.5,
            y,
            x,
            y + 4.5,
            x - 4.5,
            y
        ),
    }
}

/// Escapes text for XML and HTML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A number short enough for an axis tick.
fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Round tick positions covering [0, max].
fn nice_ticks(max: f64) -> Vec<f64> {
    if max <= 0.0 || !max.is_finite() {
        return vec![0.0, 1.0];
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let n = (max / step).ceil() as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

impl LineChart {
    /// The chart as an `<svg>` element.
    pub fn render(&self) -> String {
        let pts: Vec<(f64, f64)> = self.series.iter().flat_map(|s| s.points.iter().copied()).collect();
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" class="chart" role="img"><title>{t}</title><text x="{x}" y="20" font-size="14" font-weight="bold">{t}</text>"#,
            t = escape(&self.title),
            x = LEFT,
        );
        if pts.is_empty() {
            let _ = write!(
                svg,
                r#"<text x="{}" y="{}" font-size="12">no measured rows</text></svg>"#,
                LEFT,
                H / 2.0
            );
            return svg;
        }
        let fx = |x: f64| if self.log_x { x.max(1e-9).log10() } else { x };
        let (mut x0, mut x1) = if self.categories.is_empty() {
            pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(fx(p.0)), b.max(fx(p.0))))
        } else {
            (0.0, (self.categories.len().max(1) - 1) as f64)
        };
        if x1 - x0 < 1e-9 {
            x0 -= 0.5;
            x1 += 0.5;
        }
        let ymax = pts.iter().map(|p| p.1).fold(0.0, f64::max);
        let yticks = nice_ticks(ymax * 1.05);
        let ytop = *yticks.last().unwrap_or(&1.0);
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM;
        let sx = |x: f64| LEFT + (fx(x) - x0) / (x1 - x0) * pw;
        let sx_cat = |i: f64| LEFT + (i - x0) / (x1 - x0) * pw;
        let sy = |y: f64| TOP + ph - y / ytop * ph;
        // Axes and grid.
        let _ = write!(
            svg,
            r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>"##
        );
        for t in &yticks {
            let y = sy(*t);
            let _ = write!(
                svg,
                r##"<line x1="{LEFT}" x2="{x2}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{tx}" y="{ty:.1}" font-size="11" text-anchor="end">{l}</text>"##,
                x2 = LEFT + pw,
                tx = LEFT - 6.0,
                ty = y + 4.0,
                l = tick_label(*t)
            );
        }
        let xticks: Vec<(f64, String)> = if !self.categories.is_empty() {
            self.categories.iter().enumerate().map(|(i, c)| (sx_cat(i as f64), c.clone())).collect()
        } else if !self.x_ticks.is_empty() {
            self.x_ticks.iter().map(|(x, l)| (sx(*x), l.clone())).collect()
        } else {
            let mut xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
            xs.sort_by(f64::total_cmp);
            xs.dedup();
            if xs.len() > 12 && !self.log_x {
                // A long series (one point a second): round ticks (every 10 s or so), not a
                // label on every point.
                let (lo, hi) = (xs[0], xs[xs.len() - 1]);
                nice_ticks(hi - lo)
                    .into_iter()
                    .map(|t| lo + t)
                    .filter(|t| *t <= hi)
                    .map(|x| (sx(x), tick_label(x)))
                    .collect()
            } else {
                xs.into_iter().map(|x| (sx(x), tick_label(x))).collect()
            }
        };
        for (x, label) in &xticks {
            let _ = write!(
                svg,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{y1}" y2="{y2}" stroke="#999"/><text x="{x:.1}" y="{ty}" font-size="11" text-anchor="middle">{l}</text>"##,
                y1 = TOP + ph,
                y2 = TOP + ph + 4.0,
                ty = TOP + ph + 17.0,
                l = escape(label)
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{cx}" y="{by}" font-size="12" text-anchor="middle">{xl}</text><text x="14" y="{cy}" font-size="12" text-anchor="middle" transform="rotate(-90 14 {cy})">{yl}</text>"#,
            cx = LEFT + pw / 2.0,
            by = H - 8.0,
            xl = escape(&self.x_label),
            cy = TOP + ph / 2.0,
            yl = escape(&self.y_label),
        );
        // Lines, markers, legend. Colour and marker shape together tell up to 20 series apart
        // (10 colours × 4 shapes, which repeat together only every 20).
        for (i, s) in self.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let shape = i % MARKERS;
            let place = |p: &(f64, f64)| {
                let x = if self.categories.is_empty() { sx(p.0) } else { sx_cat(p.0) };
                (x, sy(p.1))
            };
            let path: Vec<String> = s
                .points
                .iter()
                .map(|p| {
                    let (x, y) = place(p);
                    format!("{x:.1},{y:.1}")
                })
                .collect();
            let dash = if s.dashed { r#" stroke-dasharray="6 4""# } else { "" };
            let _ = write!(
                svg,
                r#"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"#,
                path.join(" ")
            );
            for p in &s.points {
                let (x, y) = place(p);
                let title = format!("<title>{}: {}</title>", escape(&s.name), tick_label(p.1));
                svg.push_str(&marker(shape, x, y, color, &title));
            }
            let ly = TOP + 8.0 + i as f64 * 16.0;
            let lx = LEFT + pw + 10.0;
            let _ = write!(
                svg,
                r#"<line x1="{lx}" x2="{lx2}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="2"{dash}/>{m}<text x="{tx}" y="{ty}" font-size="11">{n}</text>"#,
                lx2 = lx + 18.0,
                m = marker(shape, lx + 9.0, ly, color, ""),
                tx = lx + 22.0,
                ty = ly + 4.0,
                n = escape(&s.name)
            );
        }
        svg.push_str("</svg>");
        svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_render_every_series_and_escape_text() {
        let chart = LineChart {
            title: "a < b".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: true,
            series: vec![
                Series { name: "one".into(), points: vec![(1.0, 2.0), (10.0, 4.0)], dashed: false },
                Series { name: "two & more".into(), points: vec![(1.0, 1.0), (100.0, 3.0)], dashed: true },
            ],
            ..LineChart::default()
        };
        let svg = chart.render();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &lt; b") && svg.contains("two &amp; more"));
        assert!(LineChart::default().render().contains("no measured rows"));
    }

    #[test]
    fn thirteen_series_each_get_their_own_colour_and_marker() {
        let combos: std::collections::BTreeSet<(&str, usize)> =
            (0..20).map(|i| (COLORS[i % COLORS.len()], i % MARKERS)).collect();
        assert_eq!(combos.len(), 20);
        for shape in 0..MARKERS {
            assert!(marker(shape, 1.0, 1.0, "#000", "").contains("fill=\"#000\""));
        }
    }

    #[test]
    fn a_long_series_gets_round_x_ticks_not_one_per_point() {
        let chart = LineChart {
            series: vec![Series {
                name: "ok".into(),
                points: (0..90).map(|s| (s as f64, 1.0)).collect(),
                dashed: false,
            }],
            ..LineChart::default()
        };
        let svg = chart.render();
        let ticks = svg.matches("text-anchor=\"middle\">").count() - 1; // less the axis label
        assert!((5..=12).contains(&ticks), "{ticks} x ticks");
        assert!(svg.contains(">80</text>") && !svg.contains(">81</text>"));
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_ticks(9.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(tick_label(150000.0), "150k");
    }
}
