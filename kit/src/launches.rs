//! Expectations from repeated launches in the capturing process: each template is launched
//! from the core's state as replay loads it (replay's own [`LoadedState`]) until no new
//! outputs have appeared for a while ([`Launching`]); outputs are told apart by checksums
//! computed on the device, and read back only when new. An output that some launch gave
//! differently is recorded as varying, with its envelope ([`Spread`]), its other digests
//! and its first launch's bytes. The first node that gives different results from the same
//! inputs is found by launching growing prefixes of the graph; its kernel is taken to vary
//! wherever it runs, so every node of that kernel is named, and a template that runs it
//! but never varied here takes the spread of a like output that did. Each template's
//! launches are timed too (replay's [`time_launches`]): what a restored template's speed
//! is held to.

use std::{
    collections::{BTreeSet, HashMap, HashSet},
    sync::atomic::{AtomicBool, Ordering},
};

use gnomon_format::{
    digest::sha256_each,
    spread::{Allowance, Bounds, Element, Spread, Tokens, DEFAULT_MARGIN},
    BufferRef, Expectation, Manifest, NodeOp, OutputDigest, OutputRef, Speed, Variation,
};

use gnomon_core::{
    cuda::{Context, GraphExec, RetainedGraph, Stream},
    errors::ExportError,
    export::Exporter,
    progress::{Progress, Unit},
    replay::{
        time_launches, timed, Checksummer, HeldAt, LoadedState, RangeCheck, Ranks, Scope, Scoping, Weights, POISON,
        SECOND_POISON, TIMED_LAUNCHES,
    },
    translate::Instantiate,
};
use serde::Serialize;

use crate::{
    declare::{Compared, Declared},
    errors::KitError,
};

/// How many times each template is launched: at least `least`, then on until `quiet`
/// launches in a row gave no output not seen before, at most `most`. A rank of a set
/// launches exactly `least` times, as its peers do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launching {
    pub least: u32,
    pub quiet: u32,
    pub most: u32,
}

impl Launching {
    /// Whether launch number `made` + 1 is due, `quiet` launches after the last new output.
    fn more(&self, made: u32, quiet: u32) -> bool {
        made < self.least.max(1) || (made < self.most && quiet < self.quiet)
    }

    fn fixed(self) -> Self {
        Self { most: self.least, ..self }
    }
}

/// One compared output over a template's launches.
struct Observed<'d> {
    compared: &'d Compared,
    first: Vec<u8>,
    sha256: String,
    /// Other digests, in the order they first appeared.
    others: Vec<String>,
    spread: Spread,
    /// A logits output's tokens, launch by launch.
    tokens: Option<Tokens>,
    /// The device sums its launches gave: bytes whose sum is among them are a launch's.
    sums: HashSet<u64>,
}

impl<'d> Observed<'d> {
    /// The first launch's `bytes`, whose SHA-256 is `sha256`.
    fn first(compared: &'d Compared, bytes: Vec<u8>, sha256: String) -> Self {
        let spread = Spread::of_first(compared.element, &bytes);
        let tokens =
            compared.logits.and_then(|l| Tokens::of_first(compared.element, l.vocabulary, l.rows as usize, &bytes));
        Self { compared, first: bytes, sha256, others: Vec::new(), spread, tokens, sums: HashSet::new() }
    }

    /// Lets go of the first launch's bytes of an output that did not vary: only a like
    /// output's spread, found in a later template, asks for them again ([`first_again`]),
    /// and held for every template they were the serving catalogue's 23.6 GB.
    fn forget_first_unless_varied(&mut self) {
        if self.others.is_empty() {
            self.first = Vec::new();
        }
    }

    fn again(&mut self, bytes: &[u8], sha256: String) {
        if sha256 != self.sha256 && !self.others.contains(&sha256) {
            self.spread.add(&self.first, bytes);
            if let Some(tokens) = &mut self.tokens {
                tokens.add(self.compared.element, bytes);
            }
            self.others.push(sha256);
        }
    }

    /// How `bytes` (whose SHA-256 is `sha256`) depart from every launch observed, if they
    /// do: a digest no launch gave, of an output that did not vary or of bytes; or, for a
    /// varying float output, past the envelope its launches showed (× the judge's default
    /// margin) or past a limit their distances give, as `gnomon qualify` judges.
    fn departs(&self, bytes: &[u8], sha256: &str) -> Option<String> {
        if sha256 == self.sha256 || self.others.iter().any(|o| o == sha256) {
            return None;
        }
        let element = self.compared.element;
        if self.others.is_empty() || !element.is_float() {
            return Some(format!("`{}` gave SHA-256 {sha256}, which none of its launches gave", self.compared.buffer));
        }
        let allowance = Allowance::widened(self.spread.envelope(), self.spread.differing_fraction(), DEFAULT_MARGIN);
        let (fit, admitted) = allowance.judge(element, &self.first, bytes);
        let past = Bounds::of(&self.spread.distances).and_then(|b| b.exceeded(fit.distance)).map(|(what, ..)| what);
        match (admitted, past) {
            (true, None) => None,
            (false, _) => Some(format!(
                "`{}`: {} of its {} elements lie outside the spread its launches showed (× {DEFAULT_MARGIN})",
                self.compared.buffer, fit.outside, fit.elements
            )),
            (true, Some(what)) => {
                Some(format!("`{}`: its {what} is past the limit its launches give", self.compared.buffer))
            }
        }
    }

    fn variation(&self, launches: u32, file: String, nodes: Vec<String>) -> Variation {
        let envelope = self.spread.envelope();
        Variation {
            element: self.compared.element,
            launches,
            sha256s: self.others.clone(),
            max_abs: self.spread.max_abs,
            max_ulp: self.spread.max_ulp,
            differing_fraction: self.spread.differing_fraction(),
            atol: Some(envelope.atol),
            rtol: Some(envelope.rtol),
            spread_of: None,
            file,
            nodes,
            distances: self.spread.distances.clone(),
            tokens: self.tokens.clone(),
        }
    }
}

/// An output that varied, or takes the spread of one that did, for the export's summary.
#[derive(Debug, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Varied {
    pub template: String,
    pub buffer: String,
    pub element: Element,
    pub distinct: usize,
    pub launches: u32,
    pub max_abs: f64,
    pub max_ulp: u64,
    pub atol: f64,
    pub rtol: f64,
    pub differing_fraction: f64,
    /// `TEMPLATE BUFFER` whose spread this output takes: its template runs a kernel found
    /// to vary there, but its own launches gave one digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread_of: Option<String>,
    /// The nodes of its template that run a kernel found to vary: id, kernel.
    pub nodes: Vec<(String, String)>,
    /// The smallest effect a judge catches (miss rate 0.2), over the whole output and in
    /// one 4 KiB block, in units of the mean distance its launches lay from the first
    /// (`gnomon_format::spread::Bound`); absent where none is recorded (a taken spread's
    /// floors are its source's) or any change of value is caught.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rms_floor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_rms_floor: Option<f64>,
}

