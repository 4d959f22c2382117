#!/usr/bin/env python3
"""What the Grafana dashboard and the Prometheus rules ask of /metrics.

usage: metric_refs.py SOURCE_ROOT METRICS_FILE...

Reads the PromQL of deploy/grafana/idpool.json (every target's expr, every
variable's query) and of deploy/prometheus/*.yml (each rule's expr, the
queries its annotations run through `printf "..." | query`, and the rule
tests' input series and expressions), and prints a FAIL line for each

  * metric name that is no series of the live /metrics files given (the
    names a query selects: a classic histogram by its _bucket, _sum and
    _count series, never by its family name, which selects nothing);
    Prometheus' own series (up, ALERTS, ...) excepted;
  * label matched (`{label=...}`) that the metric's series do not have, and
    a matched value no series has, for the labels idpoold enumerates
    (alert, reason, code, state, kind, server, le; not app, node, ...);
  * label of a `by`, `without`, `on`, `ignoring` or `group_*` list, of a
    panel's legend ({{label}}) or of a rule's annotations ($labels.label)
    that no metric of the query has (after a `by`: not in any `by` list);
  * rate(), irate() or increase() of a series that is not a counter;

and, for the dashboard: panels that overlap or leave the 24-column grid,
panel ids used twice, a panel without queries, a data source other than the
dashboard's `datasource` variable (an import placeholder such as
${DS_PROMETHEUS} breaks file provisioning), and a $variable it does not
define. Exits 1 after any FAIL. Standard library only: the rule files are
read line by line, not as YAML.
"""

import glob
import json
import re
import sys

# Labels Prometheus gives every series it scrapes (the target's).
TARGET_LABELS = {'job', 'instance'}
# Series Prometheus makes itself: name -> their labels (None: not checked).
OWN_SERIES = {
    'up': TARGET_LABELS,
    'scrape_duration_seconds': TARGET_LABELS,
    'scrape_samples_scraped': TARGET_LABELS,
    'scrape_samples_post_metric_relabeling': TARGET_LABELS,
    'scrape_series_added': TARGET_LABELS,
    'ALERTS': None,
    'ALERTS_FOR_STATE': None,
}
# Labels whose values are the deployment's, not idpoold's: their matched
# values are not compared with the live ones.
DEPLOYMENT_LABELS = TARGET_LABELS | {'app', 'node', 'version', 'exported_instance'}
AGGREGATIONS = {'sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count',
                'count_values', 'bottomk', 'topk', 'quantile', 'limitk', 'limit_ratio'}
GROUPINGS = {'by', 'without', 'on', 'ignoring', 'group_left', 'group_right'}
KEYWORDS = GROUPINGS | {'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan', 'atan2'}
# Functions whose first string argument names a label they make.
LABEL_MAKERS = {'label_replace', 'label_join', 'count_values'}
COUNTER_FUNCTIONS = {'rate', 'irate', 'increase'}
# Grafana's own variables ($__rate_interval, ...) start with two underscores.
GRAFANA_BUILTIN = re.compile(r'__\w+$')

TOKEN = re.compile(r'''
    (?P<ws>\s+|\#[^\n]*)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<var>\$\{[^}]*\}|\$\w+|\[\[\w+\]\])
  | (?P<num>0x[0-9a-fA-F]+|[0-9.][0-9a-zA-Z_.]*)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=,(){}\[\]@])
''', re.X)


def unquote(s):
    """A PromQL string literal's value (escapes as far as labels need)."""
    if s[0] == '`':
        return s[1:-1]
    return re.sub(r'\\(.)', r'\1', s[1:-1])


def lex(expr):
    """The tokens of expr as (kind, text), blanks and comments left out,
    then three ('end', '') (so a cut-off expression stops every loop)."""
    toks, pos = [], 0
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m:
            raise ValueError('cannot read %r at %r' % (expr, expr[pos:pos + 20]))
        if m.lastgroup != 'ws':
            toks.append((m.lastgroup, m.group()))
        pos = m.end()
    return toks + [('end', '')] * 3


