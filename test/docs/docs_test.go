// Package docs checks that the manifests shown in docs/ work: every YAML
// code block that holds Kubernetes objects is applied, with a server-side
// dry-run, to a real API server with the kubeskills CRDs, and the Skills
// and CommandPolicies among them pass the operator's own checks.
package docs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/policyapi"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillapi"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env = e
		return nil
	}))
}

// block is a fenced ```yaml code block of a Markdown file.
type block struct {
	line int
	text string
}

// yamlBlocks returns the ```yaml blocks of a Markdown file.
func yamlBlocks(t *testing.T, path string) []block {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var blocks []block
	var cur *block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur = &block{line: n}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: the yaml block is never closed", path, cur.line)
	}
	return blocks
}

// manifests decodes a block into objects. A block is a manifest when one of
// its documents has an apiVersion and a kind; then all of them must. Other
// blocks (fragments of a spec, values files) give none.
func manifests(text string) ([]*unstructured.Unstructured, error) {
	var docs []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		if len(doc) > 0 {
			docs = append(docs, doc)
		}
	}
	var objs []*unstructured.Unstructured
	for _, doc := range docs {
		_, hasAPIVersion := doc["apiVersion"]
		_, hasKind := doc["kind"]
		if hasAPIVersion && hasKind {
			objs = append(objs, &unstructured.Unstructured{Object: doc})
		}
	}
	if len(objs) > 0 && len(objs) != len(docs) {
		return nil, fmt.Errorf("%d of %d documents lack apiVersion or kind", len(docs)-len(objs), len(docs))
	}
	return objs, nil
}

// docFiles lists the Markdown files under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	root := filepath.Join(testenv.RepoRoot(), "docs")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDocManifests applies every manifest of docs/ with a server-side
// dry-run, in a namespace of its own per file, and runs the operator's
// checks on Skills, skill source ConfigMaps and CommandPolicies, so an
// example that would be refused, or would not become Ready, fails here.
// Each page of a kind shows at least one complete object of its kind.
func TestDocManifests(t *testing.T) {
	ctx := context.Background()
	shown := map[string]map[string]bool{}
	for _, path := range docFiles(t) {
		rel, _ := filepath.Rel(testenv.RepoRoot(), path)
		t.Run(rel, func(t *testing.T) {
			ns := ""
			kinds := map[string]bool{}
			shown[rel] = kinds
			for _, b := range yamlBlocks(t, path) {
				objs, err := manifests(b.text)
				if err != nil {
					t.Errorf("%s:%d: %v", rel, b.line, err)
					continue
				}
				if len(objs) > 0 && ns == "" {
					ns = env.Namespace(t)
				}
				for _, u := range objs {
					id := fmt.Sprintf("%s:%d: %s %s", rel, b.line, u.GetKind(), u.GetName())
					kinds[u.GetKind()] = true
					namespaced, err := env.Client.IsObjectNamespaced(u)
					if err != nil {
						t.Errorf("%s: %v", id, err)
						continue
					}
					if namespaced {
						u.SetNamespace(ns)
					}
					err = env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
						client.DryRunAll, client.FieldOwner("kubeskills-docs-test"), client.ForceOwnership)
					if err != nil {
						t.Errorf("%s: the API server refuses it: %v", id, err)
						continue
					}
					if err := operatorChecks(u); err != nil {
						t.Errorf("%s: %v", id, err)
					}
				}
			}
		})
	}
	for page, kind := range map[string]string{
		"docs/skill.md":         "Skill",
		"docs/agent.md":         "Agent",
		"docs/commandpolicy.md": "CommandPolicy",
		"docs/commandrun.md":    "CommandRun",
	} {
		if !shown[page][kind] {
			t.Errorf("%s shows no %s manifest", page, kind)
		}
	}
}

// operatorChecks runs what the operator checks beyond the API server, on
// the kinds it judges.
func operatorChecks(u *unstructured.Unstructured) error {
	switch {
	case u.GetAPIVersion() == skillsv1.GroupVersion.String() && u.GetKind() == "Skill":
		obj := &skillsv1.Skill{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
			return err
		}
		return skillErr(obj)
	case u.GetAPIVersion() == skillsv1.GroupVersion.String() && u.GetKind() == "CommandPolicy":
		obj := &skillsv1.CommandPolicy{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
			return err
		}
		if _, err := policyapi.Compile(obj); err != nil {
			return fmt.Errorf("the policy would not be in force: %w", err)
		}
	case u.GetAPIVersion() == "v1" && u.GetKind() == "ConfigMap" && u.GetLabels()[skillsv1.LabelSkillSource] == "true":
		cm := &corev1.ConfigMap{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, cm, true); err != nil {
			return err
		}
		obj, err := skillapi.FromSource(cm.Name, cm.Namespace, cm.Data, cm.BinaryData)
		if err != nil {
			return fmt.Errorf("the skill source holds no Skill: %w", err)
		}
		return skillErr(obj)
	}
	return nil
}

// skillErr reports what would keep a Skill from being served.
func skillErr(obj *skillsv1.Skill) error {
	s, problems := skillapi.FromObject(obj)
	report := skill.Validate(s, skill.Options{ExpectedName: obj.Name})
	problems = append(problems, report.Errors...)
	if len(problems) > 0 {
		return fmt.Errorf("the Skill would not be served: %v", skill.Report{Errors: problems}.Err())
	}
	return nil
}
