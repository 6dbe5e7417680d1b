package monitoring

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// root is the repository's root, from this package's folder.
const root = "../.."

// render runs the chart with monitoring on, with the helm that `make helm`
// builds, and returns its objects.
func render(t *testing.T) []map[string]any {
	t.Helper()
	helm := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("%s is missing: run make helm (make test builds it): %v", helm, err)
	}
	out, err := exec.Command(helm, "template", "kubeskills", filepath.Join(root, "charts", "kubeskills"), "-n", "kubeskills-system",
		"--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.dashboard.enabled=true").CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	var objs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o map[string]any
		if err := dec.Decode(&o); err != nil {
			break
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

// of returns the only object of kind.
func of(t *testing.T, objs []map[string]any, kind string) map[string]any {
	t.Helper()
	var found []map[string]any
	for _, o := range objs {
		if o["kind"] == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s rendered, want 1", len(found), kind)
	}
	return found[0]
}

// documented are the metric names docs/observability.md names in
// backquotes: every metric the operator and the agents serve is there
// (the controller and agent tests check it), with controller-runtime's
// that the rules and the dashboard use.
func documented(t *testing.T) map[string]bool {
	t.Helper()
	docs, err := os.ReadFile(filepath.Join(root, "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(string(docs), -1) {
		names[m[1]] = true
	}
	return names
}

// metricNames are the metrics a query reads, without the suffixes of a
// histogram's series.
func metricNames(t *testing.T, query string) []string {
	t.Helper()
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(query)
	if err != nil {
		t.Fatalf("query %q does not parse: %v", query, err)
	}
	var names []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				name = strings.TrimSuffix(name, suffix)
			}
			names = append(names, name)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("query %q reads no metric", query)
	}
	return names
}

// TestPrometheusRuleParses: the chart's rules are valid for Prometheus, as
// its own rule parser reads them; every alert has a summary and a
// description, and reads only metrics that exist.
func TestPrometheusRuleParses(t *testing.T) {
	rule := of(t, render(t), "PrometheusRule")
	spec, err := yaml.Marshal(rule["spec"])
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("rules: %v", err)
	}
	if groups == nil {
		t.Fatal("no rule groups")
	}
	known := documented(t)
	alerts := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a summary or a description", r.Alert)
			}
			for _, name := range metricNames(t, r.Expr) {
				if !known[name] {
					t.Errorf("alert %s reads %s, which docs/observability.md does not list", r.Alert, name)
				}
			}
		}
	}
	for _, want := range []string{"KubeskillsApprovalWaiting", "KubeskillsSandboxCannotStart", "KubeskillsSkillNotReady",
		"KubeskillsAgentNotReady", "KubeskillsReconcileErrors"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
}

// grafanaVariables are the dashboard's variables, as Grafana fills them
// in before a query runs.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*")

// TestDashboardQueriesReadMetricsThatExist: the dashboard is JSON Grafana
// reads, its ConfigMap carries the sidecar's label, and every panel's
// query parses and reads only metrics that exist.
func TestDashboardQueriesReadMetricsThatExist(t *testing.T) {
	cm := of(t, render(t), "ConfigMap")
	meta := cm["metadata"].(map[string]any)
	if labels := meta["labels"].(map[string]any); labels["grafana_dashboard"] != "1" {
		t.Errorf("labels %v lack grafana_dashboard: \"1\"", labels)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	data := cm["data"].(map[string]any)["kubeskills.json"].(string)
	if err := json.Unmarshal([]byte(data), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	known := documented(t)
	queries := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			queries++
			for _, name := range metricNames(t, grafanaVariables.Replace(target.Expr)) {
				if !known[name] {
					t.Errorf("panel %q reads %s, which docs/observability.md does not list", p.Title, name)
				}
			}
		}
	}
	if dash.UID == "" || queries < 10 {
		t.Errorf("dashboard uid %q with %d queries", dash.UID, queries)
	}
}
