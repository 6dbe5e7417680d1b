package health

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubeskills/kubeskills/internal/testenv"
)

// patchFile is the argocd-cm patch that README.md tells users to apply.
const patchFile = "docs/argocd/argocd-cm-health.yaml"

// healthKey is the argocd-cm key of a kind's health check.
func healthKey(kind string) string {
	return "resource.customizations.health." + Group + "_" + kind
}

// expectScripts asserts that data holds every kind's script, unchanged.
func expectScripts(g Gomega, data map[string]string) {
	for _, kind := range Kinds {
		script, err := os.ReadFile(filepath.Join(KindDir(testenv.RepoRoot(), kind), ScriptFile))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(data).To(HaveKeyWithValue(healthKey(kind), string(script)), "%s must hold %s/%s", healthKey(kind), kind, ScriptFile)
	}
}

var update = flag.Bool("update", false, "rewrite "+patchFile+" from the scripts")

// patchHeader opens the argocd-cm patch.
const patchHeader = `# Argo CD health checks for the kubeskills.io kinds, as a patch of the
# argocd-cm ConfigMap. Each value is the script in
# health/kubeskills.io/<Kind>/health.lua. See README.md to install it.
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
data:
`

// renderPatch writes the argocd-cm patch holding every kind's script.
func renderPatch(g Gomega) []byte {
	var b bytes.Buffer
	b.WriteString(patchHeader)
	for _, kind := range Kinds {
		script, err := os.ReadFile(filepath.Join(KindDir(testenv.RepoRoot(), kind), ScriptFile))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(script)).To(And(HaveSuffix("\n"), Not(HaveSuffix("\n\n")), Not(HavePrefix(" "))),
			"%s/%s must fit a YAML literal block", kind, ScriptFile)
		fmt.Fprintf(&b, "  %s: |\n", healthKey(kind))
		for _, line := range strings.SplitAfter(strings.TrimSuffix(string(script), "\n"), "\n") {
			if strings.TrimSpace(line) != "" {
				b.WriteString("    ")
			}
			b.WriteString(strings.TrimRight(line, " \n") + "\n")
		}
	}
	return b.Bytes()
}

// TestConfigMapPatchHoldsTheScripts: the patch holds the five scripts as
// they are tested, and nothing else. Run with -update to rewrite it.
func TestConfigMapPatchHoldsTheScripts(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(testenv.RepoRoot(), patchFile)
	want := renderPatch(g)
	if *update {
		g.Expect(os.WriteFile(path, want, 0o644)).To(Succeed())
	}
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal(string(want)), "%s is stale: run go test ./test/health -run TestConfigMapPatchHoldsTheScripts -update", patchFile)
	cm := &corev1.ConfigMap{}
	g.Expect(yaml.UnmarshalStrict(data, cm)).To(Succeed())
	g.Expect(cm.Name).To(Equal("argocd-cm"))
	g.Expect(cm.Namespace).To(BeEmpty(), "a namespace in the patch would tie it to one Argo CD install")
	g.Expect(cm.Data).To(HaveLen(len(Kinds)))
	expectScripts(g, cm.Data)
}

// kustomization is the one README.md shows for an Argo CD installed with
// kustomize.
const kustomization = `namespace: argocd
resources:
- install.yaml
patches:
- path: argocd-cm-health.yaml
  target:
    kind: ConfigMap
    name: argocd-cm
`

// TestConfigMapPatchInstalls follows README.md: kubectl patch on a running
// argocd-cm, and a kustomize patch of an Argo CD install, both keep the
// settings already there and add the five checks.
func TestConfigMapPatchInstalls(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	kubeconfigPath, err := env.WriteAdminKubeconfig(dir)
	g.Expect(err).NotTo(HaveOccurred())
	patch := filepath.Join(testenv.RepoRoot(), patchFile)
	existing := map[string]string{"url": "https://argocd.example.com", "timeout.reconciliation": "180s"}

	t.Run("kubectl patch", func(t *testing.T) {
		g := NewWithT(t)
		ns := namespace(t)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "argocd-cm"}, Data: existing}
		g.Expect(k8s.Create(context.Background(), cm)).To(Succeed())
		out, err := exec.Command(env.KubectlPath(), "--kubeconfig", kubeconfigPath, "-n", ns,
			"patch", "configmap", "argocd-cm", "--type", "merge", "--patch-file", patch).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(cm), cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveLen(len(existing) + len(Kinds)))
		g.Expect(cm.Data).To(HaveKeyWithValue("url", existing["url"]))
		expectScripts(g, cm.Data)
	})

	t.Run("kustomize", func(t *testing.T) {
		g := NewWithT(t)
		base := &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm"},
			Data:       existing,
		}
		baseYAML, err := yaml.Marshal(base)
		g.Expect(err).NotTo(HaveOccurred())
		patchYAML, err := os.ReadFile(patch)
		g.Expect(err).NotTo(HaveOccurred())
		files := map[string][]byte{
			"install.yaml":          baseYAML,
			"argocd-cm-health.yaml": patchYAML,
			"kustomization.yaml":    []byte(kustomization),
		}
		for name, data := range files {
			g.Expect(os.WriteFile(filepath.Join(dir, name), data, 0o644)).To(Succeed())
		}
		out, err := exec.Command(env.KubectlPath(), "kustomize", dir).Output()
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			t.Fatalf("kubectl kustomize: %v: %s", err, exitErr.Stderr)
		}
		g.Expect(err).NotTo(HaveOccurred())
		got := &corev1.ConfigMap{}
		g.Expect(yaml.UnmarshalStrict(out, got)).To(Succeed())
		g.Expect(got.Namespace).To(Equal("argocd"))
		g.Expect(got.Data).To(HaveLen(len(existing) + len(Kinds)))
		expectScripts(g, got.Data)
	})
}
