//! One plot per metric that moved across the runs: x is the run, y the value, a line per
//! case. Drawn by plotters into SVG text that the page embeds.

use std::{collections::BTreeMap, fmt::Write};

use gnomon_reports::CaseId;
use plotters::prelude::*;

use crate::{escape, RunColumn};

/// Values beyond ±this are drawn at it: an axis must have a span that is a finite number
/// (1.7e308 and 1.0 would make it infinite, and the axis labels would never end).
const AXIS_LIMIT: f64 = 1e300;

/// Where a value is drawn, if anywhere: finite values only, within the axis limit.
fn drawn(v: f64) -> Option<f64> {
    v.is_finite().then(|| v.clamp(-AXIS_LIMIT, AXIS_LIMIT))
}

/// Lines drawn per plot; the cases beyond it are named under the plot.
const MAX_SERIES: usize = 8;
const SIZE: (u32, u32) = (640, 320);

/// A metric's values per case, one slot per run.
struct Metric<'a> {
    unit: &'a str,
    series: BTreeMap<&'a CaseId, Vec<Option<f64>>>,
}

impl Metric<'_> {
    /// Whether any case's value differs between two runs that measured it.
    fn moved(&self) -> bool {
        self.series.values().any(|values| {
            let mut measured = values.iter().flatten().filter(|v| v.is_finite());
            measured.next().is_some_and(|first| measured.any(|v| v != first))
        })
    }

    fn range(&self) -> (f64, f64) {
        let values = self.series.values().flatten().flatten().copied().filter_map(drawn);
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 1e-6).max(1e-12);
        (lo - pad, hi + pad)
    }
}

pub fn metric_plots(runs: &[RunColumn]) -> String {
    let metrics = metrics(runs);
    let (moved, steady): (Vec<_>, Vec<_>) = metrics.iter().partition(|(_, m)| m.moved());
    let mut out = format!("<h2>Metrics over the runs</h2><p>{} metrics moved across the runs:</p>", moved.len());
    out.push_str("<div class=\"plots\">");
    for (name, metric) in moved {
        let failed = |e| format!("<p>plot of {} failed: {}</p>", escape(name), escape(&format!("{e}")));
        let svg = plot(name, metric, runs.len()).unwrap_or_else(failed);
        let hidden = metric.series.len().saturating_sub(MAX_SERIES);
        let more = if hidden > 0 { format!("; {hidden} more cases not drawn") } else { String::new() };
        let _ = write!(
            out,
            "<figure>{svg}<figcaption>{} ({}), {} cases{more}</figcaption></figure>",
            escape(name),
            escape(metric.unit),
            metric.series.len()
        );
    }
    out.push_str("</div>");
    if !steady.is_empty() {
        let names: Vec<_> = steady.iter().map(|(name, _)| format!("<code>{}</code>", escape(name))).collect();
        let _ = write!(out, "<p>Unchanged in every run that measured them: {}.</p>", names.join(", "));
    }
    out
}

fn metrics(runs: &[RunColumn]) -> BTreeMap<&str, Metric<'_>> {
    let mut metrics: BTreeMap<&str, Metric<'_>> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        for case in &run.report.cases {
            for (name, m) in &case.metrics {
                let metric =
                    metrics.entry(name.as_str()).or_insert_with(|| Metric { unit: &m.unit, series: BTreeMap::new() });
                metric.series.entry(&case.id).or_insert_with(|| vec![None; runs.len()])[i] = Some(m.value);
            }
        }
    }
    metrics
}

fn plot(name: &str, metric: &Metric<'_>, runs: usize) -> Result<String, String> {
    let mut svg = String::new();
    {
        let err = |e: &dyn std::fmt::Display| e.to_string();
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let (lo, hi) = metric.range();
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .caption(format!("{name} ({})", metric.unit), ("sans-serif", 16))
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0.5..runs as f64 + 0.5, lo..hi)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("run")
            .x_labels(runs.min(12))
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(|e| err(&e))?;
        for (i, (case, values)) in metric.series.iter().take(MAX_SERIES).enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let points: Vec<(f64, f64)> = values
                .iter()
                .enumerate()
                .filter_map(|(run, v)| v.and_then(drawn).map(|v| ((run + 1) as f64, v)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(case.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2)));
            chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled()))).map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font(("sans-serif", 10))
            .draw()
            .map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}
