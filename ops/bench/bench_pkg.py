"""bench_pkg.py - what the Python benchmarks share: another copy of the
flashtrie package imported beside the tree's (a before/after in one run)
and keys sampled from a library."""
import importlib
import importlib.util
import os
import sys


def import_baseline(d, tool):
    """import_baseline imports DIR/flashtrie as the module flashtrie_base
    (its relative imports resolve inside it); tool names the caller in the
    error."""
    pkg = os.path.join(d, "flashtrie")
    spec = importlib.util.spec_from_file_location(
        "flashtrie_base", os.path.join(pkg, "__init__.py"),
        submodule_search_locations=[pkg])
    if spec is None:
        sys.exit("%s: %s: no flashtrie package" % (tool, d))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["flashtrie_base"] = mod
    spec.loader.exec_module(mod)
    return mod


def sample_keys(idx, n, rng, depth=None):
    """sample_keys returns n token lists, each reached from the root of idx
    (a flashtrie.ar.Index) by random child choices, down to a leaf or to
    depth tokens."""
    keys = []
    while len(keys) < n:
        node, key = 0, []
        while depth is None or len(key) < depth:
            kids = idx.children(node)
            if len(kids) == 0:
                break
            t = int(kids[rng.integers(len(kids))])
            key.append(t)
            node = idx.child(node, t)
        keys.append(key)
    return keys