/// What [`expectations`] found.
pub struct Expected {
    pub expectations: Vec<Expectation>,
    pub varied: Vec<Varied>,
    /// The most launches any template took.
    pub launches: u32,
    /// Each varying output's first launch, by template and buffer.
    pub first_launches: HashMap<(String, String), Vec<u8>>,
    pub stages: ExpectationStages,
    /// Device memory the executables held at most, one alive at a time: free memory
    /// before the first was made, less free memory right after each was made and
    /// uploaded (the driver keeps what a destroyed executable freed, for the next).
    pub executable_bytes: u64,
}

/// Where the expectations' seconds went, summed over the templates.
#[derive(Clone, Copy, Debug, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ExpectationStages {
    /// Executables made and uploaded to the device.
    pub instantiate_s: f64,
    /// Writable buffers put back before each launch, to the stream's end.
    pub reset_s: f64,
    /// Launches, to their end.
    pub launch_s: f64,
    /// Checksums of the compared outputs on the device, after each launch.
    pub check_s: f64,
    /// What a template's resets put back: one launch after everything was, and checksums
    /// of every writable buffer after it and after the template's last launch.
    pub scope_s: f64,
    /// Outputs with a checksum not seen before, read back.
    pub read_s: f64,
    /// Their SHA-256, a launch's together on the host's cores.
    pub digest_s: f64,
    /// Spreads of outputs that differed.
    pub spread_s: f64,
    /// The search for the first node that varies.
    pub search_s: f64,
    /// One launch of each template under a second poison, and where one departed, the
    /// search for the first node whose writes depend on it.
    pub poison_s: f64,
    /// Launches timed for the template's speed, their resets included.
    pub speed_s: f64,
    /// Templates launched again resetting everything: a launch wrote where the first did not.
    pub relaunched: u32,
    /// Templates launched again for the first launch's bytes of outputs that take a like
    /// output's spread (their own were let go: they did not vary).
    pub again_s: f64,
}

/// Launches of templates from the core's state as replay loads it, in the capturing
/// process: the loaded state, a stream, the device's checksums, and the writable buffers'
/// sums as loaded (replay's [`Scoping`]).
pub struct Launcher {
    ctx: Context,
    state: LoadedState,
    stream: Stream,
    checksummer: Checksummer,
    scoping: Scoping,
    /// Set when the snapshot written beside the launches failed, or they did: each side
    /// gives up at its next step.
    given_up: AtomicBool,
}

impl Launcher {
    /// Keeps the state `m` declares as the arena holds it now, its unstored buffers filled
    /// as replay fills them.
    pub fn new(ctx: &Context, m: &Manifest) -> Result<Self, KitError> {
        let state = LoadedState::keep(ctx, m, None)?;
        state.fill_unstored(POISON)?;
        let (stream, checksummer) = (ctx.stream()?, Checksummer::new(ctx)?);
        let scoping = Scoping::new(&state, &checksummer, &stream)?;
        Ok(Self { ctx: ctx.clone(), state, stream, checksummer, scoping, given_up: AtomicBool::new(false) })
    }

    /// The flag the launches and the snapshot beside them set when they fail.
    pub fn given_up(&self) -> &AtomicBool {
        &self.given_up
    }

    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Where the loaded state lies while the launches change the arena: what the
    /// snapshot, written beside them, reads.
    pub fn held_at(&self) -> HeldAt<'_> {
        self.state.held_at()
    }

    /// The weights of `m` summed as loaded, for [`Self::weights_unchanged`].
    pub fn weights<'l>(&'l self, m: &'l Manifest) -> Result<Weights<'l>, KitError> {
        Ok(Weights::loaded(m, &self.state, &self.checksummer, &self.stream)?)
    }

    /// Refuses the export if a launch since `weights` were summed changed one: the snapshot
    /// read the weights from the arena while the templates launched.
    pub fn weights_unchanged(&self, weights: &Weights) -> Result<(), KitError> {
        match weights.changed(&self.stream)?.first() {
            None => Ok(()),
            Some(&i) => Err(KitError::WeightWritten(weights.name(i).unwrap_or_default().to_owned())),
        }
    }

    /// One launch of `exec` from the loaded state, finished.
    pub fn launch_once(&self, exec: &GraphExec) -> Result<(), KitError> {
        self.state.reset(&self.stream)?;
        exec.launch(&self.stream)?;
        Ok(self.stream.synchronize()?)
    }

    /// The digests of `outputs` after one launch of `exec` from the loaded state with the
    /// generator's offset word `at` holding `value` first ([`LoadedState::draw`]).
    pub fn draw(
        &self,
        exec: &GraphExec,
        at: &BufferRef,
        value: u64,
        outputs: &[&str],
    ) -> Result<Vec<String>, KitError> {
        Ok(self.state.draw(exec, &self.stream, at, value, outputs)?)
    }

    /// The 64-bit word at `at` now.
    pub fn read_word(&self, at: &BufferRef) -> Result<u64, KitError> {
        Ok(self.state.read_word(at)?)
    }

    /// What buffer `name` holds now.
    pub fn read(&self, name: &str) -> Result<Vec<u8>, KitError> {
        Ok(self.state.read(name)?)
    }

    /// The writable buffers that one launch of `exec` from the loaded state changed.
    fn scope_of(&self, exec: &GraphExec) -> Result<Scope, KitError> {
        Ok(self.scoping.scope_of(&self.state, &self.checksummer, exec, &self.stream)?)
    }

    /// Whether a writable buffer outside `scope` no longer holds what it was loaded with.
    fn strayed(&self, scope: &Scope) -> Result<bool, KitError> {
        Ok(self.scoping.strayed(&self.state, &self.checksummer, scope, &self.stream)?)
    }
}

/// A template's launches and what they gave.
struct Launched<'d> {
    name: &'d str,
    observed: Vec<Observed<'d>>,
    launches: u32,
    speed: Option<Speed>,
}

