//! `gpu/record/`: the images the driver loads are recorded as it loads them (CUPTI's
//! module-loaded callback), each kernel of a captured graph maps to exactly one recorded
//! image by its module's kernels, and the graph's kernels loaded again from those images
//! alone compute what the CPU reference says.

use gnomon_core::{
    cuda::{Module, NodeKind},
    record::{image_of, images_by_entries, ImageRecorder, LoadedImage},
};
use gnomon_fixtures::kernels::REDUCTION;

use super::{Chain, Gpu};
use crate::{accepted, ensure, measured, Case, Verdict};

pub fn cases() -> Vec<Case> {
    vec![Case::gpu("gpu/record/images-at-load", "images-recorded-at-load", |ctx| {
        // CUPTI is a precondition of the case, not the subject: without it the case is blocked.
        let recorder = ImageRecorder::start().map_err(|e| Verdict::Blocked(e.to_string()))?;
        let gpu = Gpu::open()?;
        let chain = Chain::new(&gpu)?;
        // A second module loaded after the chain's, so a recorder that hands out the last
        // image it saw maps the chain's kernels to the wrong one.
        let _other = gpu.module(REDUCTION)?;
        let template = accepted(gpu.stream.capture(|s| chain.issue(s)), "capture the chain")?;
        let images = recorder.heard(&gpu.ctx).images;
        let by_entries = images_by_entries(&gpu.ctx, &images).map_err(|e| Verdict::Failed(e.to_string()))?;
        let kernels = accepted(template.kernel_functions(), "read the kernels' modules")?;
        let nodes = accepted(template.nodes(), "read the nodes")?;
        chain.reset()?;
        for (id, function, module) in &kernels {
            let function = function.name();
            let image = image_of(function, module, &images, &by_entries).map_err(|e| Verdict::Failed(e.to_string()))?;
            let reloaded = Module::load(&gpu.ctx, &image.bytes).map_err(|e| Verdict::Failed(e.to_string()))?;
            let kernel = reloaded
                .function(function)
                .map_err(|e| Verdict::Failed(format!("the image mapped to `{function}` lacks it: {e}")))?;
            let NodeKind::Kernel { grid, block, shared_mem, params, layout, .. } = &nodes[id.0].kind else {
                return Err(Verdict::Failed(format!("node {} is not a kernel", id.0)));
            };
            ensure(kernel.layout() == layout.as_slice(), || format!("`{function}` from its image has another layout"))?;
            accepted(gpu.stream.launch(&kernel, *grid, *block, *shared_mem, params), "launch from the image")?;
        }
        accepted(gpu.stream.synchronize(), "run the kernels loaded from their images")?;
        chain.check()?;
        // Each reload above was a library, unloaded at the end of its turn: hearing again
        // must not hand those handles to the driver, and finds the same images.
        let again = recorder.heard(&gpu.ctx).images;
        let digests = |images: &[LoadedImage]| images.iter().map(|i| i.sha256.clone()).collect::<Vec<_>>();
        ensure(digests(&again) == digests(&images), || {
            "after the reloads were unloaded, other images were heard".into()
        })?;
        let loads: u32 = images.iter().map(|i| i.loads).sum();
        ctx.metrics(
            [
                measured("images", images.len() as f64, "1"),
                measured("image-loads", loads as f64, "1"),
                measured("kernel-nodes-mapped", kernels.len() as f64, "1"),
            ]
            .into(),
        );
        Ok(())
    })]
}
