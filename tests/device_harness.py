"""A device-discipline harness that runs on the CPU: tensors that say they live on ``cuda:N`` (real values, CPU
storage) and fail, as CUDA would, on any operation that mixes them with CPU tensors or with tensors of another
GPU, and on any device-to-host conversion that skips ``.cpu()``.

``Pretend`` is a ``torch.Tensor`` subclass:

- its ``device`` is ``cuda:N`` (N: ``cuda(t, N)``, default 0); ``.to("cuda:M")``/``.cuda()`` move it (a copy when M
  differs), ``.to("cpu")``/``.cpu()`` give a plain tensor (the copy to the host);
- an operation whose tensor arguments mix ``Pretend`` and plain CPU tensors, or ``Pretend`` tensors of two GPUs,
  raises ``DeviceMismatch`` (0-dim CPU tensors are allowed, as CUDA allows CPU scalars, and so are the lengths
  ``pack_padded_sequence`` takes on the host), and so does an in-place write into a plain tensor;
- ``.numpy()`` of a ``Pretend`` raises ``DeviceMismatch`` (CUDA needs ``.cpu()`` first); ``.tolist()``,
  ``float()/int()/.item()`` are allowed (CUDA synchronises and copies to the host);
- results of operations on ``Pretend`` tensors are ``Pretend`` on the same GPU; factory functions given
  ``device=cuda…`` make one there.

``device_map_to_cuda`` places a model's modules on several pretended GPUs with accelerate's own hooks
(``AlignDevicesHook``: each module's inputs moved to its GPU, outputs left where they are computed), as
``device_map`` loading does.
"""

from __future__ import annotations

import contextlib

import torch
from torch.overrides import TorchFunctionMode

CUDA = torch.device("cuda:0")


class DeviceMismatch(RuntimeError):
    pass


def _is_cuda(d) -> bool:
    return d is not None and str(d).startswith("cuda")


def _index(d) -> int:
    """The GPU index a device names (``cuda`` alone: 0, the current device here)."""
    d = torch.device(d) if isinstance(d, str) else d
    return d.index or 0


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _tensors(y)


def _wrap(x, idx: int = 0):
    if isinstance(x, torch.Tensor):
        if not isinstance(x, Pretend):
            x = x.as_subclass(Pretend)
        x._fb_gpu = idx
        return x
    if isinstance(x, (list, tuple)):
        return (type(x)(_wrap(y, idx) for y in x) if not hasattr(x, "_fields")
                else type(x)(*(_wrap(y, idx) for y in x)))
    return x


def _target(func, args, kwargs):
    return kwargs.get("device") or next((a for a in args[1:] if isinstance(a, (str, torch.device, int))
                                         and not isinstance(a, bool)), None)


def _unwrap_plain(x):
    return x.as_subclass(torch.Tensor) if isinstance(x, Pretend) else x


_HOST = {torch.Tensor.numpy, torch.Tensor.__array__}  # tolist() and item() copy to the host on CUDA too
_TO_HOST = {torch.Tensor.cpu}
_MOVES = {torch.Tensor.to, torch.Tensor.cuda}
_INPLACE_OK = {torch.Tensor.__setitem__}
# operations that take host tensors on CUDA by design (packed sequences keep their batch sizes and lengths on the
# CPU): the positions of their outputs that stay on the host
_HOST_ARGUMENTS = {"_pack_padded_sequence": (1,), "_pad_packed_sequence": (1,), "lstm": ()}


