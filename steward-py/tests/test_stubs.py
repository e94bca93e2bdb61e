"""The type stubs (steward/_steward.pyi) match the built module: the same public names, and for
every function and method the same parameters, in order, with the same defaults. A change to the
binding that is not carried into the stubs fails here."""

import ast
import inspect
import pathlib

import steward
import steward._steward as native

STUB = pathlib.Path(steward.__file__).with_name("_steward.pyi")


def stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text(), filename=str(STUB))


def params_of(fn: ast.FunctionDef) -> list[str]:
    """Parameter names with `=default`, `*args`, `**kwargs`, as a text signature spells them."""
    a = fn.args
    out = []
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, default in zip(positional, defaults):
        if arg.arg in ("self", "cls"):
            continue
        out.append(arg.arg if default is None else f"{arg.arg}={ast.unparse(default)}")
    if a.vararg:
        out.append(f"*{a.vararg.arg}")
    if a.kwarg:
        out.append(f"**{a.kwarg.arg}")
    return out


def runtime_params(obj) -> list[str]:
    sig = inspect.signature(obj)
    out = []
    for p in sig.parameters.values():
        if p.name in ("self", "cls", "$self", "$type"):
            continue
        if p.kind is p.VAR_POSITIONAL:
            out.append(f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            out.append(f"**{p.name}")
        elif p.default is p.empty:
            out.append(p.name)
        else:
            out.append(f"{p.name}={p.default!r}")
    return out


def class_aliases(tree: ast.Module) -> dict[str, str]:
    """`Alias = StubbedClass` lines: another name for the same class."""
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    return {
        t.id: n.value.id
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id in classes
        for t in n.targets
        if isinstance(t, ast.Name)
    }


def test_the_stub_names_exactly_the_public_names():
    tree = stub_tree()
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    aliases = class_aliases(tree)
    for alias, target in aliases.items():
        assert getattr(native, alias) is getattr(native, target), alias
    stubbed |= set(aliases)
    public = {n for n in dir(native) if not n.startswith("_")}
    assert stubbed == public
    assert set(steward.__all__) == public, "the package re-exports everything, and only that"


def test_functions_and_methods_have_the_runtime_signatures():
    tree = stub_tree()
    checked = 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert params_of(node) == runtime_params(getattr(native, node.name)), node.name
            checked += 1
        elif isinstance(node, ast.ClassDef):
            cls = getattr(native, node.name)
            methods = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
            runtime = {n for n in vars(cls) if not n.startswith("_")}
            public = {m for m in methods if not m.startswith("_")}
            assert public == runtime, node.name
            assert all(hasattr(cls, m) for m in methods), node.name
            for name, fn in methods.items():
                if name.startswith("__") and name != "__new__":
                    continue
                if any(ast.unparse(d) == "property" for d in fn.decorator_list):
                    assert not callable(vars(cls)[name]), f"{node.name}.{name} is a property"
                    continue
                target = cls if name == "__new__" else getattr(cls, name)
                assert params_of(fn) == runtime_params(target), f"{node.name}.{name}"
                checked += 1
    assert checked >= 15, "the stub was not read"


def test_exceptions_have_the_stubbed_hierarchy():
    tree = stub_tree()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
            bases = [ast.unparse(b) for b in node.bases]
            cls = getattr(native, node.name)
            assert [b.__name__ for b in cls.__bases__] == bases, node.name
