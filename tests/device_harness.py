"""A device-discipline harness that runs on the CPU: tensors that say they live on ``cuda:0`` (real values, CPU
storage) and fail, as CUDA would, on any operation that mixes them with CPU tensors and on any device-to-host
conversion that skips ``.cpu()``.

``Pretend`` is a ``torch.Tensor`` subclass:

- its ``device`` is ``cuda:0``; ``.to("cuda…")``/``.cuda()`` keep it there, ``.to("cpu")``/``.cpu()`` give a plain
  tensor (the copy to the host);
- an operation whose tensor arguments mix ``Pretend`` and plain CPU tensors raises ``DeviceMismatch`` (0-dim CPU
  tensors are allowed, as CUDA allows CPU scalars), and so does an in-place write into a plain tensor;
- ``.numpy()`` of a ``Pretend`` raises ``DeviceMismatch`` (CUDA needs ``.cpu()`` first); ``.tolist()``,
  ``float()/int()/.item()`` are allowed (CUDA synchronises and copies to the host);
- results of operations on ``Pretend`` tensors are ``Pretend``; factory functions given ``device=cuda…`` make one.
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


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _tensors(y)


def _wrap(x):
    if isinstance(x, torch.Tensor) and not isinstance(x, Pretend):
        return x.as_subclass(Pretend)
    if isinstance(x, (list, tuple)):
        return type(x)(_wrap(y) for y in x) if not hasattr(x, "_fields") else type(x)(*(_wrap(y) for y in x))
    return x


def _unwrap_plain(x):
    return x.as_subclass(torch.Tensor) if isinstance(x, Pretend) else x


_HOST = {torch.Tensor.numpy, torch.Tensor.__array__}  # tolist() and item() copy to the host on CUDA too
_TO_HOST = {torch.Tensor.cpu}
_MOVES = {torch.Tensor.to, torch.Tensor.cuda}
_INPLACE_OK = {torch.Tensor.__setitem__}


class Pretend(torch.Tensor):
    @property
    def device(self):  # noqa: D401 - what the code under test sees
        return CUDA

    @property
    def is_cuda(self):
        return True

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.device.__get__, torch.Tensor.is_cuda.__get__):  # pragma: no cover - properties
            return CUDA if func is torch.Tensor.device.__get__ else True
        if func in _HOST:
            raise DeviceMismatch(f"{func.__name__}() of a CUDA tensor: call .cpu() first")
        if func in _TO_HOST:
            with torch._C.DisableTorchFunctionSubclass():
                return args[0].as_subclass(torch.Tensor).clone()
        if func in _MOVES:
            target = kwargs.get("device") or next((a for a in args[1:] if isinstance(a, (str, torch.device))), None)
            if func is torch.Tensor.cuda or _is_cuda(target):
                rest = [a for a in args[1:] if not isinstance(a, (str, torch.device))]
                kw = {k: v for k, v in kwargs.items() if k != "device"}
                with torch._C.DisableTorchFunctionSubclass():
                    out = args[0].as_subclass(torch.Tensor).to(*rest, **kw) if (rest or kw) else args[0]
                return _wrap(out)
            if target is not None and str(target) == "cpu":
                rest = [a for a in args[1:] if not isinstance(a, (str, torch.device))]
                kw = {k: v for k, v in kwargs.items() if k != "device"}
                with torch._C.DisableTorchFunctionSubclass():
                    return args[0].as_subclass(torch.Tensor).to(*rest, **kw).clone()
        ts = list(_tensors(args)) + list(_tensors(kwargs))
        plain = [t for t in ts if not isinstance(t, Pretend) and t.dim() > 0 and not t.is_meta]
        if any(isinstance(t, Pretend) for t in ts) and plain:
            raise DeviceMismatch(f"{getattr(func, '__name__', func)}: CUDA and CPU tensors mixed "
                                 f"({[tuple(t.shape) for t in plain][:3]} on the CPU)")
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        if func is torch.Tensor.__setitem__:
            return out
        return _wrap(out) if any(isinstance(t, Pretend) for t in ts) else out


def cuda(t: torch.Tensor) -> Pretend:
    """``t`` as a tensor on the pretended GPU."""
    return t.detach().clone().as_subclass(Pretend).requires_grad_(t.requires_grad)


class _Pretending(TorchFunctionMode):
    """While active: factory functions given a CUDA device, and ``.to(cuda)`` / ``.cuda()`` of plain tensors, make
    ``Pretend`` tensors (on the CPU) instead of asking for a GPU."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _MOVES and args and isinstance(args[0], torch.Tensor) and not isinstance(args[0], Pretend):
            target = kwargs.get("device") or next((a for a in args[1:] if isinstance(a, (str, torch.device))), None)
            if func is torch.Tensor.cuda or _is_cuda(target):
                rest = [a for a in args[1:] if not isinstance(a, (str, torch.device))]
                kw = {k: v for k, v in kwargs.items() if k != "device"}
                return _wrap(args[0].to(*rest, **kw) if (rest or kw) else args[0].clone())
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
            return _wrap(func(*args, **kwargs))
        return func(*args, **kwargs)


@contextlib.contextmanager
def on_cuda():
    """The harness's mode: CUDA devices named by the code under test become pretended ones."""
    with _Pretending():
        yield


def module_to_cuda(module: torch.nn.Module) -> torch.nn.Module:
    """Every parameter and buffer of ``module`` on the pretended GPU (in place)."""
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is not None:
                m._parameters[name] = torch.nn.Parameter(cuda(p.data), requires_grad=p.requires_grad)
        for name, b in list(m._buffers.items()):
            if b is not None:
                m._buffers[name] = cuda(b)
    return module
