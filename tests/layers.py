#!/usr/bin/env python3
"""crl's layering, checked on the built objects (see core/LAYERS).

A file uses another when one of its objects references a global symbol the other's object defines (nm).
The check fails, naming each offending edge and its symbols, when
  - an object of libcrl, of crl or of the plugin scanner is mapped to no concept (or to two),
  - a file uses a file of a higher layer (the plugin host using the runtime, ...),
  - a circle of files spans two concepts,
  - the concepts themselves use each other in a circle.
Output is TAP.  --picture prints the concept graph layer by layer instead (for the README).

Usage: layers.py [--map FILE] [--picture] BUILDDIR
"""
import argparse
import collections
import fnmatch
import glob
import os
import re
import shutil
import subprocess
import sys
import textwrap

MAX_SYMBOLS = 8


def read_map(path):
    layers, concepts, order = None, {}, []
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            where = "%s:%d" % (path, lineno)
            if line.startswith("layers:"):
                layers = line[len("layers:"):].split()
                continue
            words = line.split()
            if layers is None:
                sys.exit("%s: the 'layers:' line must come first" % where)
            if len(words) < 3:
                sys.exit("%s: expected LAYER CONCEPT FILE..., got '%s'" % (where, line))
            layer, concept, patterns = words[0], words[1], words[2:]
            if layer not in layers:
                sys.exit("%s: unknown layer '%s' (layers: %s)" % (where, layer, " ".join(layers)))
            if concept in concepts:
                sys.exit("%s: concept '%s' is declared twice" % (where, concept))
            concepts[concept] = (layers.index(layer), patterns)
            order.append(concept)
    if not layers:
        sys.exit("%s: no 'layers:' line" % path)
    return layers, concepts, order


# What make links into libcrl, crl and the plugin scanner: objects of removed or renamed files that linger in
# a build directory are no part of it.
LINKED = "_crl_layers_objects:\n\t@echo $(core_libcrl_la_OBJECTS) $(core_cli_crl_OBJECTS) " \
         "$(core_crl_plugin_scanner_OBJECTS)\n"


def linked_objects(build):
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GNUMAKEFLAGS")}
    try:
        r = subprocess.run([os.environ.get("MAKE", "make"), "-s", "--no-print-directory", "-C", build,
                            "-f", "Makefile", "-f", "-", "_crl_layers_objects"],
                           input=LINKED, capture_output=True, text=True, env=env)
    except OSError:
        return None
    return r.stdout.split() if r.returncode == 0 and r.stdout.split() else None


def source_of(obj, top_src):
    """core/cli/crl-main.o -> core/cli/main.c; core/crl-plugin-scanner.o -> core/crl-plugin-scanner.c."""
    d, base = os.path.split(obj)
    base = re.sub(r"\.(l?o)$", "", base)
    if os.path.exists(os.path.join(top_src, d, base + ".c")):
        return os.path.join(d, base + ".c")
    return os.path.join(d, base.split("-", 1)[-1] + ".c")   # automake's TARGET-SOURCE.o


def objects(build, top_src):
    """(source file under core/, object file) of what libcrl, crl and the plugin scanner are linked from."""
    names = linked_objects(build)
    if names is None:  # no GNU make: what the build directory holds
        core = os.path.join(build, "core")
        names = [os.path.relpath(o, build) for o in
                 glob.glob(os.path.join(core, "core_libcrl_la-*.lo")) + glob.glob(os.path.join(core, "cli", "crl-*.o"))
                 + glob.glob(os.path.join(core, "*crl-plugin-scanner.o"))]
    out = []
    for name in sorted(names):
        obj = os.path.join(build, name)
        if name.endswith(".lo"):  # libtool: the PIC object, or the only one of a static-only build
            pic = os.path.join(os.path.dirname(obj), ".libs", os.path.basename(obj)[:-3] + ".o")
            obj = pic if os.path.exists(pic) else obj[:-3] + ".o"
        if not os.path.exists(obj):
            continue
        src = source_of(name, top_src)
        out.append((os.path.relpath(src, "core") if src.startswith("core/") else src, obj))
    return out