class Query:
    """What one PromQL expression selects and groups by, read from its tokens
    (no syntax tree: enough to name its series and labels)."""

    def __init__(self, expr):
        self.expr = expr
        self.selectors = []  # (name, [(label, op, value)], inside a counter function)
        self.groupings = []  # (keyword, [label])
        self.made = set()    # labels made by label_replace and the like
        # Grafana variables used: $name, ${name[:format]}, [[name]]
        self.vars = {''.join(v) for v in re.findall(
            r'\$\{([a-zA-Z_]\w*)|\$([a-zA-Z_]\w*)|\[\[([a-zA-Z_]\w*)', expr)}
        toks = lex(expr)
        i = 0
        while toks[i][0] != 'end':
            kind, text = toks[i]
            after = toks[i + 1][1]
            word = text.lower() if kind == 'ident' else None
            if text == '[':  # a range or a subquery's: durations only
                while toks[i][1] not in (']', ''):
                    i += 1
            elif word in GROUPINGS:
                labels = []
                if after == '(':
                    i += 2
                    while toks[i][1] not in (')', ''):
                        if toks[i][0] == 'ident':
                            labels.append(toks[i][1])
                        i += 1
                self.groupings.append((word, labels))
            elif kind == 'ident' and after == '(':  # a function
                if word in LABEL_MAKERS:
                    self.made.add(self._first_string(toks, i + 2))
            elif kind == 'ident' and word not in KEYWORDS and word not in AGGREGATIONS:
                in_counter_fn = (i >= 2 and toks[i - 1][1] == '(' and
                                 toks[i - 2][1].lower() in COUNTER_FUNCTIONS)
                matchers = []
                if after == '{':
                    i, matchers = self._matchers(toks, i + 1)
                self.selectors.append((text, matchers, in_counter_fn))
            elif text == '{':  # a selector without a name: {__name__="..."}
                i, matchers = self._matchers(toks, i)
                names = [v for label, op, v in matchers if label == '__name__' and op == '=']
                self.selectors.append((names[0] if names else None, matchers, False))
            i += 1

    @staticmethod
    def _first_string(toks, i):
        depth = 0
        while toks[i][0] != 'end':
            kind, text = toks[i]
            if text in ('(', '{'):
                depth += 1
            elif text in (')', '}'):
                depth -= 1
            elif kind == 'str' and depth == 0:
                return unquote(text)
            i += 1
        return ''

    @staticmethod
    def _matchers(toks, i):
        """The matchers of the {...} opening at toks[i]; the index of its }."""
        out = []
        i += 1
        while toks[i][1] not in ('}', ''):
            if toks[i][0] == 'ident' and toks[i + 1][0] == 'op' and toks[i + 2][0] == 'str':
                out.append((toks[i][1], toks[i + 1][1], unquote(toks[i + 2][1])))
                i += 3
            else:
                i += 1
        return i, out

    def by_labels(self):
        """The labels an aggregation keeps, or None when there is no `by`."""
        lists = [labels for kw, labels in self.groupings if kw == 'by']
        if not lists or any(kw == 'without' for kw, _ in self.groupings):
            return None
        return set().union(*lists)


class Live:
    """The series of the live /metrics texts: names, labels, values, types."""

    def __init__(self, texts):
        self.types, self.labels, self.values = {}, {}, {}
        for text in texts:
            for line in text.splitlines():
                if line.startswith('# TYPE '):
                    _, _, name, kind = line.split(None, 3)
                    self.types[name] = kind
                elif line and not line.startswith('#'):
                    m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s', line)
                    if not m:
                        raise ValueError('cannot read the /metrics line %r' % line)
                    labels = self.labels.setdefault(m.group(1), set())
                    pairs = re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', m.group(2) or '')
                    for k, v in pairs:
                        labels.add(k)
                        self.values.setdefault((m.group(1), k), set()).add(v)

    def has(self, name):
        return name in self.labels or name in OWN_SERIES

    def labels_of(self, name):
        """The labels a series of this name has in Prometheus (None: any)."""
        if name in OWN_SERIES:
            return OWN_SERIES[name]
        return self.labels.get(name, set()) | TARGET_LABELS

    def is_counter(self, name):
        if self.types.get(name) == 'counter':
            return True
        m = re.match(r'(.*)_(bucket|sum|count)$', name)
        return bool(m) and self.types.get(m.group(1)) in ('histogram', 'summary')


