from cuda.bindings import driver as cu
def ok(r):
    err = r[0]; return (err.name if hasattr(err,'name') else str(err)), r[1:]
print(ok(cu.cuInit(0)))
e, (dev,) = ok(cu.cuDeviceGet(0))
e, (ctx,) = ok(cu.cuDevicePrimaryCtxRetain(dev)); cu.cuCtxSetCurrent(ctx)
prop = cu.CUmemAllocationProp()
prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
prop.location.id = 0
prop.requestedHandleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
e, (g,) = ok(cu.cuMemGetAllocationGranularity(prop, cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM)); print("gran", g)
size = 4*g
e, (h,) = ok(cu.cuMemCreate(size, prop, 0)); print("create", e)
FD = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
def trial(name, handle, msize, off):
    e, (p,) = ok(cu.cuMemAddressReserve(msize, 0, 0, 0))
    r = ok(cu.cuMemMap(p, msize, off, handle, 0))[0]
    print(name, "size", msize//g, "gran off", off//g, "gran ->", r)
    if r == "CUDA_SUCCESS": cu.cuMemUnmap(p, msize)
    cu.cuMemAddressFree(p, msize)
trial("own whole", h, size, 0)
trial("own partial", h, 2*g, 0)
trial("own offset", h, 2*g, 2*g)
e, (fd,) = ok(cu.cuMemExportToShareableHandle(h, FD, 0)); print("export", e, fd)
e, (h2,) = ok(cu.cuMemImportFromShareableHandle(fd, FD)); print("import", e)
trial("imported whole", h2, size, 0)
trial("imported partial", h2, 2*g, 0)
trial("imported offset", h2, 2*g, 2*g)
