"""Stand-ins for the heavy modules (torch, numpy, ...) that the frameworks' argument and config
code imports but that the checks below never run: a module found through StubFinder answers every
attribute with a Stub, which can be called, subclassed, indexed and compared. The code under test
(Megatron-LM's argument parser and validate_args, DeepSpeed's config classes) is the frameworks'
own, read from their checkouts; nothing of theirs is copied here.

What a stub cannot do is named where it matters (validate-exports.py): anything that asks a
stubbed module for a real value (a device's compute capability, a tensor) gets a Stub back.
"""
import importlib.abc
import importlib.machinery
import sys
import types


class Stub:
    """Any attribute, call, index or operator gives another Stub; usable as a base class."""

    def __init__(self, name="stub"):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "__name__", name.rsplit(".", 1)[-1])  # registries key classes by name
        object.__setattr__(self, "__qualname__", name.rsplit(".", 1)[-1])

    def __getattr__(self, item):
        if item.startswith("__") and item.endswith("__"):
            raise AttributeError(item)
        return Stub(f"{self._name}.{item}")

    def __call__(self, *args, **kwargs):
        return Stub(f"{self._name}()")

    def __getitem__(self, item):
        return Stub(f"{self._name}[]")

    def __mro_entries__(self, bases):
        return ()  # class X(torch.nn.Module, ABC): the stub base drops out

    def __instancecheck__(self, instance):
        return False  # isinstance(x, torch.Tensor): nothing here is a tensor

    def __subclasscheck__(self, subclass):
        return False

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __float__(self):
        return 0.0  # module-level constants computed from numpy (a mask value): never checked here

    def __neg__(self):
        return self

    __mul__ = __rmul__ = __add__ = __radd__ = __sub__ = __rsub__ = __truediv__ = __rtruediv__ = lambda self, other: self

    def __repr__(self):
        return f"<stub {self._name}>"

    def __or__(self, other):
        return Stub(f"{self._name}|")

    __ror__ = __or__

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __lt__(self, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__


class StubDtype:
    """torch.dtype: code under test compares and maps dtypes by name (isinstance(d, torch.dtype))."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"


_DTYPES = ["float32", "float", "float16", "half", "bfloat16", "float64", "double", "int8", "int16", "int32",
           "int64", "long", "uint8", "bool", "float8_e4m3fn", "float8_e5m2", "complex64"]


class StubModule(types.ModuleType):
    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []  # a package: its submodules are stubs too
        # Transformer Engine: the version of the checkout the recipes were read at (NVIDIA/TransformerEngine
        # build_tools/VERSION.txt @ d0067d0: NVFP4, which Megatron asks TE >= 2.7.0.dev0 for, is in it).
        self.__version__ = "2.20.0.dev0" if name.split(".")[0] == "transformer_engine" else "2.6.0"
        if name == "torch":
            self.dtype = StubDtype
            for dtype in _DTYPES:
                setattr(self, dtype, StubDtype(dtype))

    def __getattr__(self, item):
        if item.startswith("__") and item.endswith("__"):
            raise AttributeError(item)
        value = Stub(f"{self.__name__}.{item}")
        setattr(self, item, value)
        return value


class StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots):
        self.roots = set(roots)

    def find_spec(self, fullname, path, target=None):
        if any(fullname == root or fullname.startswith(root + ".") for root in self.roots):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return StubModule(spec.name)

    def exec_module(self, module):
        pass


def install(roots):
    """Stub these modules and everything under them ("torch", "deepspeed.ops"); run before importing."""
    sys.meta_path.insert(0, StubFinder(roots))


def bare_package(name, path):
    """Import package `name` from `path` without running its __init__.py (which imports the world)."""
    module = types.ModuleType(name)
    module.__path__ = [path]
    sys.modules[name] = module
    return module


def real_packaging():
    """`packaging` (version parsing) from pip's vendored copy when it is not installed on its own."""
    try:
        import packaging.version  # noqa: F401
    except ImportError:
        import pip._vendor.packaging as vendored
        import pip._vendor.packaging.version  # noqa: F401
        sys.modules["packaging"] = vendored
        sys.modules["packaging.version"] = vendored.version