def check_query(q, live, where):
    """FAIL lines for what q names and /metrics lacks."""
    bad, labels = [], set(q.made)
    for name, matchers, in_counter_fn in q.selectors:
        if name is None:
            continue
        if not live.has(name):
            hint = ' (a histogram: use its _bucket, _sum or _count)' \
                if name + '_bucket' in live.labels else ''
            bad.append('%s: %s is not in a live /metrics%s' % (where, name, hint))
            labels = None  # its labels are not known: no checks of the groupings
            continue
        have = live.labels_of(name)
        if have is None:  # ALERTS and the like: labels of the rules
            labels = None
            continue
        if labels is not None:
            labels |= have
        if in_counter_fn and name not in OWN_SERIES and not live.is_counter(name):
            bad.append('%s: %s is a %s, not a counter, in rate/irate/increase' %
                       (where, name, live.types.get(name, 'series')))
        for label, op, value in matchers:
            if label == '__name__':
                continue
            if label not in have:
                bad.append('%s: %s has no label %s' % (where, name, label))
                continue
            seen = live.values.get((name, label))
            if label in DEPLOYMENT_LABELS or not seen or '$' in value:
                continue
            if op == '=' and value not in seen:
                bad.append('%s: no series %s{%s="%s"} (live: %s)' %
                           (where, name, label, value, ', '.join(sorted(seen))))
            elif op == '=~' and not any(re.fullmatch(value, v) for v in seen):
                bad.append('%s: no series %s{%s=~"%s"} (live: %s)' %
                           (where, name, label, value, ', '.join(sorted(seen))))
    if labels is None:
        return bad
    for kw, group in q.groupings:
        for label in group:
            if label not in labels:
                bad.append('%s: %s (%s) is a label of none of its series' % (where, label, kw))
    return bad


def result_labels(q, live):
    """The labels q's result may have (None: not known)."""
    by = q.by_labels()
    if by is not None:
        return by
    out = set(q.made)
    for name, _, _ in q.selectors:
        if name is None:
            continue
        have = live.labels_of(name) if live.has(name) else None
        if have is None:  # not known (ALERTS) or failed already (not live)
            return None
        out |= have
    return out


def check_output_labels(q, used, live, where, what):
    have = result_labels(q, live)
    if have is None:
        return []
    return ['%s: %s%s is not a label of its result (%s)' %
            (where, what, label, ', '.join(sorted(have)) or 'none')
            for label in sorted(used - have)]


def grid_panels(panels, where):
    """Panels that overlap or leave the grid (rows and their panels alike)."""
    bad, cells = [], {}
    for p in panels:
        g = p.get('gridPos', {})
        if not all(isinstance(g.get(k), int) for k in ('x', 'y', 'w', 'h')) or \
                g['x'] < 0 or g['y'] < 0 or g['w'] < 1 or g['h'] < 1 or g['x'] + g['w'] > 24:
            bad.append('%s: panel %r is off the 24-column grid: %s' % (where, p.get('title'), g))
            continue
        hit = None
        for y in range(g['y'], g['y'] + g['h']):
            for x in range(g['x'], g['x'] + g['w']):
                hit = hit or cells.get((x, y))
                cells[(x, y)] = p.get('title')
        if hit:
            bad.append('%s: panels %r and %r overlap' % (where, hit, p.get('title')))
    return bad


def check_dashboard(path, live):
    bad = []
    text = open(path).read()
    try:
        dash = json.loads(text)
    except ValueError as e:
        return ['%s: not JSON: %s' % (path, e)], 0
    if '${DS_' in text or '__inputs' in dash:
        bad.append('%s: an import placeholder (${DS_...} or __inputs): '
                   'use the datasource variable' % path)
    variables = {v['name']: v for v in dash.get('templating', {}).get('list', [])}
    if variables.get('datasource', {}).get('type') != 'datasource':
        bad.append('%s: no variable "datasource" of type datasource' % path)
    queries = []  # (where, Query, legend labels)
    for name, v in variables.items():
        if v.get('type') != 'query':
            continue
        q = v.get('query')
        for expr in {v.get('definition'), q.get('query') if isinstance(q, dict) else q} - {None}:
            m = re.fullmatch(r'\s*label_values\((?:(.*),)?\s*(\w+)\s*\)\s*', expr, re.S)
            where = '%s: variable %s' % (path, name)
            if m and m.group(1) is None:  # label_values(label): of any series
                if m.group(2) not in set().union(TARGET_LABELS, *live.labels.values()):
                    bad.append('%s: no series has the label %s' % (where, m.group(2)))
            elif m:
                queries.append((where, Query(m.group(1)), {m.group(2)}))
            else:
                queries.append((where, Query(expr), set()))
    top = dash.get('panels', [])
    bad += grid_panels(top, path)
    ids = set()
    for p in top + [c for r in top for c in r.get('panels', [])]:
        where = '%s: panel %r' % (path, p.get('title'))
        if p.get('id') in ids:
            bad.append('%s: id %s twice' % (where, p.get('id')))
        ids.add(p.get('id'))
        if p.get('type') == 'row':
            if p.get('panels'):  # a collapsed row: its panels have their own grid
                bad += grid_panels(p['panels'], where)
            continue
        targets = p.get('targets') or []
        if not targets:
            bad.append('%s: no queries' % where)
        for o in [p] + targets:
            if o.get('datasource') != {'type': 'prometheus', 'uid': '${datasource}'}:
                bad.append('%s: data source %s, not ${datasource}' %
                           (where, json.dumps(o.get('datasource'))))
        for t in targets:
            if not t.get('expr'):
                bad.append('%s: query %s has no expr' % (where, t.get('refId')))
                continue
            legend = set(re.findall(r'\{\{\s*(\w+)\s*\}\}', t.get('legendFormat', '')))
            queries.append(('%s %s' % (where, t.get('refId')), Query(t['expr']), legend))
    for where, q, used in queries:
        bad += check_query(q, live, where)
        bad += check_output_labels(q, used, live, where, 'legend or label ')
        for var in sorted(q.vars):
            if var not in variables and not GRAFANA_BUILTIN.match(var):
                bad.append('%s: no variable $%s' % (where, var))
    return bad, sum(len(q.selectors) for _, q, _ in queries)


