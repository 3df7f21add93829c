"""A `cuda` device on a CPU-only machine, for tests: tensors that say `cuda:0` and hold real CPU values.

torch's FakeTensorMode gives tensors a `cuda` device without memory, but it cannot stand in for a whole run
here: a CPU-only torch refuses `.to("cuda")` even under FakeTensorMode ("not linked with support for cuda
devices"), and a fake tensor has no values, so `.item()`, `.tolist()` and every check the code makes on its
schedules raise DataDependentOutputException. `FakeCuda` keeps FakeTensor's device rule and adds the values:

- `CudaTensor` is a wrapper subclass (as FakeTensor is) whose device is `cuda:0`, around a real CPU tensor;
- `FakeCuda()`, a TorchDispatchMode, runs every aten op. An op that touches a CudaTensor, or is asked for
  `device="cuda"`, refuses CPU tensors among its inputs as CUDA does ("Expected all tensors to be on the
  same device"; CUDA's exceptions stay allowed: 0-dim CPU scalars, CPU indices, copies between devices),
  then runs on the real values and wraps its outputs as `cuda`;
- while it is active, the Tensor methods whose C++ binding sets a CUDA device guard or initialises CUDA
  before any dispatch mode sees the op (`.to`, `.cuda`, `.contiguous`, indexing, `.item`, `.tolist`,
  `.cpu`, `bool(t)`, ...) and `torch.tensor` / `torch.as_tensor` are replaced by versions that act on the
  host values (a CPU-only torch refuses the originals on a `cuda` tensor);
- it counts the host syncs a real GPU would make: reading values on the host (`.item()`, `.tolist()`,
  `bool(t)`, ...), copies to the CPU, and the ops whose output size depends on values (nonzero,
  masked_select, boolean indexing). `syncs` holds the counts per kind.

Limits: recording autograd on a `cuda` tensor aborts a CPU-only torch (its engine wants a CUDA device
guard), so losses are checked forward only, under no_grad; and a library whose lazy import happens inside
FakeCuda may keep a patched method, so load each pipeline once outside it first.
"""

from __future__ import annotations

from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

__all__ = ["CudaTensor", "FakeCuda", "CUDA"]

CUDA = torch.device("cuda", 0)
aten = torch.ops.aten

#: ops whose output shape depends on tensor values: on a GPU each waits for the device
_SIZE_FROM_VALUES = {aten.nonzero.default, aten.masked_select.default, aten.unique_consecutive.default,
                     aten._unique2.default, aten.repeat_interleave.Tensor}
#: ops CUDA runs with CPU index tensors among their inputs
_CPU_INDICES_OK = {aten.index.Tensor, aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default}