/// Launches each template from the core's state as `launching` says and returns its
/// expectations; a varying output's first launch is stored in the core through `exporter`.
/// A template's launches after its first put back only the buffers its first changed (a
/// catalogue's template writes its own batch's cache, and putting every cache back cost
/// more than the launch); a template that was then seen to change another is launched
/// again, everything put back each time.
pub fn expectations(
    launcher: &Launcher,
    exporter: &Exporter,
    graphs: &[(String, RetainedGraph)],
    flags: u64,
    declared: &Declared,
    launching: Launching,
    ranks: Option<&Ranks>,
) -> Result<Expected, KitError> {
    let m = exporter.manifest();
    let Launcher { state, stream, checksummer, .. } = launcher;
    let launching = if ranks.is_some() { launching.fixed() } else { launching };
    let mut launched = Vec::new();
    let mut unwritten = Vec::new();
    let mut kernels = VaryingKernels::default();
    let mut stages = ExpectationStages::default();
    let (free_before, _) = launcher.ctx.memory()?;
    let mut executable_bytes = 0;
    let mut progress = Progress::start("export: launches", Unit::Items("templates"), graphs.len() as u64);
    for (name, graph) in graphs {
        if launcher.given_up.load(Ordering::Relaxed) {
            return Err(ExportError::Abandoned.into());
        }
        let exec = timed(&mut stages.instantiate_s, || instantiated(launcher, graph, flags))?;
        executable_bytes = executable_bytes.max(free_before.saturating_sub(launcher.ctx.memory()?.0));
        let compared: Vec<&Compared> = declared.compared_after(name).collect();
        let names: Vec<&str> = compared.iter().map(|c| c.buffer.as_str()).collect();
        let check = state.check_of(&names, checksummer)?;
        let template = TemplateLaunches { exec: &exec, check: &check, compared: &compared, launching, ranks };
        // A rank's launches wait for its peers', which put back all of theirs.
        let scope = match ranks {
            Some(_) => Scope::All,
            None => timed(&mut stages.scope_s, || launcher.scope_of(&exec))?,
        };
        let mut outcome = template.launch(launcher, &scope, &mut stages)?;
        if timed(&mut stages.scope_s, || launcher.strayed(&scope))? {
            stages.relaunched += 1;
            outcome = template.launch(launcher, &Scope::All, &mut stages)?;
        }
        let (mut observed, launches, speed) = outcome;
        if observed.is_empty() {
            return Err(KitError::NoOutputs(name.clone()));
        }
        let departed = timed(&mut stages.poison_s, || template.under_second_poison(launcher, &observed))?;
        if !departed.is_empty() {
            // A rank launches its prefixes alone, and a collective kernel waits for its peers.
            let search = Search { state, stream, checksummer, launching };
            let node = match ranks {
                None => timed(&mut stages.poison_s, || search.first_poisoned_node(graph, flags))?,
                Some(_) => None,
            };
            unwritten.push(reads_unwritten(m, name, &departed, node));
        }
        // A rank launches its prefixes alone, and a collective kernel waits for its peers:
        // no search for a rank of a set. A variation a kernel already found explains needs
        // no search of its own.
        let varies = observed.iter().any(|o| !o.others.is_empty());
        if varies && ranks.is_none() && !kernels.explain(m, name) {
            let search = Search { state, stream, checksummer, launching };
            if let Some(node) = timed(&mut stages.search_s, || search.first_varying_node(graph, flags))? {
                kernels.found(m, name, node);
            }
        }
        // A rank's are let go too: no varying kernel is searched for in a rank's template,
        // so none of its outputs takes a like output's spread and none launches again alone.
        observed.iter_mut().for_each(Observed::forget_first_unless_varied);
        launched.push(Launched { name, observed, launches, speed });
        progress.advance(1);
    }
    progress.finish();
    if !unwritten.is_empty() {
        return Err(KitError::ReadsUnwritten(unwritten.join("; ")));
    }
    let again = |t: &Launched, wanted: &[&Observed]| match graphs.iter().find(|(name, _)| name == t.name) {
        Some((_, graph)) => first_again(launcher, (t.name, graph), flags, wanted, launching.most),
        None => Err(KitError::Role(format!("template `{}` is not among the graphs exported", t.name))),
    };
    record(exporter, m, launched, &kernels, stages, executable_bytes, again)
}

/// The bytes the first launch gave each of `wanted` (outputs of one template that did not
/// vary), from launches of the template again from the loaded state: the first whose
/// digests are all theirs, of at most `most`. The template runs a kernel found to vary
/// elsewhere, so one launch may give other bytes.
fn first_again(
    launcher: &Launcher,
    (template, graph): (&str, &RetainedGraph),
    flags: u64,
    wanted: &[&Observed],
    most: u32,
) -> Result<Vec<Vec<u8>>, KitError> {
    let Launcher { state, stream, .. } = launcher;
    let exec = instantiated(launcher, graph, flags)?;
    for _ in 0..most.max(1) {
        state.reset(stream)?;
        exec.launch(stream)?;
        stream.synchronize()?;
        let (bytes, digests) = read_digested(state, wanted)?;
        if wanted.iter().zip(&digests).all(|(o, d)| *d == o.sha256) {
            return Ok(bytes);
        }
    }
    let outputs = wanted.iter().map(|o| format!("`{}`", o.compared.buffer)).collect::<Vec<_>>().join(", ");
    Err(KitError::VariedWhenAgain { template: template.into(), outputs, launches: most.max(1) })
}

/// What each of `outputs` holds now, read back, and its digest.
fn read_digested(state: &LoadedState, outputs: &[&Observed]) -> Result<(Vec<Vec<u8>>, Vec<String>), KitError> {
    let bytes = outputs.iter().map(|o| state.read(&o.compared.buffer)).collect::<Result<Vec<_>, _>>()?;
    let digests = sha256_each(&bytes.iter().map(Vec::as_slice).collect::<Vec<_>>());
    Ok((bytes, digests))
}

/// Which like output's spread each of `observed` takes (template `template`, whose nodes
/// that run a kernel found to vary are `nodes`): one that did not vary, where its template
/// runs such a kernel, takes the widest of its role's of the same element.
fn spreads_taken<'l, 'd>(
    observed: &[Observed<'d>],
    template: &str,
    nodes: &[(String, String)],
    sources: &HashMap<String, (&'d str, &'l Observed<'d>)>,
) -> Vec<Option<(&'d str, &'l Observed<'d>)>> {
    let taken = |o: &Observed<'d>| {
        let (source_template, source) = *sources.get(&role_of(&o.compared.buffer, template))?;
        let takes = o.others.is_empty() && !nodes.is_empty() && source.compared.element == o.compared.element;
        takes.then_some((source_template, source))
    };
    observed.iter().map(taken).collect()
}

/// The outputs whose first launch's bytes must be had again: those that take a like
/// output's spread (the core stores their first launch) and let them go.
fn first_bytes_wanted<'o, 'd>(
    observed: &'o [Observed<'d>],
    spreads: &[Option<(&str, &Observed)>],
) -> Vec<&'o Observed<'d>> {
    observed.iter().zip(spreads).filter(|(o, s)| s.is_some() && o.first.is_empty()).map(|(o, _)| o).collect()
}

