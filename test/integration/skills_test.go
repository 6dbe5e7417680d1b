// Package integration runs the product's pieces together against a real
// kube-apiserver and etcd: the kubectl plugin, kubectl itself and the
// operator.
package integration

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

var (
	env        *testenv.Env
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env = e
		dir, err := os.MkdirTemp("", "kubeskills-integration-")
		if err != nil {
			panic(err)
		}
		if kubeconfig, err = e.WriteAdminKubeconfig(dir); err != nil {
			panic(err)
		}
		operator, err := operatortest.Start(e, manager.Options{})
		if err != nil {
			panic(err)
		}
		return func() { operator.Stop(); _ = os.RemoveAll(dir) }
	}))
}

// TestSamplesImportApplyServeExport is the whole path of a skill folder:
// `kubectl skills import` of every sample, `kubectl apply --server-side` to
// the API server, the operator serving each one Ready with ConfigMaps whose
// content is the folder, and `kubectl skills export` from the cluster giving
// the folder back byte for byte.
func TestSamplesImportApplyServeExport(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	folders := clitest.SampleFolders(t)
	g.Expect(len(folders)).To(BeNumerically(">=", 12))

	args := append([]string{"import", "-n", "default"}, folders...)
	res := clitest.Run("", args...)
	g.Expect(res.Code).To(Equal(0), res.Stderr)
	manifest := filepath.Join(t.TempDir(), "skills.yaml")
	g.Expect(os.WriteFile(manifest, []byte(res.Stdout), 0o600)).To(Succeed())
	out, err := exec.Command(env.KubectlPath(), "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", manifest).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	for _, folder := range folders {
		name := filepath.Base(folder)
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			obj := &skillsv1.Skill{}
			g.Eventually(func(g Gomega) {
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, obj)).To(Succeed())
				ready := apimeta.FindStatusCondition(obj.Status.Conditions, skillsv1.ReadyCondition)
				g.Expect(ready).NotTo(BeNil())
				g.Expect(ready.ObservedGeneration).To(Equal(obj.Generation))
				g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
			}, 30*time.Second, 50*time.Millisecond).Should(Succeed())

			want, err := skill.ParseDir(folder)
			g.Expect(err).NotTo(HaveOccurred())
			served, err := skill.Unpack(servedShards(g, ctx, name))
			g.Expect(err).NotTo(HaveOccurred())
			skillMD, err := os.ReadFile(filepath.Join(folder, skill.SkillFileName))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(skill.Render(served))).To(Equal(string(skillMD)), "served SKILL.md differs from the folder's")
			g.Expect(served.Files).To(Equal(want.Files), "served files differ from the folder's")
			g.Expect(obj.Status.ContentHash).To(Equal(skill.Hash(served)))

			exported := filepath.Join(t.TempDir(), name)
			res := clitest.Run("", "export", name, "-n", "default", "--kubeconfig", kubeconfig, "-o", exported)
			g.Expect(res.Code).To(Equal(0), res.Stderr)
			clitest.CompareFolders(t, folder, exported)
		})
	}
}

// servedShards reads a Skill's ConfigMaps, shard 0 first.
func servedShards(g Gomega, ctx context.Context, name string) []skill.Shard {
	_, shards, err := operatortest.ServedShards(ctx, env.Client, "default", name)
	g.Expect(err).NotTo(HaveOccurred())
	return shards
}

// TestLargeSkills: a 70 KB SKILL.md with 1.2 MB of bundled XML is imported
// (compressed to fit one object), applied, served over several ConfigMaps
// and exported back byte for byte; 5 MB of binary assets is refused by the
// import with the way to serve them, and nothing is printed for it.
func TestLargeSkills(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	files := map[string]string{
		"SKILL.md": clitest.SkillMD("office-schemas", "Validates office documents against their XML schemas.",
			"# Office schemas\n\n"+strings.Repeat("Check each element against its schema before you write it.\n", 1200)),
	}
	for i := range 60 {
		files[fmt.Sprintf("schemas/part-%02d.xsd", i)] = fmt.Sprintf("<xs:schema id=%q>\n%s</xs:schema>\n", strconv.Itoa(i),
			strings.Repeat("  <xs:element name=\"field\" type=\"xs:string\" minOccurs=\"0\"/>\n", 340))
	}
	folder := clitest.WriteFolder(t, filepath.Join(t.TempDir(), "office-schemas"), files)
	want, err := skill.ParseDir(folder)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(want.Body)).To(BeNumerically(">", 70_000))
	bundled := 0
	for _, f := range want.Files {
		bundled += len(f.Content)
	}
	g.Expect(bundled).To(BeNumerically(">", 1_200_000))

	res := clitest.Run("", "import", "-n", "default", folder)
	g.Expect(res.Code).To(Equal(0), res.Stderr)
	g.Expect(res.Stderr).To(ContainSubstring("compressed with gzip so the Skill fits in the API server"))
	manifest := filepath.Join(t.TempDir(), "large.yaml")
	g.Expect(os.WriteFile(manifest, []byte(res.Stdout), 0o600)).To(Succeed())
	out, err := exec.Command(env.KubectlPath(), "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", manifest).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	obj := &skillsv1.Skill{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "office-schemas"}, obj)).To(Succeed())
		g.Expect(obj.Status.ServedGeneration).To(Equal(obj.Generation))
	}, 30*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Expect(len(obj.Status.ConfigMaps)).To(BeNumerically(">=", 2))
	served, err := skill.Unpack(servedShards(g, ctx, "office-schemas"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served.Files).To(Equal(want.Files))
	exported := filepath.Join(t.TempDir(), "office-schemas")
	res = clitest.Run("", "export", "office-schemas", "-n", "default", "--kubeconfig", kubeconfig, "-o", exported)
	g.Expect(res.Code).To(Equal(0), res.Stderr)
	clitest.CompareFolders(t, folder, exported)

	assets := clitest.WriteFolder(t, filepath.Join(t.TempDir(), "brand-kit"), map[string]string{
		"SKILL.md": clitest.SkillMD("brand-kit", "Applies the brand to documents.", "# Brand\n\nUse the fonts in assets/.\n"),
	})
	for i := range 5 {
		font := make([]byte, 1_000_000)
		rand.New(rand.NewSource(int64(i))).Read(font)
		g.Expect(os.WriteFile(filepath.Join(assets, fmt.Sprintf("font-%d.ttf", i)), font, 0o644)).To(Succeed())
	}
	res = clitest.Run("", "import", assets)
	g.Expect(res.Code).NotTo(Equal(0))
	g.Expect(res.Stdout).To(BeEmpty(), "nothing half-written")
	g.Expect(res.Stderr).To(ContainSubstring("spec.bundle.image"))
}
