package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

var (
	env        *testenv.Env
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env = e
		dir, err := os.MkdirTemp("", "kubectl-skills-")
		if err != nil {
			panic(err)
		}
		if kubeconfig, err = e.WriteAdminKubeconfig(dir); err != nil {
			panic(err)
		}
		stopOperator := startOperator(e)
		return func() { stopOperator(); _ = os.RemoveAll(dir) }
	}))
}

// namespace creates a namespace for one test.
func namespace(t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("failed to create namespace %s: %v", name, err)
	}
	return name
}

// run runs the plugin against the test cluster.
func run(args ...string) clitest.Result {
	return clitest.Run("", append(args, "--kubeconfig", kubeconfig)...)
}

// importFile imports args into a manifest file.
func importFile(t *testing.T, args ...string) string {
	t.Helper()
	res := run(append([]string{"import"}, args...)...)
	if res.Code != cli.ExitOK {
		t.Fatalf("import %v exited %d: %s", args, res.Code, res.Stderr)
	}
	path := filepath.Join(t.TempDir(), "skills.yaml")
	if err := os.WriteFile(path, []byte(res.Stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// apply applies a manifest with kubectl's server-side apply, as a person
// would; without a kubectl binary it creates the Skills with the client.
func apply(t *testing.T, manifest string) {
	t.Helper()
	if _, err := os.Stat(env.KubectlPath()); err == nil {
		out, err := exec.Command(env.KubectlPath(), "--kubeconfig", kubeconfig,
			"apply", "--server-side", "--field-manager=kubectl-skills-test", "-f", manifest).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl apply failed: %v\n%s", err, out)
		}
		return
	}
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range clitest.DecodeSkills(t, string(data)) {
		if err := env.Client.Create(context.Background(), obj); err != nil {
			t.Fatalf("failed to create skill %s: %v", obj.Name, err)
		}
	}
}

// exportFromCluster exports a Skill by name and compares it with want.
func exportFromCluster(t *testing.T, ns, name, want string) clitest.Result {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	res := run("export", name, "-n", ns, "-o", out)
	if res.Code != cli.ExitOK {
		t.Fatalf("export %s exited %d: %s", name, res.Code, res.Stderr)
	}
	if want != "" {
		clitest.CompareFolders(t, want, out)
	}
	return res
}

// TestSamplesInCluster applies every sample to the API server, whose
// schema must accept each, then exports each back by name.
func TestSamplesInCluster(t *testing.T) {
	ns := namespace(t, "samples")
	manifest := importFile(t, "--recursive", clitest.SamplesDir(), "-n", ns, "--label", "team=samples")
	apply(t, manifest)

	var list skillsv1.SkillList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"team": "samples"}); err != nil {
		t.Fatal(err)
	}
	folders := clitest.SampleFolders(t)
	if len(list.Items) != len(folders) {
		t.Fatalf("the cluster holds %d Skills, want %d", len(list.Items), len(folders))
	}
	for _, dir := range folders {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			exportFromCluster(t, ns, filepath.Base(dir), dir)
		})
	}
	if res := run("validate", manifest); res.Code != cli.ExitOK {
		t.Errorf("validate of the applied manifest exited %d:\n%s", res.Code, res.Stdout)
	}
}

// TestExportDefaultNamespace exports with the kubeconfig's namespace.
func TestExportDefaultNamespace(t *testing.T) {
	src := filepath.Join(clitest.SamplesDir(), "helm-release-rollback")
	apply(t, importFile(t, src, "-n", "default"))
	exportFromCluster(t, "default", "helm-release-rollback", src)
	out := filepath.Join(t.TempDir(), "again")
	if res := run("export", "helm-release-rollback", "-o", out); res.Code != cli.ExitOK {
		t.Fatalf("export without -n exited %d: %s", res.Code, res.Stderr)
	}
	clitest.CompareFolders(t, src, out)

	res := run("export", "no-such-skill", "-n", "default", "-o", t.TempDir())
	if want := `no Skill "no-such-skill" in namespace "default"`; res.Code != cli.ExitFailed || !strings.Contains(res.Stderr, want) {
		t.Errorf("missing skill: exit %d, stderr %q", res.Code, res.Stderr)
	}
}

