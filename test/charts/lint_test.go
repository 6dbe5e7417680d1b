package charts

import (
	"strings"
	"testing"
)

// TestLint runs helm lint --strict on both charts with their default values
// and with others.
func TestLint(t *testing.T) {
	model := []string{"model.baseURL=http://ollama.ollama:11434/v1", "model.name=llama3.1"}
	tests := []struct {
		name       string
		chart      string
		valueFiles []string
		set        []string
	}{
		{name: "kubeskills defaults", chart: "kubeskills"},
		{name: "kubeskills custom", chart: "kubeskills", valueFiles: []string{testdata("kubeskills-values.yaml")}},
		{name: "kubeskills no metrics", chart: "kubeskills", set: []string{"metrics.enabled=false", "serviceAccount.create=false", "serviceAccount.name=existing"}},
		{name: "agent defaults", chart: "agent"},
		{name: "agent model only", chart: "agent", set: model},
		{name: "agent custom", chart: "agent", valueFiles: []string{testdata("agent-values.yaml")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartPath(tt.chart)}
			for _, f := range tt.valueFiles {
				args = append(args, "--values", f)
			}
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			out, err := helm(args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Fatalf("helm lint: %s", out)
			}
		})
	}
}

// TestSchemaRefusesBadValues checks that values.schema.json stops values
// that would render broken objects before anything reaches the cluster.
func TestSchemaRefusesBadValues(t *testing.T) {
	model := []string{"model.baseURL=http://ollama.ollama:11434/v1", "model.name=llama3.1"}
	tests := []struct {
		name  string
		chart string
		set   []string
		want  string
	}{
		{name: "unknown key", chart: "kubeskills", set: []string{"replicas=2"}, want: "replicas"},
		{name: "pull policy", chart: "kubeskills", set: []string{"image.pullPolicy=Sometimes"}, want: "pullPolicy"},
		{name: "log encoder", chart: "kubeskills", set: []string{"logging.encoder=xml"}, want: "encoder"},
		{name: "metrics on the probe port", chart: "kubeskills", set: []string{"metrics.port=8081"}, want: "port"},
		{name: "tracing protocol", chart: "kubeskills", set: []string{"tracing.endpoint=http://c:4318", "tracing.protocol=thrift"}, want: "protocol"},
		{name: "tracing endpoint", chart: "kubeskills", set: []string{"tracing.endpoint=c:4318"}, want: "endpoint"},
		{name: "alert duration", chart: "kubeskills", set: []string{"monitoring.prometheusRule.notReadyFor=soon"}, want: "notReadyFor"},
		{name: "model URL", chart: "agent", set: []string{"model.baseURL=ftp://models", "model.name=m"}, want: "baseURL"},
		{name: "rule action", chart: "agent", set: append([]string{"policy.extraRules[0].pattern=ls", "policy.extraRules[0].action=Maybe"}, model...), want: "action"},
		{name: "rule children", chart: "agent", set: append([]string{"policy.extraRules[0].pattern=ls", "policy.extraRules[0].action=Always",
			"policy.extraRules[0].children=Always"}, model...), want: "children"},
		{name: "rule trusting children it never starts", chart: "agent", set: append([]string{"policy.extraRules[0].pattern=ls",
			"policy.extraRules[0].action=Never", "policy.extraRules[0].children=Trusted"}, model...), want: "action"},
		{name: "skill name", chart: "agent", set: append([]string{"skills.names[0]=Not_A_Skill"}, model...), want: "names"},
		{name: "agent name", chart: "agent", set: append([]string{"fullnameOverride=Ops"}, model...), want: "fullnameOverride"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := release{name: "x", namespace: "default", chart: chartPath(tt.chart), set: tt.set}
			_, err := helm(append([]string{"template"}, r.args()...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("helm template with %v: got %v, want an error about %s", tt.set, err, tt.want)
			}
		})
	}
}
