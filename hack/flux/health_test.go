// Package flux pins and builds Flux's source-controller and
// kustomize-controller for the end-to-end tests (go.mod; hack/images builds
// them). Its test holds the health expressions a Flux Kustomization uses
// for the kubeskills kinds to Flux's own evaluator.
package flux

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kustomizeapi "github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/runtime/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// syncFile is the Kustomization whose healthCheckExprs docs/gitops.md
// shows, and which the end-to-end tests apply on real Flux.
const syncFile = "../../examples/skill-repo/flux-sync.yaml"

// healthDir holds the objects the Argo CD health scripts are tested on:
// health/kubeskills.io/KIND/{health_test.yaml,testdata/}.
const healthDir = "../../docs/argocd/health/kubeskills.io"

// fluxStatus is what Flux makes of the status Argo CD's script gives, for an
// object the operator wrote: Degraded is Stalled, which Flux reads as Failed.
var fluxStatus = map[string]string{"Healthy": "Current", "Progressing": "InProgress", "Degraded": "Failed"}

// TestHealthCheckExprs evaluates the healthCheckExprs of flux-sync.yaml,
// with Flux's own evaluator, on every object the Argo CD health scripts of
// the four kinds are tested on, and expects the same reading: healthy,
// in progress or failed.
func TestHealthCheckExprs(t *testing.T) {
	exprs := healthCheckExprs(t)
	for _, kind := range []string{"Skill", "Agent", "CommandPolicy", "SkillRepository"} {
		t.Run(kind, func(t *testing.T) {
			e, ok := exprs[kind]
			if !ok {
				t.Fatalf("%s has no healthCheckExprs for %s", syncFile, kind)
			}
			eval, err := cel.NewStatusEvaluator(&e)
			if err != nil {
				t.Fatal(err)
			}
			var cases struct {
				Tests []struct {
					HealthStatus struct{ Status string } `json:"healthStatus"`
					InputPath    string                  `json:"inputPath"`
				}
			}
			readYAML(t, filepath.Join(healthDir, kind, "health_test.yaml"), &cases)
			if len(cases.Tests) == 0 {
				t.Fatalf("no cases for %s", kind)
			}
			for _, c := range cases.Tests {
				t.Run(strings.TrimSuffix(filepath.Base(c.InputPath), ".yaml"), func(t *testing.T) {
					u := readObject(t, filepath.Join(healthDir, kind, c.InputPath))
					want := fluxStatus[c.HealthStatus.Status]
					if want == "" {
						t.Fatalf("no Flux status for Argo CD's %q", c.HealthStatus.Status)
					}
					got := "Unknown"
					res, err := eval.Evaluate(context.Background(), u)
					if err == nil {
						got = string(res.Status)
					} else if _, hasStatus := u.Object["status"]; hasStatus {
						t.Fatal(err)
					}
					// An object the operator has not yet written a status
					// for has no field the expressions read: Flux reads
					// Unknown, and waits as it waits on InProgress.
					if got == "Unknown" && want == "InProgress" {
						got = want
					}
					if got != want {
						t.Errorf("Flux reads %s, Argo CD reads %s (Flux: %s)", got, c.HealthStatus.Status, want)
					}
				})
			}
		})
	}
}

// healthCheckExprs are the Kustomization's expressions, by kind.
func healthCheckExprs(t *testing.T) map[string]kustomizeapi.HealthCheckExpressions {
	t.Helper()
	data, err := os.ReadFile(syncFile)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kustomizeapi.HealthCheckExpressions{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var obj struct {
			Kind string
			Spec struct {
				HealthCheckExprs []kustomizeapi.CustomHealthCheck `json:"healthCheckExprs"`
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", syncFile, err)
		}
		if obj.Kind != "Kustomization" {
			continue
		}
		for _, e := range obj.Spec.HealthCheckExprs {
			if e.APIVersion != "kubeskills.io/v1alpha1" {
				t.Errorf("%s: healthCheckExprs for %s %s", syncFile, e.APIVersion, e.Kind)
			}
			out[e.Kind] = e.HealthCheckExpressions
		}
	}
	return out
}

// readObject reads an object as the API server serves it: numbers are
// int64, as Flux's observedGeneration check expects.
func readObject(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return u
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