// writeRandom writes n bytes below dir: text (printable ASCII) or binary.
func writeRandom(t *testing.T, rng *rand.Rand, path string, n int, text bool) {
	t.Helper()
	data := make([]byte, n)
	for i := range data {
		if text {
			// Letters and spaces: JSON keeps them as they are.
			data[i] = byte('a' + rng.Intn(26))
			if rng.Intn(6) == 0 {
				data[i] = ' '
			}
			if i%80 == 79 {
				data[i] = '\n'
			}
		} else {
			data[i] = byte(rng.Intn(256))
		}
	}
	if !text {
		data[0] = 0xff
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLargeSkills applies a skill of 70 KB SKILL.md and 1.2 MB of bundled
// text, which fits inline, and one of 5 MB of binary assets, which is
// refused and then served from an image with --bundle-image.
func TestLargeSkills(t *testing.T) {
	ns := namespace(t, "large")
	rng := rand.New(rand.NewSource(1))
	parent := t.TempDir()

	large := filepath.Join(parent, "xml-schemas")
	body := strings.Repeat("## Section\n\nValidate documents against the bundled schemas.\n\n", 1200)[:70_000]
	clitest.WriteFolder(t, large, map[string]string{"SKILL.md": clitest.SkillMD("xml-schemas", "Validates office documents against their XML schemas.", body)})
	for i := range 60 {
		writeRandom(t, rng, filepath.Join(large, "schemas", fmt.Sprintf("part-%02d.xsd", i)), 20_000, true)
	}
	apply(t, importFile(t, large, "-n", ns))
	exportFromCluster(t, ns, "xml-schemas", large)

	huge := filepath.Join(parent, "brand-fonts")
	clitest.WriteFolder(t, huge, map[string]string{"SKILL.md": clitest.SkillMD("brand-fonts", "Sets documents in the brand fonts.", "# Fonts\n")})
	for i := range 5 {
		writeRandom(t, rng, filepath.Join(huge, "fonts", fmt.Sprintf("face-%d.otf", i)), 1_000_000, false)
	}
	res := run("import", huge, "-n", ns)
	if res.Code != cli.ExitFailed || res.Stdout != "" || !strings.Contains(res.Stderr, "spec.bundle.image") {
		t.Fatalf("5 MB of assets: exit %d, stderr %q; want a refusal naming spec.bundle.image", res.Code, res.Stderr)
	}
	apply(t, importFile(t, huge, "-n", ns, "--bundle-image", "registry.example.com/skills/{name}:v1"))
	var obj skillsv1.Skill
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "brand-fonts"}, &obj); err != nil {
		t.Fatal(err)
	}
	if obj.Spec.Bundle == nil || obj.Spec.Bundle.Image != "registry.example.com/skills/brand-fonts:v1" || len(obj.Spec.Files) != 0 {
		t.Errorf("stored bundle %+v with %d files", obj.Spec.Bundle, len(obj.Spec.Files))
	}
	res = exportFromCluster(t, ns, "brand-fonts", "")
	if !strings.Contains(res.Stderr, "the bundled files are in the image registry.example.com/skills/brand-fonts:v1") {
		t.Errorf("export of a bundled skill: stderr %q", res.Stderr)
	}
}

// TestObjectLimit applies a skill just below MaxObjectBytes with the most
// files a Skill may bundle, so that the server's own additions (metadata,
// managedFields of server-side apply) must fit in the headroom.
func TestObjectLimit(t *testing.T) {
	ns := namespace(t, "limit")
	rng := rand.New(rand.NewSource(2))
	dir := filepath.Join(t.TempDir(), "at-the-limit")
	clitest.WriteFolder(t, dir, map[string]string{"SKILL.md": clitest.SkillMD("at-the-limit", "Fills the object.", "# Full\n")})
	const files = 512
	// About 80 bytes of JSON per file besides its base64 content.
	perFile := (cli.MaxObjectBytes - 45_000) / files / 4 * 3
	for i := range files {
		writeRandom(t, rng, filepath.Join(dir, "assets", "sub-folder-name", fmt.Sprintf("asset-number-%03d.bin", i)), perFile, false)
	}
	manifest := importFile(t, dir, "-n", ns, "--label", "kubeskills.io/test=limit")
	data, _ := os.ReadFile(manifest)
	objects := clitest.DecodeSkills(t, string(data))
	size, _ := json.Marshal(objects[0])
	if len(size) < cli.MaxObjectBytes-30_000 {
		t.Fatalf("the object is %d bytes, too far below %d to test the limit", len(size), cli.MaxObjectBytes)
	}
	t.Logf("applying a Skill of %d bytes of JSON with %d files", len(size), len(objects[0].Spec.Files))
	apply(t, manifest)
	exportFromCluster(t, ns, "at-the-limit", dir)
}

// TestOddTextInCluster round-trips text that YAML and JSON need care for,
// through kubectl apply and the API server.
func TestOddTextInCluster(t *testing.T) {
	ns := namespace(t, "odd")
	dir := clitest.WriteFolder(t, filepath.Join(t.TempDir(), "odd-text"), map[string]string{
		"SKILL.md":          "---\r\nname: odd-text\r\ndescription: \"yes\"\r\nx-other: {nested: [1, 2]}\r\n---\r\n\tTabbed body \r\n",
		"control.txt":       "nul \x00 bell \x07 escape \x1b[31m del \x7f\n",
		"separators.txt":    "next line \u0085 line \u2028 paragraph \u2029 bom \ufeff nbsp \u00a0\n",
		"yaml-words.txt":    "yes",
		"octal.txt":         "0777",
		"markers.md":        "---\n...\n# not a comment\n",
		"indent.md":         "    indented first line\nnext\n\n\n",
		"emoji.md":          "🚀 launch\n",
		"no-newline.txt":    "end",
		"scripts/run.sh*":   "#!/bin/sh\nprintf '%s\\n' \"$1\"\n",
		"html.html":         "<p>a &amp; b</p>\n",
		"trailing-space.md": "a \nb\t\n",
	})
	apply(t, importFile(t, dir, "-n", ns))
	exportFromCluster(t, ns, "odd-text", dir)
}

// TestKubectlPlugin builds the binary and runs it through kubectl's plugin
// mechanism: `kubectl skills ...` with kubectl-skills on PATH.
func TestKubectlPlugin(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go tool to build the plugin: %v", err)
	}
	if _, err := os.Stat(env.KubectlPath()); err != nil {
		t.Fatalf("no kubectl beside the API server (make envtest builds it): %v", err)
	}
	bin := t.TempDir()
	if out, err := exec.Command(goTool, "build", "-o", filepath.Join(bin, "kubectl-skills"), ".").CombinedOutput(); err != nil {
		t.Fatalf("failed to build the plugin: %v\n%s", err, out)
	}
	cmd := exec.Command(env.KubectlPath(), "skills", "validate", filepath.Join(clitest.SamplesDir(), "oncall-handoff"))
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "valid (skill oncall-handoff)") {
		t.Errorf("kubectl skills validate: %v\n%s", err, out)
	}
}
