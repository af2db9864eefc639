//! How fast a template replays on the device: its launches timed by CUDA events, each
//! from the loaded state, after a warm-up. The exporter records it in the capturing
//! process (the kit) and qualification measures a restored template with this same
//! function, after the same resets: both put back, before each launch, the writable
//! buffers the template's first launch changed ([`super::Scoping`]). The reset runs before
//! each launch's first event, outside the timing, but what its copies evict from L2 the
//! launch then reads again from memory: while the kit put back its template's buffers and
//! replay every writable buffer of the core, restored templates of a few tens of µs timed
//! 3-6 µs slower than their originals.

use super::{stage::timed, LoadedState, Restored, Scope, Scoping};
use crate::{
    cuda::{Context, GraphExec, Stream},
    errors::ReplayError,
    progress::{Progress, Unit},
};
use gnomon_format::Speed;

/// Launches an exporter times: the fewest a recorded speed may be the median of.
pub const TIMED_LAUNCHES: u32 = *gnomon_format::validate::SPEED_LAUNCHES.start();
/// Launches before the timed ones, so caches and clocks have settled.
const WARM_UP: u32 = 3;

/// What timing a restore's templates found, and what finding their scopes cost.
#[derive(Debug, Default)]
pub struct SpeedsTimed {
    /// Each template with a recorded speed, and its speed here.
    pub speeds: Vec<(String, Speed)>,
    /// The templates timed again with every writable buffer put back, their launches
    /// having written outside the scope their first launch showed.
    pub retimed: Vec<String>,
    /// Seconds spent finding scopes and checking them afterwards (sums of every writable
    /// buffer, twice per template), apart from the timed launches.
    pub scoping_s: f64,
}

/// Each template whose expectation records a speed, timed as the exporter timed it: each
/// launch after the writable buffers its first launch changed were put back ([`Scoping`]),
/// or all of them where a launch was then seen to write elsewhere.
pub(super) fn time_recorded(restored: &Restored) -> Result<SpeedsTimed, ReplayError> {
    let Restored { ctx, core, arena, plan, checksummer, .. } = *restored;
    let (m, stream) = (core.manifest(), ctx.stream()?);
    let expected = m.expectations_by_template();
    let mut found = SpeedsTimed::default();
    let scoping = timed(&mut found.scoping_s, || Scoping::new(arena, checksummer, &stream))?;
    let mut progress = Progress::start("replay: speed", Unit::Items("templates"), m.templates.len() as u64);
    for (template, exec) in m.templates.iter().zip(plan.executables()) {
        if let Some(recorded) = expected.get(template.name.as_str()).and_then(|e| e.speed) {
            let scope = timed(&mut found.scoping_s, || scoping.scope_of(arena, checksummer, exec, &stream))?;
            let mut speed = time_launches(ctx, exec, arena, &scope, &stream, recorded.launches)?;
            if timed(&mut found.scoping_s, || scoping.strayed(arena, checksummer, &scope, &stream))? {
                speed = time_launches(ctx, exec, arena, &Scope::All, &stream, recorded.launches)?;
                found.retimed.push(template.name.clone());
            }
            found.speeds.push((template.name.clone(), speed));
        }
        progress.advance(1);
    }
    progress.finish();
    Ok(found)
}

/// `launches` launches of `exec`, each after the writable buffers of `scope` were reset
/// (not timed), after a warm-up. Every launch is enqueued behind the last and the host waits once, at the end,
/// so each pair of events brackets the device's time alone. Timed one at a time, the
/// host's launch would count too, and in a process CUPTI watches (the kit's) that made
/// the same graph 5-10 % slower while its device time stayed within 1 %
/// (`baselines/h200-sm90-580.159.04-models/speed/`).
pub fn time_launches(
    ctx: &Context,
    exec: &GraphExec,
    state: &LoadedState,
    scope: &Scope,
    stream: &Stream,
    launches: u32,
) -> Result<Speed, ReplayError> {
    let mut events = Vec::with_capacity((WARM_UP + launches) as usize);
    for _ in 0..WARM_UP + launches {
        let (start, end) = (ctx.event()?, ctx.event()?);
        state.reset_within(stream, scope)?;
        stream.record(&start)?;
        exec.launch(stream)?;
        stream.record(&end)?;
        events.push((start, end));
    }
    stream.synchronize()?;
    let mut times_us = Vec::with_capacity(launches as usize);
    for (start, end) in &events[WARM_UP as usize..] {
        times_us.push(f64::from(start.elapsed_ms(end)?) * 1e3);
    }
    Ok(speed_of(&mut times_us))
}

/// The median of `times_us` and its spread (the 90th percentile less the 10th, by nearest
/// rank); `times_us` is sorted.
fn speed_of(times_us: &mut [f64]) -> Speed {
    times_us.sort_by(f64::total_cmp);
    let n = times_us.len();
    let rank = |p: f64| times_us[((p * n as f64).ceil() as usize).clamp(1, n.max(1)) - 1];
    let median = match n {
        0 => 0.0,
        n if n % 2 == 1 => times_us[n / 2],
        n => (times_us[n / 2 - 1] + times_us[n / 2]) / 2.0,
    };
    let spread_us = if n == 0 { 0.0 } else { rank(0.9) - rank(0.1) };
    Speed { launches: n as u32, median_us: median, spread_us }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_and_the_spread_between_the_10th_and_90th_percentiles() {
        let mut times: Vec<f64> = (1..=20).rev().map(f64::from).collect();
        let speed = speed_of(&mut times);
        assert_eq!(speed, Speed { launches: 20, median_us: 10.5, spread_us: 18.0 - 2.0 });
        // One slow outlier moves neither.
        times[19] = 1e6;
        assert_eq!(speed_of(&mut times), speed);
        assert_eq!(speed_of(&mut [5.0, 1.0, 3.0]).median_us, 3.0);
        assert_eq!(speed_of(&mut [5.0, 1.0, 3.0, 9.0, 7.0]).median_us, 5.0);
    }
}