/// What a template that read memory it never wrote did, in words: the outputs that
/// departed under the second poison, and the first node whose writes depended on it.
fn reads_unwritten(m: &Manifest, template: &str, departed: &[String], node: Option<usize>) -> String {
    let node = match node {
        Some(n) => {
            let id = format!("n{n}");
            let kernel =
                kernel_nodes(m, template).find(|(i, _)| *i == id).map(|(_, (_, f))| format!(" (kernel `{f}`)"));
            format!(
                "the first node whose writes to the core's stored buffers depend on it: {id}{}",
                kernel.unwrap_or_default()
            )
        }
        None => "no node's writes to the core's stored buffers were seen to depend on it alone".into(),
    };
    format!(
        "template `{template}` reads memory it never writes: launched with the core's unstored buffers (scratch, \
         freed blocks) holding another poison pattern, {}; {node}",
        departed.join(", ")
    )
}

/// `graph` instantiated with `flags` and uploaded: the device memory it takes is then
/// placed (its first launch would place it otherwise).
fn instantiated(launcher: &Launcher, graph: &RetainedGraph, flags: u64) -> Result<GraphExec, KitError> {
    let exec = graph.instantiate(flags)?;
    exec.upload(&launcher.stream)?;
    launcher.stream.synchronize()?;
    Ok(exec)
}

/// One template's executable, its compared outputs and how to launch it.
struct TemplateLaunches<'t, 'd> {
    exec: &'t GraphExec,
    check: &'t RangeCheck<'t>,
    compared: &'t [&'d Compared],
    launching: Launching,
    ranks: Option<&'t Ranks>,
}

impl<'d> TemplateLaunches<'_, 'd> {
    /// Its outputs over its launches, each launch after `scope` was put back, the launches
    /// made, and its speed (for a template of no rank set: a rank launches with its peers).
    fn launch(
        &self,
        launcher: &Launcher,
        scope: &Scope,
        stages: &mut ExpectationStages,
    ) -> Result<(Vec<Observed<'d>>, u32, Option<Speed>), KitError> {
        let (observed, launches) = self.observe(launcher, scope, stages)?;
        let Launcher { ctx, state, stream, .. } = launcher;
        let speed = match self.ranks {
            None => Some(timed(&mut stages.speed_s, || {
                time_launches(ctx, self.exec, state, scope, stream, TIMED_LAUNCHES)
            })?),
            Some(_) => None,
        };
        Ok((observed, launches, speed))
    }

    /// The outputs that departed from every launch `observed` when the template was
    /// launched once more, everything put back, with the unstored buffers holding
    /// [`SECOND_POISON`]: what `gnomon qualify`'s poison-independence would find. Only
    /// outputs whose device sum no launch gave are read back ([`unseen`]). The poison is
    /// put back afterwards.
    fn under_second_poison(&self, launcher: &Launcher, observed: &[Observed]) -> Result<Vec<String>, KitError> {
        let Launcher { state, stream, .. } = launcher;
        state.fill_unstored(SECOND_POISON)?;
        state.reset(stream)?;
        self.exec.launch(stream)?;
        match self.ranks {
            Some(ranks) => ranks.sync_after(stream)?,
            None => stream.synchronize()?,
        }
        let unseen = unseen(observed, &self.check.run(stream)?);
        let (bytes, digests) = read_digested(state, &unseen)?;
        state.fill_unstored(POISON)?;
        Ok(unseen.iter().zip(&bytes).zip(&digests).filter_map(|((o, b), d)| o.departs(b, d)).collect())
    }

    /// Each compared output over the launches `launching` says, and the launches made. An
    /// output is read back at the first launch and whenever its device checksum is new. A
    /// rank of a set launches with its peers, as replay does: all reset, all launch, all
    /// finish.
    fn observe(
        &self,
        launcher: &Launcher,
        scope: &Scope,
        stages: &mut ExpectationStages,
    ) -> Result<(Vec<Observed<'d>>, u32), KitError> {
        let Launcher { state, stream, .. } = launcher;
        let with_peers = || -> Result<(), KitError> {
            match self.ranks {
                Some(ranks) => Ok(ranks.sync_after(stream)?),
                None => Ok(stream.synchronize()?),
            }
        };
        let mut observed: Vec<Observed> = Vec::new();
        let mut seen: Vec<HashSet<u64>> = vec![HashSet::new(); self.compared.len()];
        let (mut made, mut quiet) = (0, 0);
        while self.launching.more(made, quiet) {
            timed(&mut stages.reset_s, || {
                state.reset_within(stream, scope)?;
                with_peers()
            })?;
            timed(&mut stages.launch_s, || {
                self.exec.launch(stream)?;
                with_peers()
            })?;
            let sums = timed(&mut stages.check_s, || self.check.run(stream))?;
            quiet += 1;
            let new: Vec<usize> = (0..self.compared.len()).filter(|&i| seen[i].insert(sums[i])).collect();
            let read = |i: &usize| state.read(&self.compared[*i].buffer);
            let bytes = timed(&mut stages.read_s, || new.iter().map(read).collect::<Result<Vec<_>, _>>())?;
            let digests =
                timed(&mut stages.digest_s, || sha256_each(&bytes.iter().map(Vec::as_slice).collect::<Vec<_>>()));
            for ((i, bytes), sha256) in new.into_iter().zip(bytes).zip(digests) {
                match made {
                    0 => observed.push(Observed::first(self.compared[i], bytes, sha256)),
                    _ => {
                        timed(&mut stages.spread_s, || observed[i].again(&bytes, sha256));
                        quiet = 0;
                    }
                }
            }
            made += 1;
        }
        for (o, sums) in observed.iter_mut().zip(seen) {
            o.sums = sums;
        }
        Ok((observed, made))
    }
}

/// The outputs whose device `sums` after a launch no launch of theirs gave: only these are
/// read back and judged. The serving catalogue's export read and hashed every output
/// after its launch under the second poison, 16.3 of its 74.2 s on an H100, to find them
/// all alike.
fn unseen<'o, 'd>(observed: &'o [Observed<'d>], sums: &[u64]) -> Vec<&'o Observed<'d>> {
    observed.iter().zip(sums).filter(|(o, sum)| !o.sums.contains(sum)).map(|(o, _)| o).collect()
}