class CudaTensor(torch.Tensor):
    """A tensor on `cuda:0` whose values live in the real CPU tensor `.host` (see the module doc)."""

    host: torch.Tensor

    @staticmethod
    def __new__(cls, real: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(
            cls, real.shape, strides=real.stride(), storage_offset=real.storage_offset(), dtype=real.dtype,
            layout=real.layout, device=CUDA, requires_grad=False,
        )

    def __init__(self, real: torch.Tensor):
        self.host = real

    def __repr__(self):
        return f"CudaTensor({self.host!r})"

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError(f"{func}: a fake-CUDA tensor was used outside FakeCuda()")


def _is_cuda(device) -> bool:
    return device is not None and torch.device(device).type == "cuda"


class FakeCuda(TorchDispatchMode):
    """The dispatch mode that gives CudaTensor its device semantics and counts host syncs (module doc)."""

    def __init__(self):
        super().__init__()
        self.syncs: Counter = Counter()
        self.ops = 0

    def __enter__(self):
        # Module.to(cuda) must put a new Parameter (a CudaTensor) in place: with `param.data = ...` the old
        # Parameter object would hold the wrapper's storage without being a CudaTensor
        self._overwrite = torch.__future__.get_overwrite_module_params_on_conversion()
        torch.__future__.set_overwrite_module_params_on_conversion(True)
        self._lazy_init, torch.cuda._lazy_init = torch.cuda._lazy_init, lambda: None  # factories with device=cuda
        # one visible GPU, as on the machine this stands in for (--device cuda is refused on a CPU-only build)
        self._cuda_query = torch.cuda.is_available, torch.cuda.device_count
        torch.cuda.is_available, torch.cuda.device_count = (lambda: True), (lambda: 1)
        self._orig, patched = _patched_methods(self)
        # the names torch.Tensor defines itself; the others it inherits from TensorBase and gets back when the
        # patch is deleted. (Once __getitem__ was set on Tensor, CPython keeps its sequence slot: after this
        # mode, torch.tensor([0-d tensors]) calls len() on them in this process. jsbench uses torch.stack.)
        self._own = {name for name in self._orig if name in torch.Tensor.__dict__}
        for name, fn in patched.items():
            setattr(torch.Tensor, name, fn)
        self._factories = {name: getattr(torch, name) for name in ("tensor", "as_tensor")}
        for name, fn in self._factories.items():
            setattr(torch, name, _from_data(fn))
        return super().__enter__()

    def __exit__(self, *exc):
        out = super().__exit__(*exc)
        for name, fn in self._orig.items():
            if name in self._own:
                setattr(torch.Tensor, name, fn)
            else:
                delattr(torch.Tensor, name)
        for name, fn in self._factories.items():
            setattr(torch, name, fn)
        torch.cuda._lazy_init = self._lazy_init
        torch.cuda.is_available, torch.cuda.device_count = self._cuda_query
        torch.__future__.set_overwrite_module_params_on_conversion(self._overwrite)
        return out

    @property
    def total_syncs(self) -> int:
        return sum(self.syncs.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        self.ops += 1
        flat, _ = tree_flatten((args, kwargs))
        tensors = [a for a in flat if isinstance(a, torch.Tensor)]
        fake = [t for t in tensors if isinstance(t, CudaTensor)]
        to_cuda = _is_cuda(kwargs.get("device"))
        to_cpu = "device" in kwargs and kwargs["device"] is not None and not to_cuda
        packet = func.overloadpacket

        if packet is aten._local_scalar_dense:
            if fake:
                self.syncs["item"] += 1
            return func(*tree_map(_real, args), **tree_map(_real, kwargs))
        if packet is aten._to_copy:
            src = args[0]
            out = func(*tree_map(_real, args), **{**tree_map(_real, kwargs), **({"device": torch.device("cpu")} if to_cuda else {})})
            if to_cuda or (isinstance(src, CudaTensor) and not to_cpu):
                return CudaTensor(out)
            if isinstance(src, CudaTensor):
                self.syncs["copy to cpu"] += 1
            return out
        if packet is aten.copy_:
            dst, src = args[0], args[1]
            if isinstance(src, CudaTensor) and not isinstance(dst, CudaTensor):
                self.syncs["copy to cpu"] += 1
            func(_real(dst), _real(src), *args[2:], **kwargs)
            return dst
        if not fake and not to_cuda:
            return func(*args, **kwargs)

        cpu = [t for t in tensors if not isinstance(t, CudaTensor) and t.device.type == "cpu" and t.dim() > 0]
        if cpu and func not in _CPU_INDICES_OK:
            raise RuntimeError(
                f"Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! "
                f"({func}: CPU inputs of shape {[tuple(t.shape) for t in cpu]})"
            )
        gen = kwargs.get("generator")
        if gen is not None and gen.device.type != "cuda":
            raise RuntimeError(f"Expected a 'cuda' device type for generator but found '{gen.device.type}' ({func})")
        if func in _SIZE_FROM_VALUES or (packet is aten.index and any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] if len(args) > 1 else []))):
            self.syncs[str(packet)] += 1
        if to_cuda:
            kwargs["device"] = torch.device("cpu")
        real_args, real_kwargs = tree_map(_real, args), tree_map(_real, kwargs)
        out = func(*real_args, **real_kwargs)
        by_real = {id(r): a for a, r in zip(flat, tree_flatten((real_args, real_kwargs))[0]) if isinstance(a, CudaTensor)}

        def wrap(t):
            if not isinstance(t, torch.Tensor):
                return t
            if id(t) in by_real:  # an in-place op returns its (fake-CUDA) argument
                return by_real[id(t)]
            return CudaTensor(t)

        return tree_map(wrap, out)


class _ToHost(torch.autograd.Function):
    """CudaTensor -> its host tensor, gradients flowing back as CudaTensor (for the patched calls below)."""

    @staticmethod
    def forward(ctx, x):
        return x.host.view_as(x.host)

    @staticmethod
    def backward(ctx, grad):
        return grad if isinstance(grad, CudaTensor) else CudaTensor(grad)


class _ToDevice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h):
        return CudaTensor(h.view_as(h))

    @staticmethod
    def backward(ctx, grad):
        return grad.host if isinstance(grad, CudaTensor) else grad


def _host_arg(a):
    return _ToHost.apply(a) if isinstance(a, CudaTensor) else a