def yaml_value(lines, i, indent):
    """The scalar at lines[i] (after 'key:'), with a block scalar's more
    indented lines, unquoted; and the index after it."""
    first = lines[i].split(':', 1)[1].strip()
    i += 1
    if first[:1] in ('|', '>'):
        body = []
        while i < len(lines) and (not lines[i].strip() or
                                  len(lines[i]) - len(lines[i].lstrip()) > indent):
            body.append(lines[i])
            i += 1
        return '\n'.join(body), i
    if first[:1] == "'":
        return first[1:-1].replace("''", "'"), i
    if first[:1] == '"':
        return json.loads(first), i
    return first, i


def check_rules(path, live):
    """A rules file (each rule's expr, annotations and their queries) or a
    rule test file (input series and expressions)."""
    bad, n = [], 0
    lines = open(path).read().split('\n')
    # one chunk per rule (or per test file section): its exprs and the rest
    chunks, cur = [], None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r'^(\s*)(?:- )?(expr|series):', line)
        if cur is None or re.match(r'^\s*- (alert|record|series|expr|name):', line):
            cur = {'line': i + 1, 'exprs': [], 'text': []}
            chunks.append(cur)
        if m:
            value, i = yaml_value(lines, i, len(m.group(1)))
            cur['exprs'].append(value)
            continue
        cur['text'].append(line)
        i += 1
    for c in chunks:
        where = '%s:%d' % (path, c['line'])
        qs = [Query(e) for e in c['exprs']]
        text = '\n'.join(c['text'])
        # the queries of annotations: printf "PROMQL" ... | query
        for fmt in re.findall(r'printf\s+("(?:[^"\\]|\\.)*")[^}|]*\|\s*query', text):
            expr = re.sub(r'%q', '"x"', json.loads(fmt))
            qs.append(Query(re.sub(r'%[a-z]', '0', expr)))
        for q in qs:
            n += len(q.selectors)
            bad += check_query(q, live, where)
        # an alert's labels: its expr's result's and those of its labels: block
        used = set(re.findall(r'\$labels\.(\w+)', text))
        m = re.search(r'^(\s*)labels:\s*\n((?:\1\s+\w+:.*\n?)*)', text, re.M)
        used -= set(re.findall(r'^\s*(\w+):', m.group(2), re.M)) if m else set()
        if used and c['exprs']:
            bad += check_output_labels(qs[0], used, live, where, '$labels.')
    return bad, n


def main():
    root, files = sys.argv[1], sys.argv[2:]
    live = Live(open(f).read() for f in files)
    bad, n = check_dashboard(root + '/deploy/grafana/idpool.json', live)
    for path in sorted(glob.glob(root + '/deploy/prometheus/*.yml')):
        b, k = check_rules(path, live)
        bad += b
        n += k
        if k == 0:
            bad.append('%s: selects no series' % path)
    for b in dict.fromkeys(bad):
        print('FAIL:', b.replace(root + '/', ''))
    print('checked %d selectors against %d live series names' % (n, len(live.labels)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