/// The expectations of every template, each varying output stored with its spread.
fn record(
    exporter: &Exporter,
    m: &Manifest,
    launched: Vec<Launched>,
    kernels: &VaryingKernels,
    stages: ExpectationStages,
    executable_bytes: u64,
    first_again: impl Fn(&Launched, &[&Observed]) -> Result<Vec<Vec<u8>>, KitError>,
) -> Result<Expected, KitError> {
    let sources = spread_sources(&launched);
    let mut expected = Expected {
        expectations: Vec::new(),
        varied: Vec::new(),
        launches: 0,
        first_launches: HashMap::new(),
        stages,
        executable_bytes,
    };
    for t in &launched {
        expected.launches = expected.launches.max(t.launches);
        let nodes = kernels.nodes_in(m, t.name);
        let ids: Vec<String> = nodes.iter().map(|(id, _)| id.clone()).collect();
        let mut outputs = Vec::new();
        let spreads = spreads_taken(&t.observed, t.name, &nodes, &sources);
        let wanted = first_bytes_wanted(&t.observed, &spreads);
        let mut again: HashMap<&str, Vec<u8>> = match wanted.is_empty() {
            true => HashMap::new(),
            false => {
                let bytes = timed(&mut expected.stages.again_s, || first_again(t, &wanted))?;
                wanted.iter().map(|o| o.compared.buffer.as_str()).zip(bytes).collect()
            }
        };
        for (o, spread_of) in t.observed.iter().zip(spreads) {
            let varying = match spread_of {
                None if o.others.is_empty() => None,
                None => Some((o.variation(t.launches, exporter.store_output(&o.first)?, ids.clone()), o.first.clone())),
                Some((template, source)) => {
                    let first = again.remove(o.compared.buffer.as_str()).unwrap_or_else(|| o.first.clone());
                    let mut v = source.variation(t.launches, exporter.store_output(&first)?, ids.clone());
                    (v.sha256s, v.distances, v.max_abs, v.max_ulp) = (Vec::new(), Vec::new(), 0.0, 0);
                    // Its tokens are its own launches' (the rows of its own logits).
                    v.tokens = o.tokens.clone();
                    v.spread_of = Some(OutputRef { template: template.into(), buffer: source.compared.buffer.clone() });
                    Some((v, first))
                }
            };
            let variation = varying.map(|(v, first)| {
                expected.varied.push(varied(t.name, o, &v, &nodes));
                expected.first_launches.insert((t.name.to_owned(), o.compared.buffer.clone()), first);
                v
            });
            let (buffer, sha256, element) = (o.compared.buffer.clone(), o.sha256.clone(), Some(o.compared.element));
            outputs.push(OutputDigest { buffer, sha256, variation, element });
        }
        let (template, speed) = (t.name.to_owned(), t.speed);
        expected.expectations.push(Expectation { template, outputs, reference: None, tolerance: None, speed });
    }
    Ok(expected)
}

/// For each output role (its buffer's name without its template's), the output that
/// varied most in launches of its own: what a like output that did not vary takes.
fn spread_sources<'l, 'd>(launched: &'l [Launched<'d>]) -> HashMap<String, (&'d str, &'l Observed<'d>)> {
    let mut sources: HashMap<String, (&str, &Observed)> = HashMap::new();
    for t in launched {
        for o in t.observed.iter().filter(|o| !o.others.is_empty()) {
            let wider = |(_, s): &(&str, &Observed)| {
                let (a, b) = (o.spread.envelope(), s.spread.envelope());
                (o.spread.differing_fraction(), a.atol, a.rtol) > (s.spread.differing_fraction(), b.atol, b.rtol)
            };
            let role = role_of(&o.compared.buffer, t.name);
            if sources.get(&role).is_none_or(wider) {
                sources.insert(role, (t.name, o));
            }
        }
    }
    sources
}

/// A buffer's name with its template's name taken out where it stands as a word:
/// `output/b8/logits` and `output/b16/logits` play one role, as `kv-cache/k` does in
/// every template.
fn role_of(buffer: &str, template: &str) -> String {
    buffer
        .split('/')
        .map(|part| part.split('-').filter(|w| *w != template).collect::<Vec<_>>().join("-"))
        .collect::<Vec<_>>()
        .join("/")
}

/// Kernels found to give different results from the same inputs, as (module, function):
/// a kernel varies wherever it runs.
#[derive(Default)]
struct VaryingKernels(BTreeSet<(String, String)>);

impl VaryingKernels {
    fn found(&mut self, m: &Manifest, template: &str, node: usize) {
        let id = format!("n{node}");
        let kernel = kernel_nodes(m, template).find(|(n, _)| *n == id).map(|(_, k)| k);
        self.0.extend(kernel);
    }

    /// Whether `template` runs a kernel already found to vary.
    fn explain(&self, m: &Manifest, template: &str) -> bool {
        kernel_nodes(m, template).any(|(_, k)| self.0.contains(&k))
    }

    /// The nodes of `template` that run a varying kernel: id, function.
    fn nodes_in(&self, m: &Manifest, template: &str) -> Vec<(String, String)> {
        kernel_nodes(m, template)
            .filter(|(_, k)| self.0.contains(k))
            .map(|(id, (_, function))| (id.to_owned(), function))
            .collect()
    }
}

/// Each kernel node of `template`: its id, and its (module, function).
fn kernel_nodes<'m>(m: &'m Manifest, template: &str) -> impl Iterator<Item = (&'m str, (String, String))> + 'm {
    let nodes = m.templates.iter().find(|t| t.name == template).map(|t| t.nodes.as_slice()).unwrap_or_default();
    nodes.iter().filter_map(|n| match &n.op {
        NodeOp::Kernel(k) => Some((n.id.as_str(), (k.module.clone(), k.function.clone()))),
        _ => None,
    })
}

/// Launches of prefixes of a graph from the loaded state, to find where it varies.
struct Search<'s> {
    state: &'s LoadedState,
    stream: &'s Stream,
    checksummer: &'s Checksummer,
    launching: Launching,
}

