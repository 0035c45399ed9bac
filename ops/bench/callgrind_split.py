#!/usr/bin/env python3
"""callgrind_split.py FILE N ROOT [TOP [TIMER]] - a callgrind file's
instructions per request (its Ir over N): the total, ROOT's inclusive count
(the engine) and TIMER's (a thread's function that runs by the clock, not
per request: its count moves with the run's length); or, for a run with
--toggle-collect=ROOT (ROOT counts 0), what it counted less TIMER: the
work outside the engine.  Then the TOP functions by self count; those of
a library without symbols are summed into one line per library.
serve_icount.sh runs it on a server's dumps."""
import collections
import re
import sys


def main():
    path, n, root = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 25
    timer = sys.argv[5] if len(sys.argv) > 5 else None
    names = {'fl': {}, 'fn': {}, 'ob': {}}

    def name(kind, s):
        # Compressed names: "(id) name" defines, "(id)" refers.
        m = re.match(r'\((\d+)\)(?:\s+(.*))?', s)
        if not m:
            return s
        if m.group(2):
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), '?')

    self_ir = collections.Counter()
    incl = collections.Counter()
    where = {}
    fn = fl = ob = callee = None
    in_call = False
    total = 0
    with open(path) as f:
        for line in f:
            key, _, val = line.rstrip('\n').partition('=')
            if key in ('fl', 'fi', 'fe'):
                v = name('fl', val)
                if key == 'fl':
                    fl = v
            elif key == 'ob':
                ob = name('ob', val)
            elif key == 'fn':
                fn = name('fn', val)
                where.setdefault(fn, (fl, ob))
            elif key == 'cfn':
                callee = name('fn', val)
            elif key in ('cfi', 'cfl'):
                name('fl', val)
            elif key == 'cob':
                name('ob', val)
            elif key == 'calls':
                in_call = True
            elif line[:1] in '0123456789+-*':
                parts = line.split()
                if len(parts) < 2:
                    continue
                c = int(parts[1])
                if in_call:
                    if callee != fn:
                        incl[fn] += c
                    in_call = False
                else:
                    self_ir[fn] += c
                    incl[fn] += c
                    total += c
    eng = incl.get(root, 0)
    tim = incl.get(timer, 0) if timer else 0
    tstr = ', %s %.0f' % (timer, tim / n) if timer else ''
    if eng:
        print('  per request: total %.0f, engine (%s, inclusive) %.0f%s'
              % (total / n, root, eng / n, tstr))
    else:  # a run with --toggle-collect=ROOT: all it counted is the rest
        print('  per request outside the engine: %.0f (%s apart: %.0f)'
              % ((total - tim) / n, timer, tim / n) if timer else
              '  per request outside the engine: %.0f' % (total / n))
    lines = collections.Counter()
    for f, c in self_ir.items():
        fl, ob = where.get(f, ('?', '?'))
        if f.startswith('0x'):
            lines['%s (no symbols)' % (ob or '?').rsplit('/', 1)[-1]] += c
        else:
            short = (fl or '?').replace('./', '')
            lines['%s [%s]' % (f, short.rsplit('/', 2)[-2] + '/' +
                               short.rsplit('/', 1)[-1]
                               if '/' in short else short)] += c
    for k, c in lines.most_common(top):
        print('  %10.0f  %s' % (c / n, k))


if __name__ == '__main__':
    main()
