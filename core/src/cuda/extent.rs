//! Where a memset or copy node writes, when it is one contiguous run of bytes: a 1-D node,
//! or a 2-D/3-D one whose rows (and planes) follow each other with no gap. A pitched node
//! whose rows leave gaps, or a copy from or to a CUDA array, is described instead, so the
//! exporter can refuse it by name: rebuilt flat it would write the gaps between rows.

use cudarc::driver::sys;

/// A memset's first byte and element count, or what it is when its rows leave gaps.
pub(super) fn memset(p: &sys::CUDA_MEMSET_NODE_PARAMS) -> Result<(u64, u64), String> {
    let row = p.width as u64 * u64::from(p.elementSize);
    match p.height <= 1 || p.pitch as u64 == row {
        true => Ok((p.dst, (p.width * p.height.max(1)) as u64)),
        false => Err(format!(
            "2-D memset of {} rows of {} elements of {} bytes, each row {} bytes from the last",
            p.height, p.width, p.elementSize, p.pitch
        )),
    }
}

/// A copy's source and destination first bytes and its length, or what it is when it is
/// not one contiguous run at either end.
pub(super) fn copy(p: &sys::CUDA_MEMCPY3D) -> Result<(u64, u64, u64), String> {
    use sys::CUmemorytype::CU_MEMORYTYPE_ARRAY;
    if p.srcMemoryType == CU_MEMORYTYPE_ARRAY || p.dstMemoryType == CU_MEMORYTYPE_ARRAY {
        return Err("copy from or to a CUDA array".into());
    }
    let (width, height, depth) = (p.WidthInBytes as u64, (p.Height as u64).max(1), (p.Depth as u64).max(1));
    let end = |base: u64, x: usize, y: usize, z: usize, pitch: usize, rows: usize| {
        let (pitch, rows) = (pitch as u64, rows as u64);
        let rows_follow = height == 1 || pitch == width;
        let planes_follow = depth == 1 || rows == height;
        let start = base + x as u64 + (y as u64 + z as u64 * rows) * pitch;
        (rows_follow && planes_follow).then_some(start)
    };
    let src = end(p.srcDevice, p.srcXInBytes, p.srcY, p.srcZ, p.srcPitch, p.srcHeight);
    let dst = end(p.dstDevice, p.dstXInBytes, p.dstY, p.dstZ, p.dstPitch, p.dstHeight);
    match (src, dst) {
        (Some(src), Some(dst)) => Ok((src, dst, width * height * depth)),
        _ => Err(format!(
            "{}-D copy of {depth} × {height} rows of {width} bytes, source pitch {} and offset ({}, {}, {}), \
             destination pitch {} and offset ({}, {}, {})",
            if depth > 1 { 3 } else { 2 },
            p.srcPitch,
            p.srcXInBytes,
            p.srcY,
            p.srcZ,
            p.dstPitch,
            p.dstXInBytes,
            p.dstY,
            p.dstZ
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memset_of(width: usize, height: usize, pitch: usize) -> sys::CUDA_MEMSET_NODE_PARAMS {
        // SAFETY: plain data; every field valid when zero.
        let mut p: sys::CUDA_MEMSET_NODE_PARAMS = unsafe { std::mem::zeroed() };
        (p.dst, p.elementSize, p.width, p.height, p.pitch) = (0x1000, 4, width, height, pitch);
        p
    }

    #[test]
    fn a_memset_is_flat_when_its_rows_touch() {
        assert_eq!(memset(&memset_of(256, 1, 0)), Ok((0x1000, 256)));
        assert_eq!(memset(&memset_of(256, 8, 1024)), Ok((0x1000, 2048)), "rows of 1 KiB, 1 KiB apart");
        let pitched = memset(&memset_of(256, 8, 2048)).unwrap_err();
        assert_eq!(pitched, "2-D memset of 8 rows of 256 elements of 4 bytes, each row 2048 bytes from the last");
    }

    fn copy_of(width: usize, height: usize, depth: usize) -> sys::CUDA_MEMCPY3D {
        let mut p = super::super::node::device_copy(0x2000, 0x1000, 0);
        (p.WidthInBytes, p.Height, p.Depth) = (width, height, depth);
        p
    }

    #[test]
    fn a_copy_is_flat_when_both_ends_are_one_run_and_its_offsets_move_its_start() {
        assert_eq!(copy(&copy_of(4096, 1, 1)), Ok((0x1000, 0x2000, 4096)));
        let mut offset = copy_of(64, 1, 1);
        (offset.srcXInBytes, offset.srcY, offset.srcPitch) = (16, 2, 256);
        assert_eq!(copy(&offset), Ok((0x1000 + 16 + 2 * 256, 0x2000, 64)), "a 1-D copy from an offset");
        let mut rows = copy_of(256, 4, 1);
        (rows.srcPitch, rows.dstPitch) = (256, 256);
        assert_eq!(copy(&rows), Ok((0x1000, 0x2000, 1024)), "rows that touch at both ends");
        let mut pitched = copy_of(256, 4, 1);
        (pitched.srcPitch, pitched.dstPitch) = (512, 256);
        let said = copy(&pitched).unwrap_err();
        assert!(said.starts_with("2-D copy of 1 × 4 rows of 256 bytes, source pitch 512"), "{said}");
        let mut planes = copy_of(256, 4, 2);
        (planes.srcPitch, planes.dstPitch, planes.srcHeight, planes.dstHeight) = (256, 256, 4, 8);
        assert!(copy(&planes).unwrap_err().starts_with("3-D copy"), "a destination plane of 8 rows leaves gaps");
        let mut array = copy_of(256, 1, 1);
        array.dstMemoryType = sys::CUmemorytype::CU_MEMORYTYPE_ARRAY;
        assert_eq!(copy(&array), Err("copy from or to a CUDA array".into()));
    }
}
