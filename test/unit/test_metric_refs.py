#!/usr/bin/env python3
"""test/integration/metric_refs.py (what t_grafana runs on a live /metrics)
without servers: on a small dashboard, rules file and rule test file that
ask only for what a small /metrics has it passes; each mistake it is there
to catch, made in one copy, fails it with a line naming that mistake."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TOOL = os.path.join(ROOT, "test", "integration", "metric_refs.py")

METRICS = """\
# HELP idpool_build_info Always 1.
# TYPE idpool_build_info gauge
idpool_build_info{version="0.1.0",instance="host:1"} 1
# HELP idpool_redis_up 1 when the Redis connection is ready.
# TYPE idpool_redis_up gauge
idpool_redis_up 1
# HELP idpool_refill_duration_seconds How long refills took, seconds.
# TYPE idpool_refill_duration_seconds histogram
idpool_refill_duration_seconds_bucket{le="0.1"} 1
idpool_refill_duration_seconds_bucket{le="+Inf"} 1
idpool_refill_duration_seconds_sum 0.01
idpool_refill_duration_seconds_count 1
# HELP idpool_pool_length IDs in the pool at the last check.
# TYPE idpool_pool_length gauge
idpool_pool_length{app="a"} 5
# HELP idpool_refills_total Successful refills by this daemon.
# TYPE idpool_refills_total counter
idpool_refills_total{app="a"} 3
# HELP idpool_alert_firing 1 while the alert is firing.
# TYPE idpool_alert_firing gauge
idpool_alert_firing{app="a",alert="low"} 0
idpool_alert_firing{app="a",alert="underflow"} 1
"""

DS = {"type": "prometheus", "uid": "${datasource}"}


def panel(pid, title, y, x, exprs):
    targets = [{"refId": chr(65 + i), "expr": e, "legendFormat": legend, "datasource": DS}
               for i, (e, legend) in enumerate(exprs)]
    return {"id": pid, "type": "timeseries", "title": title, "datasource": DS,
            "gridPos": {"h": 8, "w": 12, "x": x, "y": y}, "targets": targets}


DASHBOARD = {
    "title": "t",
    "templating": {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus"},
        {"name": "instance", "type": "query", "datasource": DS,
         "query": {"query": "label_values(idpool_build_info, instance)", "refId": "i"},
         "definition": "label_values(idpool_build_info, instance)"},
        {"name": "app", "type": "query", "datasource": DS,
         "query": {"query": "label_values(idpool_pool_length, app)", "refId": "a"},
         "definition": "label_values(idpool_pool_length, app)"},
    ]},
    "panels": [
        {"id": 1, "type": "row", "title": "Pools", "collapsed": False, "panels": [],
         "gridPos": {"h": 1, "w": 24, "x": 0, "y": 0}},
        panel(2, "Length", 1, 0, [
            ('max by (app) (idpool_pool_length{instance=~"$instance",app=~"$app"}'
             ' and on (job, instance) (idpool_redis_up == 1))', "{{app}}")]),
        panel(3, "Refills", 1, 12, [
            ('sum by (app) (rate(idpool_refills_total{app=~"$app"}[$__rate_interval]))',
             "{{app}}"),
            ('histogram_quantile(0.99, sum by (le) (rate(idpool_refill_duration_seconds_bucket[5m])))',
             "p99")]),
        panel(4, "Alerts", 9, 0, [
            ('max by (app, alert) (idpool_alert_firing{alert=~"low|underflow"})',
             "{{app}} {{alert}}")]),
    ],
}

RULES = """\
groups:
  - name: g
    rules:
      - alert: Underflow
        expr: |
          max by (job, app) (idpool_alert_firing{alert="underflow"}) == 1
        labels:
          severity: page
        annotations:
          summary: "{{ $labels.app }} ran dry ({{ $labels.severity }})"
          description: >-
            {{ with printf "max(idpool_pool_length{job=%q,app=%q})" $labels.job $labels.app | query }}{{ . | first | value }}{{ end }}
      - alert: Down
        expr: up{job="idpool"} == 0
        annotations:
          summary: "{{ $labels.instance }} is down"
"""

RULE_TESTS = """\
rule_files:
  - rules.yml
tests:
  - interval: 1m
    input_series:
      - series: 'idpool_alert_firing{job="idpool",instance="a:1",app="a",alert="underflow"}'
        values: '1x5'
      - series: 'up{job="idpool",instance="a:1"}'
        values: '1x5'
    promql_expr_test:
      - expr: max(idpool_pool_length)
        eval_time: 1m