impl Search<'_> {
    /// The first node, in a topological order of `graph`, whose prefix `differs` (launched
    /// as the closure says, the writable buffers' sums read by the check it is given) while
    /// the prefix before it does not; `None` when the whole graph does not.
    fn first_node_where(
        &self,
        graph: &RetainedGraph,
        flags: u64,
        differs: impl Fn(&GraphExec, &RangeCheck) -> Result<bool, KitError>,
    ) -> Result<Option<usize>, KitError> {
        let order =
            topological(graph.nodes()?.len(), &graph.edges()?.iter().map(|e| (e.0 .0, e.1 .0)).collect::<Vec<_>>());
        let rank: HashMap<usize, usize> = order.iter().enumerate().map(|(r, &n)| (n, r)).collect();
        let check = self.state.writable_check(self.checksummer)?;
        let found = shortest_varying_prefix(order.len(), |k| {
            differs(&graph.without(|n| rank[&n] < k)?.instantiate(flags)?, &check)
        })?;
        Ok(found.map(|k| order[k - 1]))
    }

    /// The writable buffers' sums after one launch of `exec` from the loaded state.
    fn sums_after(&self, exec: &GraphExec, check: &RangeCheck) -> Result<Vec<u64>, KitError> {
        self.state.reset(self.stream)?;
        exec.launch(self.stream)?;
        Ok(check.run(self.stream)?)
    }

    /// The first node whose prefix leaves the writable state differing between launches
    /// while the prefix before it does not: given the same inputs, that node's kernel gave
    /// different results. `None` when the whole graph did not vary again within the
    /// search's launches.
    fn first_varying_node(&self, graph: &RetainedGraph, flags: u64) -> Result<Option<usize>, KitError> {
        self.first_node_where(graph, flags, |exec, check| {
            let first = self.sums_after(exec, check)?;
            // A prefix is taken as steady only after as many launches as a template's most.
            for _ in 1..self.launching.most.max(2) {
                if self.sums_after(exec, check)? != first {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }

    /// The first node whose prefix leaves the writable state different under the second
    /// poison than under the first, twice alike under the first (a prefix that varies by
    /// itself says nothing of the poison): the first node whose writes to stored buffers
    /// depend on memory no node wrote. The first poison is put back.
    fn first_poisoned_node(&self, graph: &RetainedGraph, flags: u64) -> Result<Option<usize>, KitError> {
        let under = |exec: &GraphExec, check: &RangeCheck, poison: u8| -> Result<Vec<u64>, KitError> {
            self.state.fill_unstored(poison)?;
            self.sums_after(exec, check)
        };
        let found = self.first_node_where(graph, flags, |exec, check| {
            let (first, again) = (under(exec, check, POISON)?, under(exec, check, POISON)?);
            Ok(first == again && under(exec, check, SECOND_POISON)? != first)
        });
        self.state.fill_unstored(POISON)?;
        found
    }
}

/// The smallest `k` in `1..=n` for which `varies(k)` holds, by halving, taking the empty
/// prefix as not varying; `None` when the whole (`varies(n)`) does not vary. About
/// log₂ n calls.
fn shortest_varying_prefix(
    n: usize,
    mut varies: impl FnMut(usize) -> Result<bool, KitError>,
) -> Result<Option<usize>, KitError> {
    // Invariant: the prefix of `lo` nodes was not seen to vary, that of `hi` nodes was.
    let (mut lo, mut hi) = (0, n);
    if n == 0 || !varies(hi)? {
        return Ok(None);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match varies(mid)? {
            true => hi = mid,
            false => lo = mid,
        }
    }
    Ok(Some(hi))
}

/// Nodes `0..count` in an order where every edge's source comes before its target, the
/// lower position first among those ready (so a graph captured in order keeps its order).
fn topological(count: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let mut waiting = vec![0usize; count];
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); count];
    for &(from, to) in edges {
        waiting[to] += 1;
        after[from].push(to);
    }
    let mut ready: std::collections::BTreeSet<usize> = (0..count).filter(|&n| waiting[n] == 0).collect();
    let mut order = Vec::with_capacity(count);
    while let Some(n) = ready.pop_first() {
        order.push(n);
        for &next in &after[n] {
            waiting[next] -= 1;
            if waiting[next] == 0 {
                ready.insert(next);
            }
        }
    }
    order
}

fn varied(template: &str, o: &Observed, v: &Variation, nodes: &[(String, String)]) -> Varied {
    let spread_of = v.spread_of.as_ref().map(|s| format!("{} {}", s.template, s.buffer));
    Varied {
        template: template.to_owned(),
        buffer: o.compared.buffer.clone(),
        element: o.compared.element,
        distinct: v.sha256s.len() + 1,
        launches: v.launches,
        max_abs: v.max_abs,
        max_ulp: v.max_ulp,
        atol: v.atol.unwrap_or_default(),
        rtol: v.rtol.unwrap_or_default(),
        differing_fraction: v.differing_fraction,
        spread_of,
        nodes: nodes.to_vec(),
        rms_floor: v.bounds().and_then(|b| b.rms.floor()),
        block_rms_floor: v.bounds().and_then(|b| b.block_rms.floor()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_captured_order_is_kept_and_a_shuffled_one_is_sorted_out() {
        assert_eq!(topological(4, &[(0, 1), (1, 2), (0, 3)]), [0, 1, 2, 3]);
        assert_eq!(topological(4, &[(3, 0), (2, 3), (1, 0)]), [1, 2, 3, 0]);
        assert_eq!(topological(3, &[]), [0, 1, 2]);
    }

    #[test]
    fn the_shortest_varying_prefix_is_found_by_halving() {
        for (n, first) in [(100, 37), (100, 1), (100, 100), (1, 1), (7775, 4242)] {
            let mut calls = 0;
            let found = shortest_varying_prefix(n, |k| {
                calls += 1;
                Ok(k >= first)
            });
            assert_eq!(found.unwrap(), Some(first), "{n} nodes, varying from {first}");
            assert!(calls <= (n as f64).log2().ceil() as usize + 1, "{calls} launches of prefixes for {n}");
        }
        assert_eq!(shortest_varying_prefix(100, |_| Ok(false)).unwrap(), None, "the whole did not vary");
        assert_eq!(shortest_varying_prefix(0, |_| Ok(true)).unwrap(), None, "no nodes");
    }

    /// At least `least` launches; then on while a new output appeared in the last
    /// `quiet`; never past `most`.
    #[test]
    fn launches_go_on_until_quiet_within_their_bounds() {
        let l = Launching { least: 8, quiet: 16, most: 40 };
        let table =
            [((0, 0), true), ((7, 7), true), ((8, 8), true), ((16, 16), false), ((20, 3), true), ((40, 0), false)];
        for ((made, quiet), more) in table {
            assert_eq!(l.more(made, quiet), more, "{made} made, {quiet} quiet");
        }
        assert!(!l.fixed().more(8, 0), "a rank launches exactly `least` times");
        assert!(Launching { least: 0, quiet: 0, most: 0 }.more(0, 0), "one launch always");
    }

    #[test]
    fn a_role_is_a_buffer_name_without_its_templates() {
        assert_eq!(role_of("output/b8/logits-b8", "b8"), role_of("output/b16/logits-b16", "b16"));
        assert_eq!(role_of("kv-cache/k", "b8"), "kv-cache/k");
        assert_ne!(role_of("output/b1/logits", "b1"), role_of("output/b16/logits", "b1"), "b1 is not a part of b16");
    }

    /// A kernel found to vary in one template is named wherever it runs, and explains the
    /// variation of another template that runs it.
    #[test]
    fn a_varying_kernel_is_named_in_every_template_that_runs_it() {
        let m = gnomon_fixtures::sample::CoreDraft::sample().manifest;
        let template = m.templates[0].name.clone();
        let mut kernels = VaryingKernels::default();
        assert!(!kernels.explain(&m, &template));
        kernels.found(&m, &template, 0);
        assert!(kernels.nodes_in(&m, &template).is_empty(), "n0 is no kernel");
        kernels.found(&m, &template, 1);
        assert_eq!(kernels.nodes_in(&m, &template), [("n1".to_string(), "axpy".to_string())]);
        assert!(kernels.explain(&m, &template));
        assert!(kernels.nodes_in(&m, "no-such-template").is_empty());
    }

    /// Of the outputs that varied, each role's widest is what a like output takes.
    #[test]
    fn a_like_output_takes_the_widest_spread_of_its_role() {
        let (logits8, logits4) = (compared_as("output/b8/logits"), compared_as("output/b4/logits"));
        let first = f32s(&[1.0, 2.0, 3.0, 4.0]);
        let observed = |c, other: &[f32]| {
            let mut o = Observed::first(c, first.clone(), sha256(&first));
            o.again(&f32s(other), sha256(&f32s(other)));
            o
        };
        let launched = vec![
            Launched {
                name: "b8",
                observed: vec![observed(&logits8, &[1.5, 2.0, 3.0, 4.0])],
                launches: 20,
                speed: None,
            },
            Launched {
                name: "b4",
                observed: vec![observed(&logits4, &[1.5, 2.5, 3.0, 4.0])],
                launches: 20,
                speed: None,
            },
        ];
        let sources = spread_sources(&launched);
        let (template, source) = sources[&role_of("output/b16/logits", "b16")];
        assert_eq!((template, source.spread.differing), ("b4", 2));
    }

    /// An output that did not vary takes its role's spread where its template runs a
    /// kernel found to vary and the elements agree; of those, only one whose first bytes
    /// were let go is launched again for them.
    #[test]
    fn outputs_that_take_a_spread_and_let_their_first_bytes_go_are_launched_again() {
        let (varied_c, fixed_c) = (compared_as("output/b8/y"), compared_as("output/b4/y"));
        let halves = Compared { element: Element::Float16, ..compared_as("output/b4/y") };
        let first = f32s(&[1.0, 2.0]);
        let launched = |c| Observed::first(c, first.clone(), sha256(&first));
        let mut varied = launched(&varied_c);
        varied.again(&f32s(&[1.0, 2.5]), sha256(&f32s(&[1.0, 2.5])));
        let source = [Launched { name: "b8", observed: vec![varied], launches: 4, speed: None }];
        let sources = spread_sources(&source);
        let (mut kept, mut let_go, other_element) = (launched(&fixed_c), launched(&fixed_c), launched(&halves));
        let_go.forget_first_unless_varied();
        kept.sha256 = "kept".into();
        let observed = [kept, let_go, other_element];
        let nodes = [("n3".to_owned(), "gemm".to_owned())];
        let spreads = spreads_taken(&observed, "b4", &nodes, &sources);
        let took: Vec<Option<&str>> = spreads.iter().map(|s| s.map(|(t, _)| t)).collect();
        assert_eq!(took, [Some("b8"), Some("b8"), None], "a float16 output takes no float32 spread");
        let wanted: Vec<&str> = first_bytes_wanted(&observed, &spreads).iter().map(|o| o.sha256.as_str()).collect();
        assert_eq!(wanted, [sha256(&first)], "only the one that let its bytes go");
        let none = spreads_taken(&observed, "b4", &[], &sources);
        assert!(none.iter().all(Option::is_none), "a template that runs no varying kernel takes no spread");
    }

    /// What `record` states: a varying output with its variation, its first launch stored
    /// in the core and kept for the kit; an output that did not vary by its digest alone,
    /// its template launched again for nothing where no kernel was found to vary.
    #[test]
    fn record_states_a_varying_output_with_its_first_launch_and_a_fixed_one_by_digest() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let producer = gnomon_format::Producer { name: "test".into(), version: "0".into(), commit: String::new() };
        let context = gnomon_format::Context {
            sm: 90,
            device_name: "test".into(),
            driver_version: 13000,
            tp_rank: 0,
            tp_world_size: 1,
            producer,
        };
        let arena =
            gnomon_format::Arena { base: 0x7f00_0000_0000, size: 2 << 20, shard_cap: 2 << 20, granularity: 2 << 20 };
        let exporter = Exporter::new(&dir.path().join("core"), context, arena, Vec::new(), &[]).expect("an exporter");
        let (varying_c, fixed_c) = (compared_as("output/b8/y"), compared_as("output/b8/z"));
        let first = f32s(&[1.0, 2.0]);
        let mut varying = Observed::first(&varying_c, first.clone(), sha256(&first));
        varying.again(&f32s(&[1.0, 2.5]), sha256(&f32s(&[1.0, 2.5])));
        let mut fixed = Observed::first(&fixed_c, first.clone(), sha256(&first));
        varying.forget_first_unless_varied();
        fixed.forget_first_unless_varied();
        let launched = vec![Launched { name: "b8", observed: vec![varying, fixed], launches: 4, speed: None }];
        let asked = std::cell::Cell::new(0);
        let again = |_: &Launched, _: &[&Observed]| {
            asked.set(asked.get() + 1);
            Ok(Vec::new())
        };
        let (m, kernels) = (exporter.manifest(), VaryingKernels::default());
        let expected =
            record(&exporter, m, launched, &kernels, ExpectationStages::default(), 0, again).expect("recorded");
        let outputs = &expected.expectations[0].outputs;
        let said: Vec<(&str, bool)> = outputs.iter().map(|o| (o.buffer.as_str(), o.variation.is_some())).collect();
        assert_eq!(said, [("output/b8/y", true), ("output/b8/z", false)]);
        assert_eq!(outputs[1].sha256, sha256(&first));
        let kept: Vec<(&(String, String), &Vec<u8>)> = expected.first_launches.iter().collect();
        assert_eq!(kept, [(&("b8".to_owned(), "output/b8/y".to_owned()), &first)]);
        let file = outputs[0].variation.as_ref().map(|v| v.file.as_str());
        assert_eq!(file, Some(format!("outputs/{}.bin", sha256(&first)).as_str()), "its first launch, stored");
        assert_eq!(asked.get(), 0, "no template runs a kernel found to vary: nothing is launched again");
    }

    fn sha256(bytes: &[u8]) -> String {
        sha256_each(&[bytes]).remove(0)
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn compared_as(buffer: &str) -> Compared {
        Compared { buffer: buffer.into(), element: Element::Float32, templates: Vec::new(), logits: None }
    }

    fn compared(element: Element) -> Compared {
        Compared { element, ..compared_as("output/y") }
    }

    /// An output is varying when one launch gave other bytes; its spread is the widest of
    /// any launch from the first, and each other digest is listed once.
    #[test]
    fn launches_that_differ_widen_the_spread_and_list_their_digests_once() {
        let c = compared(Element::Float32);
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let one_ulp = f32::from_bits(2.0f32.to_bits() + 1);
        let three_ulp = f32::from_bits(2.0f32.to_bits() + 3);
        let launch = |v: &[f32]| (bytes(v), sha256(&bytes(v)));
        let (first, digest) = launch(&[1.0, 2.0]);
        let mut o = Observed::first(&c, first, digest);
        let again = |o: &mut Observed, v: &[f32]| {
            let (b, d) = launch(v);
            o.again(&b, d)
        };
        again(&mut o, &[1.0, 2.0]);
        assert!(o.others.is_empty(), "the same bytes again");
        again(&mut o, &[1.0, one_ulp]);
        again(&mut o, &[1.0, three_ulp]);
        again(&mut o, &[1.0, one_ulp]);
        assert_eq!(o.others.len(), 2);
        assert_eq!((o.spread.max_ulp, o.spread.differing, o.spread.elements), (3, 1, 2));
        assert_eq!(o.spread.differing_fraction(), 0.5);
    }

    /// A logits output's tokens are recorded row by row over its launches: each argmax
    /// once, past the logits nothing, and in the variation it records.
    #[test]
    fn a_logits_output_records_each_rows_tokens() {
        use crate::declare::Logits;

        let c = Compared { logits: Some(Logits { vocabulary: 2, rows: 2 }), ..compared(Element::Float32) };
        let first = f32s(&[1.0, 0.0, 0.0, 1.0, 9.0]);
        let mut o = Observed::first(&c, first.clone(), sha256(&first));
        for launch in [[0.0, 1.0, 0.0, 1.0, 9.0], [1.0, 0.0, 0.0, 1.0, -9.0]] {
            o.again(&f32s(&launch), sha256(&f32s(&launch)));
        }
        let v = o.variation(3, "outputs/y.bin".into(), Vec::new());
        assert_eq!(v.tokens, Some(gnomon_format::spread::Tokens { vocabulary: 2, rows: vec![vec![0, 1], vec![1]] }));
        let plain = compared(Element::Float32);
        assert_eq!(Observed::first(&plain, first.clone(), sha256(&first)).tokens, None);
    }

    /// Once its template's launches are judged, an output that did not vary lets its first
    /// launch's bytes go, and one that varied keeps them for the core.
    #[test]
    fn only_a_varying_output_keeps_its_first_launchs_bytes() {
        let c = compared(Element::Float32);
        let (first, other) = (f32s(&[1.0, 2.0]), f32s(&[1.0, 2.5]));
        let mut fixed = Observed::first(&c, first.clone(), sha256(&first));
        fixed.again(&first, sha256(&first));
        let mut varying = Observed::first(&c, first.clone(), sha256(&first));
        varying.again(&other, sha256(&other));
        fixed.forget_first_unless_varied();
        varying.forget_first_unless_varied();
        assert_eq!((fixed.first.len(), varying.first), (0, first));
    }

    /// Under the second poison, an output is read back only where its sum is none its
    /// launches gave.
    #[test]
    fn only_outputs_whose_sum_no_launch_gave_are_read_under_the_second_poison() {
        let (a, b) = (compared_as("output/a"), compared_as("output/b"));
        let mut observed = [Observed::first(&a, Vec::new(), sha256(&[])), Observed::first(&b, Vec::new(), sha256(&[]))];
        (observed[0].sums, observed[1].sums) = (HashSet::from([1]), HashSet::from([2, 3]));
        let read =
            |sums: &[u64]| unseen(&observed, sums).iter().map(|o| o.compared.buffer.as_str()).collect::<Vec<_>>();
        assert_eq!(read(&[1, 3]), Vec::<&str>::new(), "each sum one of its launches gave");
        assert_eq!(read(&[1, 4]), ["output/b"]);
        assert_eq!(read(&[2, 2]), ["output/a"], "another output's sum is not its own");
    }

    /// What a launch under the second poison is held to: any digest a launch gave; for an
    /// output that never varied, or of bytes, nothing else; for a varying float output,
    /// the spread its launches showed and the limits their distances give.
    #[test]
    fn a_launch_departs_only_past_what_the_launches_showed() {
        let c = compared(Element::Float32);
        let launch = |x: f32| f32s(&[x, x, x, x]);
        let first = launch(4.0);
        let mut o = Observed::first(&c, first.clone(), sha256(&first));
        let other = launch(4.5);
        assert!(o.departs(&other, &sha256(&other)).unwrap().contains("which none of its launches gave"));
        let wider = launch(4.25);
        o.again(&wider, sha256(&wider));
        assert_eq!(o.departs(&wider, &sha256(&wider)), None, "a digest a launch gave");
        let within = launch(4.3);
        assert_eq!(o.departs(&within, &sha256(&within)), None, "within the spread and its distance's limit");
        let nan = f32s(&[4.0, 4.0, 4.0, f32::NAN]);
        assert!(o.departs(&nan, &sha256(&nan)).unwrap().contains("1 of its 4 elements lie outside"));
        // Each element within 4 × 0.25, the RMS distance 0.9 past 0.25 × (1 + 5 × 0.5).
        let moved = launch(4.9);
        let said = o.departs(&moved, &sha256(&moved)).unwrap();
        assert_eq!(said, "`output/y`: its RMS distance is past the limit its launches give");
    }
}