class Pretend(torch.Tensor):
    @property
    def device(self):  # noqa: D401 - what the code under test sees
        return torch.device("cuda", getattr(self, "_fb_gpu", 0))

    @property
    def is_cuda(self):
        return True

    def __deepcopy__(self, memo):
        """A copy on the same pretended GPU (a module deep-copied with its weights there: a parser's variant)."""
        if id(self) in memo:
            return memo[id(self)]
        with torch._C.DisableTorchFunctionSubclass():
            plain = self.as_subclass(torch.Tensor).detach().clone()
        out = _wrap(plain, getattr(self, "_fb_gpu", 0)).requires_grad_(self.requires_grad)
        if getattr(self, "_is_param", False):
            out._is_param = True
        memo[id(self)] = out
        return out

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.device.__get__, torch.Tensor.is_cuda.__get__):  # pragma: no cover - properties
            return args[0].device if func is torch.Tensor.device.__get__ else True
        if func in _HOST:
            raise DeviceMismatch(f"{func.__name__}() of a CUDA tensor: call .cpu() first")
        if func in _TO_HOST:
            with torch._C.DisableTorchFunctionSubclass():
                return args[0].as_subclass(torch.Tensor).clone()
        if func in _MOVES:
            target = _target(func, args, kwargs)
            if isinstance(target, int):
                target = f"cuda:{target}"
            if func is torch.Tensor.cuda or _is_cuda(target):
                idx = 0 if target is None else _index(target)
                rest = [a for a in args[1:] if not isinstance(a, (str, torch.device, int)) or isinstance(a, bool)]
                kw = {k: v for k, v in kwargs.items() if k not in ("device", "non_blocking")}
                if idx == args[0].device.index and not (rest or kw):
                    return args[0]
                with torch._C.DisableTorchFunctionSubclass():
                    plain = args[0].as_subclass(torch.Tensor)
                    out = plain.to(*rest, **kw) if (rest or kw) else plain.clone()
                    if out is plain:
                        out = plain.clone()
                return _wrap(out, idx)
            if target is not None and str(target) == "cpu":
                rest = [a for a in args[1:] if not isinstance(a, (str, torch.device))]
                kw = {k: v for k, v in kwargs.items() if k != "device"}
                with torch._C.DisableTorchFunctionSubclass():
                    return args[0].as_subclass(torch.Tensor).to(*rest, **kw).clone()
        ts = list(_tensors(args)) + list(_tensors(kwargs))
        plain = [t for t in ts if not isinstance(t, Pretend) and t.dim() > 0 and not t.is_meta]
        gpus = {t.device.index for t in ts if isinstance(t, Pretend)}
        if gpus and plain and getattr(func, "__name__", "") not in _HOST_ARGUMENTS:
            raise DeviceMismatch(f"{getattr(func, '__name__', func)}: CUDA and CPU tensors mixed "
                                 f"({[tuple(t.shape) for t in plain][:3]} on the CPU)")
        if len(gpus) > 1:
            raise DeviceMismatch(f"{getattr(func, '__name__', func)}: tensors of {sorted(f'cuda:{g}' for g in gpus)} "
                                 "mixed")
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        if func is torch.Tensor.__setitem__:
            return out
        host = _HOST_ARGUMENTS.get(getattr(func, "__name__", ""), ())
        if gpus and host and isinstance(out, tuple):
            g = gpus.pop()
            return type(out)(o if i in host else _wrap(o, g) for i, o in enumerate(out))
        return _wrap(out, gpus.pop()) if gpus else out


def cuda(t: torch.Tensor, gpu: int = 0) -> Pretend:
    """``t`` as a tensor on pretended GPU ``gpu``."""
    return _wrap(t.detach().clone().as_subclass(torch.Tensor), gpu).requires_grad_(t.requires_grad)


class _Pretending(TorchFunctionMode):
    """While active: factory functions given a CUDA device, and ``.to(cuda)`` / ``.cuda()`` of plain tensors, make
    ``Pretend`` tensors (on the CPU) instead of asking for a GPU."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _MOVES and args and isinstance(args[0], torch.Tensor) and not isinstance(args[0], Pretend):
            target = _target(func, args, kwargs)
            if isinstance(target, int):
                target = f"cuda:{target}"
            if func is torch.Tensor.cuda or _is_cuda(target):
                rest = [a for a in args[1:] if not isinstance(a, (str, torch.device, int)) or isinstance(a, bool)]
                kw = {k: v for k, v in kwargs.items() if k not in ("device", "non_blocking")}
                return _wrap(args[0].to(*rest, **kw) if (rest or kw) else args[0].clone(),
                             0 if target is None else _index(target))
        if _is_cuda(kwargs.get("device")):
            idx = _index(kwargs["device"])
            kwargs["device"] = "cpu"
            return _wrap(func(*args, **kwargs), idx)
        return func(*args, **kwargs)


@contextlib.contextmanager
def on_cuda():
    """The harness's mode: CUDA devices named by the code under test become pretended ones."""
    with _Pretending():
        yield


def module_to_cuda(module: torch.nn.Module, gpu: int = 0, moved: dict | None = None) -> torch.nn.Module:
    """Every parameter and buffer of ``module`` on pretended GPU ``gpu`` (in place; a tied parameter stays one:
    ``moved``, original id -> its moved parameter, shared over calls)."""
    moved = {} if moved is None else moved
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is not None:
                if id(p) not in moved:
                    moved[id(p)] = torch.nn.Parameter(cuda(p.data, gpu), requires_grad=p.requires_grad)
                m._parameters[name] = moved[id(p)]
        for name, b in list(m._buffers.items()):
            if b is not None:
                m._buffers[name] = cuda(b, gpu)
    return module


def device_map_to_cuda(model: torch.nn.Module, device_map: dict[str, int]) -> torch.nn.Module:
    """``model``'s modules on pretended GPUs by ``device_map`` (qualified module name -> GPU index), each with
    accelerate's ``AlignDevicesHook`` moving its inputs there, and the model's own hook moving its outputs back to
    the first input's device (``io_same_device``), as ``dispatch_model`` sets them; ``hf_device_map`` recorded."""
    from accelerate.hooks import AlignDevicesHook, add_hook_to_module

    modules, moved = dict(model.named_modules()), {}
    for name, gpu in device_map.items():
        module_to_cuda(modules[name], gpu, moved)
        add_hook_to_module(modules[name], AlignDevicesHook(execution_device=torch.device("cuda", gpu)), append=True)
    add_hook_to_module(model, AlignDevicesHook(io_same_device=True), append=True)
    model.hf_device_map = dict(device_map)
    return model