def _to_device(out: torch.Tensor) -> torch.Tensor:
    return _ToDevice.apply(out) if out.requires_grad else CudaTensor(out)


def _check_index(index) -> None:
    for i in index:
        if isinstance(i, torch.Tensor) and not isinstance(i, CudaTensor) and i.dtype not in (torch.long, torch.int, torch.bool):
            raise RuntimeError(f"fake CUDA: a {i.dtype} CPU tensor used as an index")


#: Tensor methods whose C++ binding initialises CUDA or sets a CUDA device guard before any dispatch mode sees
#: the op (a CPU-only torch refuses both): FakeCuda replaces them while it is active. Those that read values
#: on the host (item, tolist, bool(t), ...) are host syncs.
_READS_ON_HOST = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__")


def _patched_methods(counter: "FakeCuda") -> dict:
    orig = {name: getattr(torch.Tensor, name) for name in ("to", "cuda", "contiguous", "__getitem__", "__setitem__", *_READS_ON_HOST)}

    def to(self, *args, **kwargs):
        device, dtype, _, _ = torch._C._nn._parse_to(*args, **{k: v for k, v in kwargs.items() if k != "copy"})
        on_cuda = isinstance(self, CudaTensor)
        if not on_cuda and not _is_cuda(device):
            return orig["to"](self, *args, **kwargs)
        if device is not None and not _is_cuda(device):  # to the host
            counter.syncs["to(cpu)"] += 1
            return orig["to"](self.host, device=device, dtype=dtype or self.dtype)
        if on_cuda and (dtype is None or dtype == self.dtype):
            return self
        return _to_device(orig["to"](_host_arg(self), dtype=dtype or self.dtype, copy=True))

    def cuda(self, *args, **kwargs):
        return to(self, CUDA)

    def contiguous(self, *args, **kwargs):
        if not isinstance(self, CudaTensor):
            return orig["contiguous"](self, *args, **kwargs)
        return _to_device(orig["contiguous"](_host_arg(self), *args, **kwargs))

    def getitem(self, index):
        if not isinstance(self, CudaTensor):
            return orig["__getitem__"](self, index)
        index = index if isinstance(index, tuple) else (index,)
        _check_index(index)
        return _to_device(orig["__getitem__"](_host_arg(self), tuple(_host_arg(i) for i in index)))

    def setitem(self, index, value):
        if not isinstance(self, CudaTensor):
            if isinstance(value, CudaTensor):
                counter.syncs["setitem(cpu)"] += 1
                value = value.host
            return orig["__setitem__"](self, index, value)
        index = index if isinstance(index, tuple) else (index,)
        _check_index(index)
        if isinstance(value, torch.Tensor) and not isinstance(value, CudaTensor) and value.dim() > 0:
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! (setitem)")
        if self.requires_grad or (isinstance(value, torch.Tensor) and value.requires_grad):
            raise NotImplementedError("fake CUDA: setitem on a tensor that requires grad")
        with torch.no_grad():
            orig["__setitem__"](self.host, tuple(_real(i) for i in index), _real(value))

    def host_read(name):
        def read(self, *args, **kwargs):
            if isinstance(self, CudaTensor):
                counter.syncs[name] += 1
                return orig[name](self.host, *args, **kwargs)
            return orig[name](self, *args, **kwargs)
        return read

    patched = {"to": to, "cuda": cuda, "contiguous": contiguous, "__getitem__": getitem, "__setitem__": setitem}
    patched.update({name: host_read(name) for name in _READS_ON_HOST})
    return orig, patched


def _from_data(factory):
    """torch.tensor / torch.as_tensor: on `cuda` (given, or the default device) they are made on the host and
    wrapped (their C++ binding sets a CUDA device guard)."""

    def make(data, *args, **kwargs):
        device = kwargs.get("device") or _default_device()
        if not _is_cuda(device):
            return factory(data, *args, **kwargs)
        if isinstance(data, CudaTensor):
            return data.to(dtype=kwargs.get("dtype") or data.dtype)
        return CudaTensor(factory(data, *args, **{**kwargs, "device": torch.device("cpu")}))

    return make


def _default_device():
    """The device of a `with torch.device(...)` block around the call, else None (torch.get_default_device()
    would call torch.tensor)."""
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._device import DeviceContext

    contexts = [m for m in _get_current_function_mode_stack() if isinstance(m, DeviceContext)]
    return contexts[-1].device if contexts else None


def _real(t):
    return t.host if isinstance(t, CudaTensor) else t