def symbols(nm, obj):
    """Global symbols an object defines and those it references."""
    text = subprocess.run([nm, "-P", "-g", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            used.add(name)
        elif kind not in "vw":
            defined.add(name)
    return defined, used


def sccs(nodes, edges):
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def sym_text(syms):
    s = sorted(syms)
    more = len(s) - MAX_SYMBOLS
    return ", ".join(s[:MAX_SYMBOLS]) + (" and %d more" % more if more > 0 else "")


class Graph:
    def __init__(self, map_path, build, nm):
        self.map_path = map_path
        self.layers, self.concepts, self.order = read_map(map_path)
        self.unmapped, self.ambiguous = [], []
        self.concept_of = {}
        objs = objects(build, os.path.dirname(os.path.dirname(os.path.abspath(map_path))))
        if not objs:
            raise FileNotFoundError("no objects of libcrl under %s/core (build first)" % build)
        owner, used = {}, collections.defaultdict(set)
        for src, obj in objs:
            if src in used:  # a file compiled into two programs (crl links its own sampler.c)
                used[src] |= symbols(nm, obj)[1]
                continue
            hits = [c for c in self.order if any(fnmatch.fnmatchcase(src, p) for p in self.concepts[c][1])]
            if not hits:
                self.unmapped.append(src)
            elif len(hits) > 1:
                self.ambiguous.append((src, hits))
            else:
                self.concept_of[src] = hits[0]
            defined, used[src] = symbols(nm, obj)
            for s in defined:
                owner.setdefault(s, src)
        # file -> file -> symbols
        self.edges = collections.defaultdict(lambda: collections.defaultdict(set))
        for src, syms in used.items():
            for s in syms:
                dst = owner.get(s)
                if dst and dst != src:
                    self.edges[src][dst].add(s)
        self.files = sorted(used)

    def layer(self, src):
        return self.concepts[self.concept_of[src]][0]

    def concept_edges(self):
        """concept -> concept -> [(file, file, symbols)]"""
        ce = collections.defaultdict(lambda: collections.defaultdict(list))
        for a in self.files:
            for b, syms in self.edges[a].items():
                ca, cb = self.concept_of.get(a), self.concept_of.get(b)
                if ca and cb and ca != cb:
                    ce[ca][cb].append((a, b, syms))
        return ce


def check(g):
    n, failures = 0, 0

    def report(ok, what, details=()):
        nonlocal n, failures
        n += 1
        if ok:
            print("ok %d - %s" % (n, what))
        else:
            failures += 1
            print("not ok %d - %s" % (n, what))
            for d in details:
                print("# " + d)

    details = ["%s: no concept in %s lists it; add it to the concept it belongs to" % (s, g.map_path)
               for s in g.unmapped]
    details += ["%s: listed by several concepts (%s); keep one" % (s, ", ".join(c)) for s, c in g.ambiguous]
    report(not details, "every object of libcrl, crl and the plugin scanner belongs to one concept (%d files)"
           % len(g.files), details)

    details = []
    for a in g.files:
        for b, syms in sorted(g.edges[a].items()):
            if a in g.concept_of and b in g.concept_of and g.layer(b) > g.layer(a):
                details.append("%s (%s, %s) uses %s (%s, %s): %s" % (
                    a, g.concept_of[a], g.layers[g.layer(a)], b, g.concept_of[b], g.layers[g.layer(b)],
                    sym_text(syms)))
    report(not details, "no file uses a file of a higher layer (%s, lowest first)" % " < ".join(g.layers), details)

    details = []
    for comp in sccs(g.files, {a: set(bs) for a, bs in g.edges.items()}):
        cs = sorted({g.concept_of.get(f, "?") for f in comp})
        if len(cs) < 2:
            continue
        details.append("circle of %d files across concepts %s: %s" % (len(comp), ", ".join(cs), " ".join(comp)))
        for a in comp:
            for b in sorted(g.edges[a]):
                if b in comp and g.concept_of.get(a) != g.concept_of.get(b):
                    details.append("  %s -> %s: %s" % (a, b, sym_text(g.edges[a][b])))
    report(not details, "no circle of files spans two concepts", details)

    ce = g.concept_edges()
    details = []
    for comp in sccs(g.order, {a: set(bs) for a, bs in ce.items()}):
        details.append("circle of concepts: %s" % ", ".join(comp))
        for a in comp:
            for b in sorted(ce[a]):
                if b in comp:
                    for fa, fb, syms in ce[a][b]:
                        details.append("  %s -> %s: %s -> %s: %s" % (a, b, fa, fb, sym_text(syms)))
    report(not details, "the concepts use each other in one direction only", details)

    print("1..%d" % n)
    return failures == 0


def topo(concepts, deps):
    """Users before what they use; concepts in a circle keep map order."""
    out, seen = [], set()

    def visit(c, path):
        if c in seen or c in path:
            return
        path.add(c)
        for u in concepts:
            if c in deps.get(u, ()) and u in concepts:
                visit(u, path)
        path.discard(c)
        seen.add(c)
        out.append(c)

    for c in concepts:
        visit(c, set())
    return out


def picture(g):
    ce = g.concept_edges()
    deps = {c: set(ce[c]) for c in g.order}
    in_circle = {c for comp in sccs(g.order, deps) for c in comp}
    width = max(len(c) for c in g.order) + 2
    lines = []
    for li in range(len(g.layers) - 1, -1, -1):
        members = [c for c in g.order if g.concepts[c][0] == li]
        lines.append("%s%s" % (g.layers[li], "" if li else "  (bottom)"))
        for c in topo(members, deps):
            parts = []
            for lj in range(li, -1, -1):
                names = [d for d in g.order if d in deps[c] and g.concepts[d][0] == lj]
                if names:
                    parts.append(("" if lj == li else g.layers[lj] + ": ") + " ".join(names))
            text = " | ".join(parts) if parts else "-"
            if c in in_circle:
                text += "  (CIRCLE)"
            lead = "  %-*s-> " % (width, c)
            for i, chunk in enumerate(textwrap.wrap(text, 104 - len(lead)) or ["-"]):
                lines.append((lead if i == 0 else " " * len(lead)) + chunk)
    print("\n".join(lines))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--map", default=os.path.normpath(os.path.join(here, "..", "core", "LAYERS")))
    ap.add_argument("--picture", action="store_true", help="print the concept graph by layer")
    ap.add_argument("build", help="the build directory (holds core/.libs)")
    args = ap.parse_args()
    nm = os.environ.get("NM") or shutil.which("nm")
    if not nm:
        print("1..0 # SKIP no nm to read the objects")
        return 77
    try:
        g = Graph(args.map, args.build, nm)
    except FileNotFoundError as e:
        print("1..0 # SKIP %s" % e)
        return 77
    if args.picture:
        picture(g)
        return 0
    return 0 if check(g) else 1


if __name__ == "__main__":
    sys.exit(main())