"""


class MetricRefs(unittest.TestCase):
    def run_tool(self, dashboard=None, rules=RULES, tests=RULE_TESTS):
        """metric_refs.py on a tree of these files: (exit status, FAIL lines)."""
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "deploy", "grafana"))
            os.makedirs(os.path.join(root, "deploy", "prometheus"))
            files = {
                "deploy/grafana/idpool.json": dashboard or json.dumps(DASHBOARD, indent=2),
                "deploy/prometheus/rules.yml": rules,
                "deploy/prometheus/rules.test.yml": tests,
                "metrics.txt": METRICS,
            }
            for name, text in files.items():
                with open(os.path.join(root, name), "w") as f:
                    f.write(text)
            p = subprocess.run([sys.executable, TOOL, root, os.path.join(root, "metrics.txt")],
                               capture_output=True, text=True, timeout=30)
        fails = [line for line in p.stdout.splitlines() if line.startswith("FAIL")]
        return p.returncode, fails, p.stdout + p.stderr

    def assert_fails(self, want, **files):
        rc, fails, out = self.run_tool(**files)
        if rc != 1 or not any(want in line for line in fails):
            self.fail("expected a FAIL with %r, exit 1; got exit %d:\n%s" % (want, rc, out))

    def assert_mistakes(self, name, text, cases):
        """Each (old, new, want): text with old made new, as the file
        `name` of run_tool, fails with a line holding want."""
        for old, new, want in cases:
            with self.subTest(new=new):
                self.assertIn(old, text)
                self.assert_fails(want, **{name: text.replace(old, new, 1)})

    def test_good(self):
        rc, fails, out = self.run_tool()
        if rc != 0 or fails:
            self.fail("the good files fail:\n" + out)

    def test_dashboard_mistakes(self):
        cases = [
            # a misspelt name, with or without the prefix
            ("idpool_pool_length{", "idpool_pool_lenght{", "idpool_pool_lenght is not in"),
            ("idpool_redis_up ==", "idpol_redis_up ==", "idpol_redis_up is not in"),
            # a histogram's family name selects nothing
            ("idpool_refill_duration_seconds_bucket[", "idpool_refill_duration_seconds[",
             "use its _bucket"),
            # labels: matched, grouped on, shown, and a value none has
            ('alert=~\\"low|underflow\\"', 'kind=~\\"low\\"', "has no label kind"),
            ("max by (app, alert)", "max by (app, kind)", "kind (by) is a label of none"),
            ("on (job, instance)", "on (job, node)", "node (on) is a label of none"),
            ('"{{app}} {{alert}}"', '"{{app}} {{kind}}"', "legend or label kind"),
            ('alert=~\\"low|underflow\\"', 'alert=~\\"lo\\"', 'no series idpool_alert_firing{alert=~"lo"}'),
            ("label_values(idpool_pool_length, app)", "label_values(idpool_pool_length, ap)",
             "legend or label ap is not"),
            # rate() of a gauge
            ("rate(idpool_refills_total", "rate(idpool_pool_length", "not a counter"),
            # the grid, the data source, the variables
            ('"y": 9', '"y": 8', "overlap"),
            ('"x": 12', '"x": 13', "off the 24-column grid"),
            ('"uid": "${datasource}"', '"uid": "${DS_PROMETHEUS}"', "placeholder"),
            ('app=~\\"$app\\"}[', 'app=~\\"$apps\\"}[', "no variable $apps"),
            ('"id": 3', '"id": 2', "id 2 twice"),
        ]
        self.assert_mistakes("dashboard", json.dumps(DASHBOARD, indent=2), cases)

    def test_not_json(self):
        self.assert_fails("not JSON", dashboard=json.dumps(DASHBOARD)[:-1])

    def test_rules_mistakes(self):
        cases = [
            ('alert="underflow"', 'alert="underflows"', 'no series idpool_alert_firing{alert="underflows"}'),
            ("by (job, app)", "by (job, ap)", "ap (by) is a label of none"),
            ('printf "max(idpool_pool_length', 'printf "max(idpool_pool_len', "idpool_pool_len is not in"),
            ("{{ $labels.app }} ran", "{{ $labels.apps }} ran", "$labels.apps is not a label"),
            ("{{ $labels.instance }} is down", "{{ $labels.node }} is down", "$labels.node is not"),
        ]
        self.assert_mistakes("rules", RULES, cases)

    def test_rule_tests_mistakes(self):
        cases = [
            ('app="a",alert="underflow"', 'app="a",alert="underflows"', 'alert="underflows"'),
            ("expr: max(idpool_pool_length)", "expr: max(idpool_pool_lengths)", "idpool_pool_lengths is not"),
            ("series: 'up{", "series: 'upp{", "upp is not in"),
        ]
        self.assert_mistakes("tests", RULE_TESTS, cases)


if __name__ == "__main__":
    unittest.main()
